"""blockfs.pack_parallel: pack's flags from keywords, the parts run on a Dask LocalCluster of
worker processes or local processes, every failed part reported by name with its message,
retries, and the merge. FakeBinary's tests run a stand-in for the binary that logs its
arguments (no blockfs needed); PackParallelTest packs real datasets in parts, into a directory
and into MinIO (test/python_pkg_test.go sets BLOCKFS_TEST_S3_*), and checks them with
blockfs verify, a mount and every record of two epochs."""
import json
import os
import pathlib
import shutil
import sys
import tempfile
import textwrap
import unittest
import uuid

import numpy as np

from support import COLS, needs_mount, run  # noqa: F401 (PackParallelTest)

import blockfs
from blockfs.parallel import PackError, pack_flags, part_args

try:
    import distributed
except ImportError:  # make test installs python3-distributed; a bare checkout may lack it
    distributed = None  # type: ignore[assignment]

EP = os.environ.get("BLOCKFS_TEST_S3_ENDPOINT")
BUCKET = os.environ.get("BLOCKFS_TEST_S3_BUCKET")
REQUIRED = os.environ.get("BLOCKFS_REQUIRE_FUSE") == "1"
needs_dask = unittest.skipIf(distributed is None and not REQUIRED, "needs Dask distributed (apt-get install python3-distributed)")

# A stand-in for the binary: it appends its parent's pid and its arguments to "log" (one JSON
# list a line); pack
# --part=I/N fails as FAILS says (a line "I" fails part I once per such line), or when an
# input is missing, else writes OUT/parts/part-I-of-N.json; pack --merge writes
# OUT/blockfs.json; info prints the records it was told (RECORDS).
FAKE = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    here = os.path.dirname(os.path.abspath(__file__))
    args = sys.argv[1:]
    with open(os.path.join(here, "log"), "a") as f:
        f.write(json.dumps([os.getppid(), args]) + "\\n")
    out = args[-1]
    if args[0] == "info":
        print("dataset:      " + out)
        print("records:      1234 fixed-size, 32 B each")
        sys.exit(0)
    if "--merge" in args:
        if os.path.exists(os.path.join(here, "merge-fails")):
            sys.exit("blockfs: pack --merge: part 2 of 4 is missing")
        open(os.path.join(out, "blockfs.json"), "w").close()
        sys.exit(0)
    part = [a for a in args if a.startswith("--part=")][0].split("=")[1]
    i, n = part.split("/")
    fails = os.path.join(here, "fails")
    lines = open(fails).read().splitlines() if os.path.exists(fails) else []
    if i in lines:
        lines.remove(i)
        open(fails, "w").write("".join(l + "\\n" for l in lines))
        print("progress that is not the message", file=sys.stderr)
        sys.exit("blockfs: part %s: boom" % i)
    for a in args[1:-1]:
        if not a.startswith("--") and not os.path.exists(a):
            sys.exit("blockfs: %s: no such file" % a)
    os.makedirs(os.path.join(out, "parts"), exist_ok=True)
    open(os.path.join(out, "parts", "part-%s-of-%s.json" % (i, n)), "w").close()
