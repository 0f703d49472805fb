"""is_mounted asks /proc/self/mountinfo before it touches a path: a stat of a mount whose daemon
is stopped or hung waits for that daemon (once the kernel's cached attributes have expired), so
blockfs.Mount must tell "already mounted" without one; the shared-memory path trusts the daemon
of the fuse.blockfs mount mountinfo lists at a path. No mount needed: /proc is a mount point in
every test environment, and a stat of it is made to fail here."""
import os
import shutil
import tempfile
import unittest
from unittest import mock

import support  # noqa: F401 (first: it finds the blockfs package and binary)

import blockfs._mountinfo
from blockfs._mountinfo import blockfs_owner, mountinfo, unescape_mountinfo
from blockfs._mount import is_mounted


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
        self.assertEqual(unescape_mountinfo(b"/mnt/a\\040b\\011c\\134d"), "/mnt/a b\tc\\d")

    def test_entries(self):
        entries = mountinfo()
        self.assertIsNotNone(entries)
        self.assertIn("proc", [t for p, t, _ in entries if p == "/proc"], "/proc's type")
        self.assertEqual(blockfs_owner("/proc"), -1, "a mount of another type")
        self.assertEqual(blockfs_owner(self.tmp), -1, "a folder (its info.json anyone's)")

    def test_owner(self):
        """The FUSE connection's user_id of the topmost fuse.blockfs mount at a path."""
        entries = [("/mnt/x", "fuse.blockfs", "ro,user_id=1234,group_id=5"), ("/mnt/y", "fuse.other", "rw,user_id=1"),
                   ("/mnt/z", "fuse.blockfs", "ro,user_id=7"), ("/mnt/z", "tmpfs", "rw"), ("/mnt/w", "fuse.blockfs", "ro")]
        with mock.patch.object(blockfs._mountinfo, "mountinfo", return_value=entries):
            self.assertEqual(blockfs_owner("/mnt/x"), 1234)
            self.assertEqual(blockfs_owner("/mnt/x/"), 1234)
            self.assertEqual(blockfs_owner("/mnt/y"), -1, "another file system's FUSE mount")
            self.assertEqual(blockfs_owner("/mnt/z"), -1, "a blockfs mount with another mounted over it")
            self.assertEqual(blockfs_owner("/mnt/w"), -1, "no user_id")
            self.assertEqual(blockfs_owner("/mnt/v"), -1, "no mount")
        with mock.patch.object(blockfs._mountinfo, "mountinfo", return_value=None):
            self.assertIsNone(blockfs_owner("/mnt/x"), "no /proc/self/mountinfo")


if __name__ == "__main__":
    unittest.main()
