"""blockfs.Mount's keywords checked against the options schema the binary publishes (blockfs
options --json): a misspelled option is a TypeError naming the closest one and listing them
all, a value of the wrong kind a TypeError and one out of range a ValueError, each naming the
option, at call time. Checked against a fake binary's schema (no mount needed), and against
the real binary's."""
import json
import os
import pathlib
import shutil
import tempfile
import unittest
from typing import Any, Dict, List, Tuple
from unittest import mock

import numpy as np

import support

import blockfs
import blockfs._binary
from blockfs.options import TYPES, SCOPES, Schema, flags, schema_of

# A table row: keyword options, and what checking them gives (a value, or the start of a message).
Case = Tuple[Dict[str, Any], Any]


def opt(name: str, type: str, default: str = "", scope: str = "mount", **more: Any) -> Dict[str, Any]:
    return dict(name=name, key=name.replace("-", "_"), type=type, default=default, scope=scope, help=name + " help", **more)


# A schema as `blockfs options --json` prints it: one option of every type.
SCHEMA: Dict[str, Any] = {"options": [
    opt("seed", "uint", "0", "source"),
    opt("node", "int", "0"),
    opt("cache-size", "size", "auto"),
    opt("offset", "size", "0", "source"),
    opt("dtype", "string", "", "source"),
    opt("log", "path", "", "process"),
    opt("s3-timeout", "duration", "30s", "source"),
    opt("shape", "shape", "", "source"),
    opt("shuffle", "enum", "full", "source", choices=["full", "blocks", "none"]),
    opt("mix", "uint", "auto", "source"),
    opt("verify", "bool", "false", "source"),
    opt("lazy-meta", "bool", "true"),
    opt("daemon", "bool", "false", "process"),
    opt("users-lock", "path", ""),
    opt("remove-mountpoint", "bool", "false"),
    opt("cpuprofile", "path", "", "process", hidden=True),
    opt("future", "colour", "red"),
]}

VISIBLE = ["cache_size", "daemon", "dtype", "future", "lazy_meta", "log", "mix", "node", "offset", "remove_mountpoint",
           "s3_timeout", "seed", "shape", "shuffle", "users_lock", "verify"]