""")


def local_cluster():
    """A Dask LocalCluster of 2 worker processes of a thread each, and its client."""
    if distributed is None:
        raise RuntimeError("no Dask distributed (apt-get install python3-distributed); BLOCKFS_REQUIRE_FUSE=1: may not skip")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None)
    return cluster, distributed.Client(cluster)


class FlagsTest(unittest.TestCase):
    def test_pack_flags(self):
        got = pack_flags(record_size=4096, seed=7, no_shuffle=True, force=False, endpoint=None,
                         include=["*.png", "*.jpg"], block_size="4KiB", spill=pathlib.Path("/tmp/x"))
        self.assertEqual(got, ["--record-size=4096", "--seed=7", "--no-shuffle", "--include=*.png", "--include=*.jpg",
                               "--block-size=4KiB", "--spill=/tmp/x"])
        for bad, why in (({"part": "1/2"}, "sets part= itself"), ({"merge": True}, "sets merge= itself"),
                         ({"Record-Size": 4}, "not the keyword of a pack option"), ({"seed": {}}, "takes a str")):
            with self.assertRaisesRegex(TypeError, why):
                pack_flags(**bad)

    def test_part_args(self):
        self.assertEqual(part_args(["/a.npy", "/b.npy"], "/out", 2, 4, ["--seed=1"]),
                         ["pack", "--part=2/4", "--quiet", "--seed=1", "/a.npy", "/b.npy", "/out"])

    def test_bad_arguments(self):
        for kw, why in (({"parts": 0}, "parts=0"), ({"parts": True}, "parts=True"), ({"parts": 2, "retries": -1}, "retries=-1")):
            with self.assertRaisesRegex(ValueError, why):
                blockfs.pack_parallel(["x"], "out", **kw)
        with self.assertRaisesRegex(ValueError, "no inputs"):
            blockfs.pack_parallel([], "out", 2)


class FakeBinary(unittest.TestCase):
    """pack_parallel with the stand-in binary: locally, and on a LocalCluster when the class
    has one (FakeBinaryDask)."""

    client = None

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="blockfs-par-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.fake = os.path.join(self.tmp, "blockfs")
        with open(self.fake, "w") as f:
            f.write(FAKE.format(python=sys.executable))
        os.chmod(self.fake, 0o755)
        self.inputs = []
        for name in ("b.npy", "a.npy", "c.npy"):  # in the order given, not sorted
            self.inputs.append(os.path.join(self.tmp, name))
            open(self.inputs[-1], "w").close()
        self.out = os.path.join(self.tmp, "out")
        os.mkdir(self.out)

    def pack(self, inputs=None, **kw):
        return blockfs.pack_parallel(inputs or self.inputs, self.out, 4, self.client, binary=self.fake, **kw)

    def log(self, pids=False):
        """The arguments of every run of the binary, in order (with pids: the pids of the
        processes that ran them)."""
        with open(os.path.join(self.tmp, "log")) as f:
            return [json.loads(line)[0 if pids else 1] for line in f]

    def fail(self, *parts):
        with open(os.path.join(self.tmp, "fails"), "a") as f:
            f.write("".join(f"{p}\n" for p in parts))

    def test_parts_then_merge(self):
        r = self.pack(seed=7, record_size="4KiB", no_shuffle=True, endpoint="http://127.0.0.1:1", s3_retries=2)
        self.assertEqual((r.out, r.parts, r.records, r.runs), (self.out, 4, 1234, (1, 1, 1, 1)))
        self.assertEqual(len(r.part_seconds), 4)
        self.assertGreaterEqual(r.seconds, max(r.part_seconds))
        log = self.log()
        flags = ["--quiet", "--seed=7", "--record-size=4KiB", "--no-shuffle", "--endpoint=http://127.0.0.1:1", "--s3-retries=2"]
        self.assertEqual(sorted(log[:4]), [["pack", f"--part={i}/4"] + flags + self.inputs + [self.out] for i in range(4)])
        store = ["--endpoint=http://127.0.0.1:1", "--s3-retries=2"]
        self.assertEqual(log[4:], [["pack", "--merge"] + store + [self.out], ["info"] + store + [self.out]])
        self.assertEqual(sorted(os.listdir(os.path.join(self.out, "parts"))), [f"part-{i}-of-4.json" for i in range(4)])

    def test_relative_paths_are_made_absolute(self):
        os.mkdir(os.path.join(self.tmp, "in"))
        open(os.path.join(self.tmp, "in", "list"), "w").close()
        cwd = os.getcwd()
        os.chdir(self.tmp)
        try:
            blockfs.pack_parallel(["a.npy", "@in/list", "s3://b/x-*.tar", pathlib.Path("c.npy")], "out", 1, self.client,
                                  binary=self.fake)
        except PackError:
            pass  # the stand-in finds no file "@in/list" nor the URL: only the arguments matter
        finally:
            os.chdir(cwd)
        want = [os.path.join(self.tmp, "a.npy"), "@" + os.path.join(self.tmp, "in", "list"), "s3://b/x-*.tar",
                os.path.join(self.tmp, "c.npy"), self.out]
        self.assertEqual(self.log()[0][-5:], want)

    def test_every_failed_part_is_named(self):
        self.fail(1, 3)
        with self.assertRaises(PackError) as cm:
            self.pack()
        e = cm.exception
        self.assertEqual(e.failures, {1: "blockfs: part 1: boom", 3: "blockfs: part 3: boom"})
        msg = str(e)
        self.assertIn(f"2 of 4 parts failed packing into {self.out}", msg)
        self.assertIn("part 1/4: blockfs: part 1: boom", msg)
        self.assertIn("part 3/4: blockfs: part 3: boom", msg)
        self.assertNotIn("progress", msg, "the last line of stderr is the message")
        log = self.log()
        self.assertEqual(len(log), 4, "every part ran, and no merge")
        self.assertEqual(sorted(os.listdir(os.path.join(self.out, "parts"))), ["part-0-of-4.json", "part-2-of-4.json"],
                         "the others finished")

    def test_a_missing_input(self):
        missing = os.path.join(self.tmp, "missing.npy")
        with self.assertRaises(PackError) as cm:
            self.pack(self.inputs + [missing])
        self.assertEqual(cm.exception.failures, {i: f"blockfs: {missing}: no such file" for i in range(4)})

    def test_retries_rerun_only_the_failed_parts(self):
        self.fail(2, 2, 0)
        r = self.pack(retries=2)
        self.assertEqual(r.runs, (2, 1, 3, 1))
        parts = [a[1] for a in self.log() if a[0] == "pack" and a[1] != "--merge"]
        self.assertEqual(sorted(parts[:4]), [f"--part={i}/4" for i in range(4)])
        self.assertEqual(sorted(parts[4:6]), ["--part=0/4", "--part=2/4"])
        self.assertEqual(parts[6:], ["--part=2/4"])
        self.fail(1, 1)
        with self.assertRaisesRegex(PackError, r"1 of 4 parts failed packing into .* \(each ran 2 times\).*\n  part 1/4: "):
            self.pack(retries=1)

    def test_merge_fails(self):
        open(os.path.join(self.tmp, "merge-fails"), "w").close()
        with self.assertRaisesRegex(PackError, f"the merge of {self.out} failed: blockfs: pack --merge: part 2 of 4 is missing$"):
            self.pack()

    def test_no_binary(self):
        with self.assertRaises(PackError) as cm:
            blockfs.pack_parallel(self.inputs, self.out, 2, self.client, binary=os.path.join(self.tmp, "none"))
        self.assertEqual(sorted(cm.exception.failures), [0, 1])
        self.assertRegex(cm.exception.failures[0], "^FileNotFoundError: .*none")


@needs_dask
class FakeBinaryDask(FakeBinary):
    """FakeBinary's tests with each part a task on a LocalCluster of 2 worker processes."""

    @classmethod
    def setUpClass(cls):
        cls.cluster, cls.client = local_cluster()

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.close()

    def test_parts_run_on_the_workers(self):
        self.pack()
        workers = set(self.client.run(os.getpid).values())
        self.assertEqual(len(workers), 2)
        self.assertLessEqual(set(self.log(pids=True)), workers, "every part, the merge and info ran in a worker")


