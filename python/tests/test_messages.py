"""What blockfs.Mount says when the data or the runtime directory is wrong: one line naming
the real problem and what to do, as a MountError."""
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

from support import Scratch, needs_mount

import blockfs
from blockfs._mount import is_mounted


@needs_mount
class MissingDataTest(unittest.TestCase):
    def test_missing_file_in_place_is_named(self):
        tmp = tempfile.mkdtemp(prefix="blockfs-py-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        with open(os.path.join(tmp, "train.bin"), "wb") as f:
            f.write(bytes(4096))
        for data, hint in (("/nonexistent.bin", ""), (os.path.join(tmp, "trian.bin"), f" (did you mean {tmp}/train.bin?)")):
            m = blockfs.Mount(data, record_size=4)
            with self.assertRaises(blockfs.MountError) as cm:
                m.open()
            self.assertEqual(str(cm.exception), f"blockfs: {data} does not exist: --record-size serves an existing file "
                                                 f"in place; check the path{hint}")
            self.assertFalse(is_mounted(m.path))
            self.assertFalse(os.path.exists(m.path), "nothing left behind")


class FullRuntimeDirTest(Scratch):
    n = 300

    def test_full_runtime_dir_is_named(self):
        # A runtime directory on a full filesystem (a 16 KiB tmpfs, filled) is a MountError
        # naming the directory, the cause and what to do, its OSError kept as the cause; the
        # mount made before the lock file's write failed is undone and nothing is left.
        if os.getuid() != 0:
            self.skipTest("mounting a tmpfs needs root")
        d = tempfile.mkdtemp(dir=self.tmp)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k,mode=0700", "tmpfs", d], check=True)
        self.addCleanup(subprocess.run, ["umount", d], check=True)
        with open(os.path.join(d, "fill"), "wb", buffering=0) as f:
            with self.assertRaises(OSError):
                while True:
                    f.write(bytes(4096))
        with mock.patch.dict(os.environ, {"BLOCKFS_RUNTIME_DIR": d}):
            m = blockfs.Mount(self.data, seed=3)
            with self.assertRaises(blockfs.MountError) as cm:
                m.open()
        self.assertEqual(str(cm.exception), f"cannot write blockfs.Mount's lock files in {d}: its filesystem is full "
                                             f"(ENOSPC: no space left on device); free space there, or set BLOCKFS_RUNTIME_DIR "
                                             f"to a private directory of yours elsewhere (mode 0700)")
        self.assertIsInstance(cm.exception.__cause__, OSError)
        self.assertFalse(is_mounted(m.path))
        self.assertEqual(os.listdir(d), ["fill"], "nothing left behind")
