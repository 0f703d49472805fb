"""blockfs.binary(): which executable Mount runs. $BLOCKFS_BIN, then the binary shipped inside
the package (the wheel's), then PATH; a source install with none of them says what to do."""
import os
import shutil
import tempfile
import unittest
from unittest import mock

import support  # noqa: F401 (first: it finds the blockfs package and binary)

import blockfs
import blockfs._binary


class BinaryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="blockfs-bin-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.on_path = self.executable("path", "blockfs")
        self.shipped = self.executable("pkg", "_bin", "blockfs")
        self.env = {k: v for k, v in os.environ.items() if k != "BLOCKFS_BIN"}
        self.env["PATH"] = os.path.dirname(self.on_path)

    def executable(self, *parts, mode=0o755):
        p = os.path.join(self.tmp, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(p, mode)
        return p

    def binary(self, env, shipped):
        with mock.patch.dict(os.environ, env, clear=True), mock.patch.object(blockfs._binary, "PACKAGED", shipped):
            return blockfs.binary()

    def test_lookup_order(self):
        explicit = self.executable("explicit", "blockfs")
        self.assertEqual(self.binary(dict(self.env, BLOCKFS_BIN=explicit), self.shipped), explicit, "$BLOCKFS_BIN first")
        self.assertEqual(self.binary(self.env, self.shipped), self.shipped, "then the package's own, before PATH")
        missing = os.path.join(self.tmp, "none", "_bin", "blockfs")
        self.assertEqual(self.binary(self.env, missing), self.on_path, "then PATH (a source install)")

    def test_not_executable_or_none_says_what_to_do(self):
        plain = self.executable("plain", "blockfs", mode=0o644)
        with self.assertRaisesRegex(FileNotFoundError, "BLOCKFS_BIN=.* is not an executable file"):
            self.binary(dict(self.env, BLOCKFS_BIN=plain), self.shipped)
        with self.assertRaisesRegex(FileNotFoundError, "is not executable .*reinstall the wheel"):
            self.binary(self.env, plain)
        missing = os.path.join(self.tmp, "none", "_bin", "blockfs")
        with self.assertRaises(FileNotFoundError) as e:
            self.binary(dict(self.env, PATH=os.path.join(self.tmp, "empty")), missing)
        msg = str(e.exception)
        self.assertNotIn("\n", msg)
        for want in ("no blockfs executable", "install the wheel", "pip install dist/blockfs-*.whl", "put blockfs on PATH", "BLOCKFS_BIN"):
            self.assertIn(want, msg)


if __name__ == "__main__":
    unittest.main()