@needs_mount
@needs_dask
class PackParallelTest(unittest.TestCase):
    """Real datasets packed in 4 parts by a LocalCluster of 2 worker processes: .npy inputs of
    several sizes whose record i (numbered over the inputs, in their order) holds i*COLS ..
    i*COLS+7."""

    sizes = (1000, 700, 1300, 500)

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="blockfs-par-")
        cls.cluster, cls.client = local_cluster()
        cls.inputs, start = [], 0
        for i, n in enumerate(cls.sizes):
            cls.inputs.append(os.path.join(cls.tmp, f"in-{i}.npy"))
            np.save(cls.inputs[-1], np.arange(start * COLS, (start + n) * COLS, dtype=np.float32).reshape(n, COLS))
            start += n
        cls.n = start

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def pack(self, out, **kw):
        r = blockfs.pack_parallel(self.inputs, out, 4, self.client, block_size="4KiB", seed=3, **kw)
        self.assertEqual((r.out, r.parts, r.records, r.runs), (out, 4, self.n, (1, 1, 1, 1)))
        print(f"\n{out}: 4 parts of {self.n} records in {r.seconds:.2f} s (parts {', '.join(f'{t:.2f}' for t in r.part_seconds)})",
              file=sys.stderr)
        return r

    def check_dataset(self, data, *flags, **opts):
        """data verifies, and every record of two epochs of its mount is the one its id names."""
        run("verify", *flags, data)
        with blockfs.Mount(data, seed=5, **opts) as m:
            self.assertEqual(m.info["records"], self.n)
            for e in (0, 1):
                ids = blockfs.order(m, e)
                self.assertEqual(sorted(ids.tolist()), list(range(self.n)))
                with open(blockfs.epoch_path(m, e), "rb") as f:
                    x = np.frombuffer(f.read(), dtype=np.float32).reshape(-1, COLS)
                want = ids[:, None].astype(np.float64) * COLS + np.arange(COLS)
                np.testing.assert_array_equal(x.astype(np.float64), want, f"epoch {e}")

    def test_into_a_directory(self):
        out = os.path.join(self.tmp, "ds")
        self.pack(out)
        self.assertTrue(os.path.isdir(os.path.join(out, "parts")))
        self.check_dataset(out)

    def test_compressed(self):
        # Every part compressed (compress= reaches each part's pack); the merged manifest keeps
        # each block's stored size, and its epochs are the records, decompressed.
        out = os.path.join(self.tmp, "zstd")
        r = blockfs.pack_parallel(self.inputs, out, 4, self.client, block_size="16KiB", seed=3, compress="zstd:5")
        self.assertEqual((r.parts, r.records), (4, self.n))
        with open(os.path.join(out, "blockfs.json")) as f:
            m = json.load(f)
        self.assertEqual((m["compression"]["codec"], m["compression"]["level"]), ("zstd", 5))
        stored = sum(b.get("stored_bytes", b["bytes"]) for b in m["blocks"])
        self.assertLess(stored, 0.9 * sum(b["bytes"] for b in m["blocks"]), "the blocks are stored compressed")
        self.check_dataset(out)

    def test_a_failed_part_is_named(self):
        out = os.path.join(self.tmp, "failed")
        missing = os.path.join(self.tmp, "missing.npy")
        with self.assertRaises(PackError) as cm:
            blockfs.pack_parallel(self.inputs + [missing], out, 4, self.client, block_size="4KiB")
        e = cm.exception
        self.assertTrue(e.failures)
        for i, line in e.failures.items():
            self.assertIn("missing.npy", line)
            self.assertIn(f"  part {i}/4: {line}", str(e))
        self.assertFalse(os.path.exists(os.path.join(out, "blockfs.json")), "no dataset")

    def test_local_processes_and_a_part_run_again(self):
        # No client: the parts run as local processes. Part 1's first run packs its part but
        # then fails (a stand-in for a node lost after writing): retries=1 runs it again
        # alone, and its second run replaces what the first left.
        wrapper = os.path.join(self.tmp, "flaky-blockfs")
        marker = os.path.join(self.tmp, "flaky-once")
        with open(wrapper, "w") as f:
            f.write(textwrap.dedent(f"""\
                #!/bin/sh
                {blockfs.binary()!r} "$@" || exit $?
                case " $* " in *" --part=1/4 "*)
                    [ -e {marker!r} ] || {{ touch {marker!r}; echo "blockfs: lost after packing" >&2; exit 3; }};;
                esac
                """))
        os.chmod(wrapper, 0o755)
        out = os.path.join(self.tmp, "local")
        r = blockfs.pack_parallel(self.inputs, out, 4, binary=wrapper, retries=1, block_size="4KiB", seed=3)
        self.assertEqual((r.parts, r.records, r.runs), (4, self.n, (1, 2, 1, 1)))
        self.check_dataset(out)

    @unittest.skipUnless(EP and BUCKET, "needs an object store: BLOCKFS_TEST_S3_ENDPOINT and BLOCKFS_TEST_S3_BUCKET")
    def test_into_minio(self):
        url = f"s3://{BUCKET}/py/parallel-{uuid.uuid4().hex[:8]}"  # a new dataset in a store kept between runs too
        self.pack(url, endpoint=EP)
        self.check_dataset(url, "--endpoint", EP, endpoint=EP)


if __name__ == "__main__":
    unittest.main()