class SchemaTest(unittest.TestCase):
    def setUp(self) -> None:
        self.schema = Schema.from_json(SCHEMA)

    def check(self, **kw: Any) -> Dict[str, Any]:
        return self.schema.check(kw)

    def test_unknown_keyword_names_the_closest_and_lists_all(self) -> None:
        with self.assertRaises(TypeError) as cm:
            self.check(seed=1, cache_sise="4GiB")
        msg = str(cm.exception)
        self.assertEqual(msg, "blockfs.Mount() got an unexpected keyword argument 'cache_sise' (did you mean cache_size?); "
                              "its options are " + ", ".join(VISIBLE))
        self.assertNotIn("cpuprofile", msg, "hidden options are not listed")
        with self.assertRaisesRegex(TypeError, r"'colour'; its options are cache_size, "):
            self.check(colour=1)  # nothing close

    def test_values_as_their_flags_take_them(self) -> None:
        got = self.check(seed=3, node=-1, cache_size="auto", offset=4096, dtype="<f4", log=pathlib.Path("/tmp/x.log"),
                         s3_timeout=1.5, shape=(3, 32, 32), shuffle="blocks", mix="auto", verify=True,
                         lazy_meta=False, cpuprofile="/tmp/p", future=[1])
        self.assertEqual(got, dict(seed=3, node=-1, cache_size="auto", offset=4096, dtype="<f4", log="/tmp/x.log",
                                   s3_timeout="1.5s", shape="3,32,32", shuffle="blocks", mix="auto", verify=True,
                                   lazy_meta="false", cpuprofile="/tmp/p", future=[1]))
        self.assertEqual(flags(got)[:3], ["--cache-size=auto", "--cpuprofile=/tmp/p", "--dtype=<f4"])
        self.assertIn("--lazy-meta=false", flags(got), "False of a bool that is on by default is said")
        self.assertIn("--verify", flags(got))
        cases: List[Case] = [(dict(cache_size="64MiB"), "64MiB"), (dict(cache_size="1.5 GiB"), "1.5 GiB"),
                             (dict(s3_timeout="1m30s"), "1m30s"), (dict(s3_timeout=30), "30s"), (dict(shape="3, 32"), "3, 32"),
                             (dict(shape=[8]), "8"), (dict(seed=None), None)]
        for kw, want in cases:
            self.assertEqual(list(self.check(**kw).values()), [want], kw)
        self.assertEqual(flags(self.check(seed=None, verify=False)), [], "None and False leave the flag out")

    def test_wrong_kind_is_a_type_error_naming_the_option(self) -> None:
        cases: List[Case] = [(dict(seed="1"), "seed= takes an int, not str '1'"),
                             (dict(seed=True), "seed= takes an int, not bool True"),
                             (dict(node=1.0), "node= takes an int, not float 1.0"),
                             (dict(verify=1), "verify= takes True or False, not int 1"),
                             (dict(cache_size=1.5), 'cache_size= takes bytes, an int or a str with units such as "64MiB", '
                                                "not float 1.5 (or \"auto\")"),
                             (dict(dtype=4), "dtype= takes a str, not int 4"),
                             (dict(log=3), "log= takes a path (str or os.PathLike), not int 3"),
                             (dict(s3_timeout=True), "s3_timeout= takes a duration"),
                             (dict(shape=(3, "a")), "shape= takes a shape, a list or tuple of ints"),
                             (dict(shuffle=1), "shuffle= takes a str, one of full, blocks, none, not int 1"),
                             (dict(mix="2"), "mix= takes an int, not str '2' (or \"auto\")")]
        for kw, want in cases:
            with self.assertRaises(TypeError, msg=str(kw)) as cm:
                self.check(**kw)
            self.assertTrue(str(cm.exception).startswith(want), f"{kw}: {cm.exception}")

    def test_out_of_range_is_a_value_error_naming_the_option(self) -> None:
        cases: List[Case] = [(dict(seed=-1), "seed=-1: must not be negative"),
                             (dict(offset=-4096), "offset=-4096: must not be negative"),
                             (dict(cache_size="lots"), "cache_size='lots': is not a size"),
                             (dict(offset="auto"), "offset='auto': is not a size"),
                             (dict(s3_timeout="30 seconds"), "s3_timeout='30 seconds': is not a duration"),
                             (dict(s3_timeout=-1), "s3_timeout=-1: must not be negative"),
                             (dict(shape="3x32"), "shape='3x32': is not a shape"),
                             (dict(shape=(3, 0)), "shape=(3, 0): dimensions must be at least 1"),
                             (dict(shuffle="random"), "shuffle='random': is not one of full, blocks, none")]
        for kw, want in cases:
            with self.assertRaises(ValueError, msg=str(kw)) as cm:
                self.check(**kw)
            self.assertTrue(str(cm.exception).startswith(want), f"{kw}: {cm.exception}")

    def test_scopes(self) -> None:
        self.assertEqual(self.schema.names({"source"}), ["dtype", "mix", "offset", "s3_timeout", "seed", "shape", "shuffle", "verify"])
        self.assertEqual(self.schema.check({"seed": 1}, "a mixture source", {"source"}), {"seed": 1})
        with self.assertRaisesRegex(TypeError, r"^a mixture source got an unexpected keyword argument 'cache_size' "
                                               r"\(it is a mount option, not one of source\); its options are dtype, mix, "):
            self.schema.check({"cache_size": 1}, "a mixture source", {"source"})

    def test_bad_schema_refused(self) -> None:
        for doc in ({}, {"options": {}}, {"options": [{"type": "int"}]}, {"options": [{"name": "x", "type": 3}]},
                    {"options": [{"name": "x", "type": "enum", "choices": "ab"}]}):
            with self.assertRaises(ValueError, msg=str(doc)):
                Schema.from_json(doc)


