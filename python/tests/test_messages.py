"""What blockfs.Mount says when the data or the runtime directory is wrong: one line naming
the real problem and what to do, as a MountError."""
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

import blockfs
from blockfs._mount import is_mounted


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
