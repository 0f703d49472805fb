"""is_mounted asks /proc/self/mountinfo before it touches a path: a stat of a mount whose daemon
is stopped or hung waits for that daemon (once the kernel's cached attributes have expired), so
blockfs.Mount must tell "already mounted" without one. No mount needed: /proc is a mount point
in every test environment, and a stat of it is made to fail here."""
import os
import shutil
import tempfile
import unittest
from unittest import mock

import support  # noqa: F401 (first: it finds the blockfs package and binary)

from blockfs._mount import _unescape, is_mounted


class MountinfoTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="blockfs-mountinfo-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_mountpoint_not_touched(self):
        lstat, stat = os.lstat, os.stat

        def refuse(real):
            def call(p, *a, **k):
                if os.path.normpath(os.fsdecode(p)) == "/proc":
                    raise AssertionError(f"{p} was looked at: a hung mount would not answer")
                return real(p, *a, **k)
            return call

        link = os.path.join(self.tmp, "link")
        os.symlink("/proc", link)
        with mock.patch("os.lstat", refuse(lstat)), mock.patch("os.stat", refuse(stat)):
            self.assertTrue(is_mounted("/proc"))
            self.assertTrue(is_mounted("/proc/"))
            self.assertTrue(is_mounted(link), "a symlink to a mount point")
            self.assertFalse(is_mounted(self.tmp))
            self.assertFalse(is_mounted(os.path.join(self.tmp, "missing")))

    def test_unescape(self):
        self.assertEqual(_unescape(b"/mnt/a\\040b\\011c\\134d"), "/mnt/a b\tc\\d")


if __name__ == "__main__":
    unittest.main()