class FakeBinaryTest(unittest.TestCase):
    """Mount reads the schema from the binary it runs, once per binary path and mtime."""

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="blockfs-opts-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.calls = os.path.join(self.tmp, "calls")
        with open(os.path.join(self.tmp, "schema.json"), "w") as f:
            json.dump(SCHEMA, f)
        self.bin = self.script("blockfs", f'[ "$1 $2" = "options --json" ] || exit 2\necho >> {self.calls}\ncat {self.tmp}/schema.json\n')
        env = mock.patch.dict(os.environ, {"BLOCKFS_BIN": self.bin, "BLOCKFS_RUNTIME_DIR": os.path.join(self.tmp, "run")})
        env.start()
        self.addCleanup(env.stop)
        os.mkdir(os.path.join(self.tmp, "run"), 0o700)

    def script(self, name: str, body: str) -> str:
        p = os.path.join(self.tmp, name)
        with open(p, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(p, 0o755)
        return p

    def reads(self) -> int:
        with open(self.calls) as f:
            return len(f.read())

    def test_mount_checks_at_call_time(self) -> None:
        with self.assertRaisesRegex(TypeError, r"^blockfs.Mount\(\) got an unexpected keyword argument 'sead' \(did you mean seed\?\); "
                                               r"its options are cache_size, dtype, future, lazy_meta, log, mix, node, offset, "
                                               r"s3_timeout, seed, shape, shuffle, verify$"):
            blockfs.Mount(self.tmp, sead=1)
        with self.assertRaisesRegex(ValueError, "^shuffle='random': is not one of full, blocks, none"):
            blockfs.Mount(self.tmp, shuffle="random")
        with self.assertRaisesRegex(TypeError, r"^blockfs.Mount\(\) sets daemon= itself: leave it out"):
            blockfs.Mount(self.tmp, daemon=True)
        m = blockfs.Mount(self.tmp, seed=1, shape=(3, 4), log=pathlib.Path(self.tmp) / "log")
        self.assertEqual(m.options, {"seed": 1, "shape": "3,4", "log": os.path.join(self.tmp, "log")})
        self.assertEqual(self.reads(), 1, "the schema is read once per binary")
        st = os.stat(self.bin)
        os.utime(self.bin, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        blockfs.Mount(self.tmp, seed=2)
        self.assertEqual(self.reads(), 2, "a rebuilt binary's schema is read again")

    def test_binary_without_schema_checks_nothing(self) -> None:
        old = self.script("old", "echo 'blockfs: unknown command \"options\" for \"blockfs\"' >&2\nexit 1\n")
        self.assertIsNone(schema_of(old))
        with mock.patch.dict(os.environ, {"BLOCKFS_BIN": old}):
            self.assertEqual(blockfs.Mount(self.tmp, sead=1).options, {"sead": 1}, "the binary says what is wrong")

    def test_no_binary_checks_nothing(self) -> None:
        with mock.patch.dict(os.environ, {"BLOCKFS_BIN": ""}), mock.patch.object(blockfs._binary, "PACKAGED", "/nonexistent"), \
                mock.patch.dict(os.environ, {"PATH": self.tmp + "/none"}):
            self.assertEqual(blockfs.Mount(self.tmp, sead=1).options, {"sead": 1}, "open says there is no binary")


@support.needs_mount
class RealSchemaTest(unittest.TestCase):
    """The schema of the binary the tests run (support.BINARY)."""

    def setUp(self) -> None:
        s = schema_of(support.BINARY)
        if s is None:
            self.fail(f"{support.BINARY} publishes no options schema (blockfs options --json): rebuild it (make build)")
        self.schema: Schema = s

    def test_every_option_has_a_known_type_and_scope(self) -> None:
        for o in self.schema.options.values():
            self.assertIn(o.type, TYPES, o)
            self.assertIn(o.scope, SCOPES, o)
            self.assertEqual(o.key, o.name.replace("-", "_"))
            if o.type == "enum":
                self.assertTrue(o.choices, o)
                self.assertIn(o.default, list(o.choices) + [""], o)
        names: List[str] = self.schema.names()
        for k in ("seed", "shuffle", "cache_size", "record_size", "shape", "s3_timeout", "users_lock"):
            self.assertIn(k, names)

    def test_mount_refuses_a_misspelling(self) -> None:
        with self.assertRaises(TypeError) as cm:
            blockfs.Mount("/nonexistent", cache_sise="1GiB")
        want = "blockfs.Mount() got an unexpected keyword argument 'cache_sise' (did you mean cache_size?); its options are "
        self.assertTrue(str(cm.exception).startswith(want), cm.exception)
        listed = str(cm.exception)[len(want):].split(", ")
        self.assertEqual(listed, [n for n in self.schema.names() if n not in ("daemon", "users_lock", "remove_mountpoint")],
                         "every option users give, not those Mount gives itself")
        with self.assertRaisesRegex(ValueError, "^shuffle='random'"):
            blockfs.Mount("/nonexistent", shuffle="random")
        with self.assertRaisesRegex(TypeError, r"sets users_lock= itself"):
            blockfs.Mount("/nonexistent", users_lock="/tmp/x")


    def test_python_values_mount(self) -> None:
        # Values in Python's own forms (a shape tuple, int sizes, a pathlib.Path, bools) reach
        # the binary as its flags take them.
        tmp = tempfile.mkdtemp(prefix="blockfs-opts-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        raw = os.path.join(tmp, "x.f32")
        np.arange(64 * 8, dtype="<f4").tofile(raw)
        log = pathlib.Path(tmp) / "mount.log"
        with blockfs.Mount(raw, dtype="<f4", shape=(2, 4), block_size=4096, readahead=0, seed=1, verify=False, log=log) as m:
            assert m.info is not None
            self.assertEqual((m.info["dtype"], m.info["shape"], m.info["record_size"], m.info["records"]), ("<f4", [2, 4], 32, 64))
            got = np.fromfile(blockfs.epoch_path(m, 0), dtype="<f4").reshape(-1, 8)
            np.testing.assert_array_equal(np.sort(got[:, 0]), np.arange(64) * 8.0)


if __name__ == "__main__":
    unittest.main()
