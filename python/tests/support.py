"""Datasets and checks shared by the package's tests. They need the blockfs binary
($BLOCKFS_BIN) and FUSE; test/python_pkg_test.go runs them from `make test`."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import blockfs

COLS = 8  # float32 values per record: record i holds i*COLS .. i*COLS+7


class Scratch(unittest.TestCase):
    """A test case with a scratch directory and a fixed-size dataset of n records."""

    n = 5000

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="blockfs-py-")
        cls.data = pack_npy(cls.tmp, "ds", cls.n)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_records(self, ids, x):
        """Each record is the one its id names."""
        ids = np.asarray(ids)
        want = ids[:, None].astype(np.float64) * COLS + np.arange(COLS)
        np.testing.assert_array_equal(np.asarray(x, dtype=np.float64), want)


def pack_npy(tmp, name, n, *flags):
    src = os.path.join(tmp, name + ".npy")
    np.save(src, np.arange(n * COLS, dtype=np.float32).reshape(n, COLS))
    dst = os.path.join(tmp, name)
    run("pack", "--quiet", "--block-size", "4KiB", *flags, src, dst)  # 128 records a block
    return dst


def run(*args):
    p = subprocess.run([blockfs.binary()] + list(args), capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("blockfs %s: %s" % (" ".join(args), p.stderr))
    return p.stdout


def daemon_pid(mountpoint):
    """The pid of the blockfs daemon serving mountpoint."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"mount" in args and os.fsencode(mountpoint) in args:
            return int(pid)
    return None


def roundtrip(state):
    """A state as it comes back from a checkpoint file."""
    return json.loads(json.dumps(state))
