"""blockfs.Mount, attach, order and the label helpers against real mounts: shared by local
processes, unmounted by the last, cleaned up after exceptions and killed owners."""
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import warnings
from unittest import mock

import numpy as np

from support import Scratch, check_image_folder_labels, daemon_pid, run, write_names

import blockfs
from blockfs import _mount
from blockfs._mount import is_mounted


class MountTest(Scratch):
    def test_mount_order_and_info(self):
        with blockfs.Mount(self.data, seed=3, cache_size="8MiB", readahead="64KiB") as m:
            self.assertTrue(m.owner)
            self.assertTrue(is_mounted(m.path))
            self.assertEqual((m.info["records"], m.info["seed"]), (self.n, 3))
            ids = blockfs.order(m, 2)
            self.assertEqual(ids.dtype, np.uint64)
            self.assertEqual(sorted(ids.tolist()), list(range(self.n)))
            cli = np.array(run("order", "--ids", "--seed", "3", "--epoch", "2", self.data).split(), dtype=np.uint64)
            np.testing.assert_array_equal(ids, cli)
            shard = blockfs.order(m.path, 2, shard="1/3")
            start, end = blockfs.shard_range(self.n, 1, 3)
            np.testing.assert_array_equal(shard, ids[start:end])
            np.testing.assert_array_equal(blockfs.order(m, 2, shard=(1, 3)), shard)
            with self.assertRaises(ValueError):
                blockfs.order(m, 0, shard="3/3")
            a = blockfs.attach(m.path)
            self.assertEqual(a.info, m.info)
            a.close()
            self.assertTrue(is_mounted(m.path), "closing an attached mount unmounts nothing")
        self.assertFalse(is_mounted(m.path))
        self.assertFalse(os.path.exists(m.path), "the default mountpoint is removed")
        with self.assertRaisesRegex(ValueError, "not a blockfs mount"):
            blockfs.attach(self.tmp)

    def test_exception_unmounts(self):
        with self.assertRaises(KeyError):
            with blockfs.Mount(self.data) as m:
                pid = daemon_pid(m.path)
                self.assertIsNotNone(pid)
                raise KeyError("boom")
        self.assertFalse(is_mounted(m.path))
        wait_gone(self, pid)

    def test_in_place_is_shuffled_by_default(self):
        # A file in place is stored in order: by default its 1 MiB blocks are mixed in windows
        # (here one window of all 64); forcing 16 MiB blocks and --mix 1 warns.
        raw = os.path.join(self.tmp, "in-order.bin")
        with open(raw, "wb") as f:
            f.truncate(64 << 20)
        with blockfs.Mount(raw, record_size=4096) as m:
            order = m.info["order"]
            self.assertEqual((order["mix"], order["auto"], order["in_order"]), (64, True, True), order)
            self.assertIn("one window of all 64 blocks", order["why"])
            self.assertGreaterEqual(order["spread"], 0.9 * order["uniform_spread"])
        with self.assertWarnsRegex(blockfs.OrderWarning, "far from uniform"):
            with blockfs.Mount(raw, record_size=4096, block_size="16MiB", mix=1) as m:
                self.assertFalse(m.info["order"]["auto"])
                self.assertIn("far from uniform", m.info["order"]["warning"])

    def test_bad_options_say_what(self):
        with self.assertRaisesRegex(blockfs.MountError, "--mix"):
            blockfs.Mount(self.data, mix=0).open()
        with self.assertRaisesRegex(blockfs.MountError, "no such directory|not a directory|no such file"):
            blockfs.Mount(os.path.join(self.tmp, "missing")).open()

    def test_local_ranks_share_one_mount(self):
        first = blockfs.Mount(self.data, seed=5).open()
        second = blockfs.Mount(self.data, seed=5).open()
        self.assertEqual(first.path, second.path)
        self.assertTrue(first.owner)
        self.assertFalse(second.owner, "the second attaches")
        pid = daemon_pid(first.path)
        first.close()
        self.assertTrue(is_mounted(second.path), "the mount stays until the last leaves")
        self.assertEqual(len(blockfs.order(second, 0)), self.n)
        second.close()
        self.assertFalse(is_mounted(second.path))
        wait_gone(self, pid)
        # Other options are another mount.
        with blockfs.Mount(self.data, seed=5) as a, blockfs.Mount(self.data, seed=6) as b:
            self.assertNotEqual(a.path, b.path)
            self.assertFalse((blockfs.order(a, 0) == blockfs.order(b, 0)).all())

    def test_processes_share_one_mount(self):
        # Two local ranks as separate processes: one mounts, one attaches, both read.
        script = textwrap.dedent("""
            import os, sys, time, blockfs
            with blockfs.Mount(sys.argv[1], seed=9) as m:
                print(os.environ["LOCAL_RANK"], m.owner, len(blockfs.order(m, 0)), flush=True)
                time.sleep(float(sys.argv[2]))
        """)
        procs = [subprocess.Popen([sys.executable, "-c", script, self.data, delay], env=dict(os.environ, LOCAL_RANK=str(r)),
                                  stdout=subprocess.PIPE, text=True) for r, delay in ((0, "0.5"), (1, "1.5"))]
        outs = [p.communicate(timeout=60)[0].split() for p in procs]
        self.assertEqual([p.returncode for p in procs], [0, 0])
        self.assertEqual(sorted(o[1] for o in outs), ["False", "True"], "one owner")
        self.assertEqual({o[2] for o in outs}, {str(self.n)})
        self.assertFalse(is_mounted(blockfs.Mount(self.data, seed=9).path), "the last to leave unmounted")

    def test_killed_owner_does_not_block_next_run(self):
        # The daemon sees its only user die and ends itself: nothing is left to reclaim.
        p, path = self.user(seed=4)
        pid = daemon_pid(path)
        p.kill()
        p.wait()
        self.assertLeftNothing(path, pid)
        with blockfs.Mount(self.data, seed=4) as m:
            self.assertEqual(m.path, path)
            self.assertTrue(m.owner)
            self.assertEqual(len(blockfs.order(m, 0)), self.n)
        # A killed daemon leaves a stale mount; the next run clears it.
        m = blockfs.Mount(self.data, seed=4).open()
        pid = daemon_pid(m.path)
        os.kill(pid, signal.SIGKILL)
        wait_gone(self, pid)
        held = _mount._holds.pop(m._lock)  # as if this process had died too
        os.close(held[1])
        m._open = False
        with blockfs.Mount(self.data, seed=4) as again:
            self.assertEqual(len(blockfs.order(again, 1)), self.n)
        self.assertFalse(is_mounted(m.path))

    def test_sigterm_leaves_nothing(self):
        # SIGTERM (torchrun, Slurm, Kubernetes) skips the with block's exit; the lease does not
        # need it.
        p, path = self.user(seed=11)
        pid = daemon_pid(path)
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(timeout=10), -signal.SIGTERM, "Mount leaves SIGTERM's meaning alone")
        self.assertLeftNothing(path, pid)

    def test_ranks_killed_one_then_the_other(self):
        first, path = self.user(seed=12)
        second, again = self.user(seed=12)
        self.assertEqual(path, again)
        pid = daemon_pid(path)
        first.kill()
        first.wait()
        time.sleep(1.5)  # three polls of the daemon
        self.assertTrue(is_mounted(path), "the other rank still uses it")
        self.assertEqual(len(blockfs.order(path, 0)), self.n)
        second.kill()
        second.wait()
        self.assertLeftNothing(path, pid)

    def test_workers_do_not_keep_a_dead_parent_mount(self):
        # A forked worker with an epoch file open outlives its killed parent: the mount is
        # detached at once, and the daemon exits after its drain time (5 s) at the latest.
        script = textwrap.dedent("""
            import os, sys, time, blockfs
            m = blockfs.Mount(sys.argv[1], seed=13).open()
            f = open(os.path.join(m.path, "epoch-0000"), "rb")
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            print(m.path, flush=True)
            time.sleep(60)
        """)
        p = subprocess.Popen([sys.executable, "-c", script, self.data], stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.addCleanup(p.stdout.close)
        try:
            path = p.stdout.readline().strip()
            pid = daemon_pid(path)
            p.kill()
            p.wait()
            self.assertLeftNothing(path, pid, within=10)
        finally:
            os.killpg(p.pid, signal.SIGKILL)

    def test_other_options_refused_at_a_mountpoint_in_use(self):
        mnt = os.path.join(self.tmp, "shared")
        os.makedirs(mnt, exist_ok=True)
        with blockfs.Mount(self.data, mnt, seed=1) as m:
            q, _ = self.user(seed=1, mountpoint=mnt)  # another process with the same options attaches
            try:
                with self.assertRaisesRegex(blockfs.MountError, "in use by a blockfs.Mount of .* with flags --seed=1; use the same data and options"):
                    blockfs.Mount(self.data, mnt, seed=2).open()
            finally:
                q.kill()
                q.wait()
            self.assertTrue(m.owner)
        self.assertFalse(is_mounted(mnt))
        self.assertTrue(os.path.isdir(mnt), "a mountpoint the user gave stays")

    def user(self, seed, mountpoint=None):
        """A process that opens Mount(self.data, seed=seed) and sleeps; returns it and the
        mountpoint."""
        script = textwrap.dedent("""
            import sys, time, blockfs
            m = blockfs.Mount(sys.argv[1], sys.argv[3] or None, seed=int(sys.argv[2])).open()
            print(m.path, flush=True)
            time.sleep(60)
        """)
        p = subprocess.Popen([sys.executable, "-c", script, self.data, str(seed), mountpoint or ""], stdout=subprocess.PIPE, text=True)
        self.addCleanup(p.kill)
        self.addCleanup(p.stdout.close)
        path = p.stdout.readline().strip()
        self.assertTrue(path, "the process mounted")
        return p, path

    def assertLeftNothing(self, path, pid, within=3.0):
        """Within a few seconds, the mount, its daemon, its lock files and its mountpoint are gone."""
        deadline = time.monotonic() + within
        lock = blockfs.Mount(self.data, path)._lock
        while time.monotonic() < deadline:
            if not is_mounted(path) and not os.path.exists(path) and not os.path.exists(lock) and not os.path.exists(lock + ".setup") \
                    and (pid is None or not alive(pid)):
                return
            time.sleep(0.05)
        self.fail(f"after {within}s: mounted {is_mounted(path)}, mountpoint {os.path.exists(path)}, lock {os.path.exists(lock)}, daemon {pid is not None and alive(pid)}")

    def test_mounted_by_hand_is_not_replaced(self):
        mnt = os.path.join(self.tmp, "by-hand")
        os.makedirs(mnt)
        run("mount", "--daemon", self.data, mnt)
        try:
            with self.assertRaisesRegex(blockfs.MountError, "already mounted, not by blockfs.Mount"):
                blockfs.Mount(self.data, mnt).open()
            self.assertEqual(blockfs.attach(mnt).info["records"], self.n)
        finally:
            run("unmount", mnt)


class RuntimeDirTest(Scratch):
    """The runtime directory and its lock files cannot be turned against their user (root's
    training script in a shared /tmp, issue 26)."""

    def test_runtime_dir_must_be_private(self):
        private = tempfile.mkdtemp(dir=self.tmp)
        shared = os.path.join(self.tmp, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o755)
        link = os.path.join(self.tmp, "link")
        os.symlink(private, link)
        cases = [(shared, "its mode 0755 lets others in"), (link, "it is a symlink")]
        if os.getuid() == 0:
            theirs = os.path.join(self.tmp, "theirs")
            os.mkdir(theirs, 0o700)
            os.chown(theirs, 65534, 65534)
            cases.append((theirs, "it belongs to uid 65534, not to you"))
        for d, why in cases:
            with mock.patch.dict(os.environ, {"BLOCKFS_RUNTIME_DIR": d}):
                with self.assertRaisesRegex(blockfs.MountError, "cannot hold blockfs.Mount's lock files: " + why):
                    blockfs.Mount(self.data)

    def test_symlinked_lock_files_write_nothing(self):
        canary = os.path.join(self.tmp, "canary")
        with open(canary, "w") as f:
            f.write("root's secret")
        os.chmod(canary, 0o600)
        m = blockfs.Mount(self.data, seed=21)
        for p in (m._lock, m._setup_lock):
            os.symlink(canary, p)
            with self.assertRaises(OSError):
                m.open()
            with open(canary) as f:
                self.assertEqual(f.read(), "root's secret")
            self.assertFalse(os.path.lexists(m._lock), "the planted link is removed, not followed")
        os.unlink(m._setup_lock)  # the setup lock's link stays: open fails before holding it
        self.assertFalse(is_mounted(m.path))
        self.assertFalse(os.path.exists(m.path), "nothing left behind")

    def test_a_held_setup_lock_is_a_bounded_wait(self):
        m = blockfs.Mount(self.data, seed=22)
        fd = os.open(m._setup_lock, os.O_RDWR | os.O_CREAT, 0o600)
        self.addCleanup(os.unlink, m._setup_lock)
        self.addCleanup(os.close, fd)
        fcntl.flock(fd, fcntl.LOCK_EX)
        start = time.monotonic()
        with mock.patch.object(_mount, "LOCK_WAIT", 0.5):
            with self.assertRaisesRegex(blockfs.MountError, "another process has held .* for over 0.5 s"):
                m.open()
        self.assertLess(time.monotonic() - start, 5)


class LabelsTest(Scratch):
    def test_labels_from_names(self):
        root = os.path.join(self.tmp, "images")
        for cls, count in (("cat", 3), ("dog", 2), ("ant", 4)):
            os.makedirs(os.path.join(root, cls))
            for i in range(count):
                with open(os.path.join(root, cls, "%d.bin" % i), "wb") as f:
                    f.write(os.urandom(10 + i))
        dst = os.path.join(self.tmp, "images-ds")
        run("pack", "--quiet", root, dst)
        with blockfs.Mount(dst) as m:
            labels, classes = blockfs.labels_from_names(m)
            self.assertEqual(classes, ["ant", "cat", "dog"])
            self.assertEqual(labels.tolist(), [0] * 4 + [1] * 3 + [2] * 2)  # names are in sorted path order
            self.assertEqual(blockfs.record_names(m)[4], "cat/0.bin")
        names = os.path.join(self.tmp, "names.txt")
        with open(names, "w") as f:
            f.write(run("info", "--names", dst))
        self.assertEqual(blockfs.labels_from_names(names)[0].tolist(), labels.tolist())
        self.assertEqual(blockfs.record_names(names), run("info", "--names", dst).splitlines())
        with blockfs.Mount(self.data) as m:
            with self.assertRaisesRegex(ValueError, "has no record names: pack the dataset from a folder"):
                blockfs.record_names(m)

    def test_labels_are_image_folders(self):
        # ImageFolder's rule: the class is the top-level folder (at any depth below it), top-level
        # files are in no class (-1, with a warning), and there is never a class "".
        names = ["README.txt", "bird/deep/er/1.png", "bird/2.JPG", "cat/1.png", "cat/README.txt", "cover.png",
                 "dog/a/1.png", "dog/b/2.png", "zebra.png/1.png"]
        with self.assertWarnsRegex(UserWarning, r"2 record\(s\) are files at the top level, in no class folder "
                                                r"\(README.txt, cover.png\): their label is -1"):
            labels, classes = blockfs.labels_from_names(names)
        self.assertEqual(classes, ["bird", "cat", "dog", "zebra.png"])
        self.assertEqual(labels.tolist(), [-1, 0, 0, 1, 1, -1, 2, 2, 3])
        root = write_names(os.path.join(self.tmp, "as-image-folder"), names, lambda n: n.encode())
        check_image_folder_labels(self, names, labels, classes, root)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning without top-level files
            self.assertEqual(blockfs.labels_from_names(["b/x", "a/y"])[1], ["a", "b"])

    def test_load_labels(self):
        arr = np.array([3, 1, 2])
        npy, txt = os.path.join(self.tmp, "l.npy"), os.path.join(self.tmp, "l.txt")
        np.save(npy, arr)
        with open(txt, "w") as f:
            f.write("3\n1\n2\n")
        for src in (arr, [3, 1, 2], npy, txt):
            self.assertEqual(np.asarray(blockfs.load_labels(src)).tolist(), [3, 1, 2])


def alive(pid):
    """Whether pid runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(test, pid):
    for _ in range(500):
        if pid is None or not os.path.exists("/proc/%d" % pid):
            return
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split()[2] == "Z":
                    return
        except OSError:
            return
        time.sleep(0.01)
    test.fail("daemon %d still running" % pid)


if __name__ == "__main__":
    unittest.main()
