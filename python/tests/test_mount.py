"""blockfs.Mount, attach, order and the label helpers against real mounts: shared by local
processes, unmounted by the last, cleaned up after exceptions and killed owners."""
import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest
import warnings

import numpy as np

import blockfs
from blockfs._mount import is_mounted
from support import Scratch, check_image_folder_labels, daemon_pid, run, write_names


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
        script = textwrap.dedent("""
            import os, signal, sys, blockfs
            m = blockfs.Mount(sys.argv[1], seed=4).open()
            print(m.path, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        """)
        p = subprocess.run([sys.executable, "-c", script, self.data], stdout=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(p.returncode, -signal.SIGKILL)
        path = p.stdout.strip()
        self.assertTrue(is_mounted(path), "the daemon outlives its owner")
        old = daemon_pid(path)
        with blockfs.Mount(self.data, seed=4) as m:
            self.assertEqual(m.path, path)
            self.assertTrue(m.owner, "nobody held it: mounted afresh")
            self.assertEqual(len(blockfs.order(m, 0)), self.n)
            new = daemon_pid(path)
        wait_gone(self, old)
        wait_gone(self, new)
        self.assertFalse(is_mounted(path))
        # A killed daemon leaves a stale mount; the next run clears it.
        m = blockfs.Mount(self.data, seed=4).open()
        pid = daemon_pid(m.path)
        os.kill(pid, signal.SIGKILL)
        wait_gone(self, pid)
        m._users, users = None, m._users  # as if this process had died too
        os.close(users)
        with blockfs.Mount(self.data, seed=4) as again:
            self.assertEqual(len(blockfs.order(again, 1)), self.n)
        self.assertFalse(is_mounted(m.path))

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
