"""What blockfs.Mount says when the data or the runtime directory is wrong: one line naming
the real problem and what to do, as a MountError."""
import errno
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

from support import Scratch, needs_mount

import blockfs
import blockfs.torch
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


class ReadErrorReasonTest(Scratch):
    n = 1000

    def test_eio_names_its_reason(self):
        # A block file deleted under the mount: the daemon answers EIO, whose reason it logs
        # (discarded by a --daemon mount) and keeps in stats.json. Read through the file and
        # through the shared-memory path, the trainer's error names that reason.
        data = os.path.join(self.tmp, "lost")
        shutil.copytree(self.data, data)
        with blockfs.Mount(data, cache_size="4MiB", readahead="0", shuffle="none") as m:
            os.remove(os.path.join(data, "blocks", "000003.bin"))
            for shm in (False, True):
                with self.subTest(shm=shm):
                    loader = blockfs.torch.Loader(m, 100, shm=shm)
                    with self.assertRaises(OSError) as cm:
                        for _ in loader:
                            pass
                    loader.close()
                    self.assertEqual(cm.exception.errno, errno.EIO)
                    self.assertIn("a dataset file is gone", str(cm.exception))
                    self.assertIn("blocks/000003.bin", str(cm.exception))
            self.assertTrue(m.log and os.path.exists(m.log), "the daemon keeps a log, which info.json names")
            self.addCleanup(os.remove, m.log)
            with open(m.log) as f:
                self.assertIn("blocks/000003.bin: no such file or directory", f.read())
            st = m.stats()
            self.assertGreaterEqual(st["read_errors_by_kind"]["gone"], 2)
            self.assertEqual(sum(st["read_errors_by_kind"].values()), st["read_errors"])
            self.assertTrue(any(e["file"] == "epoch-0000" and "blocks/000003.bin" in e["reason"] for e in st["last_errors"]))
