"""Files the package reads from a folder or a path a user gives (a mount's .blockfs/info.json, a
names file, a labels file) are never waited on and never read past their bound: anyone who can
write a folder that is not a mount can plant a FIFO there (a plain open waits for a writer for
ever, hanging the trainer) or a huge info.json. Each is refused at once, a ValueError naming the
file and what it is. No mount needed: a folder laid out as one is enough."""
import gzip
import json
import os
import shutil
import tempfile
import threading
import time
import unittest

import numpy as np

import support  # noqa: F401 (first: it finds the blockfs package and binary)

import blockfs
import blockfs._files

WAIT = 5.0  # seconds a refusal may take before the call is taken to wait on the FIFO


class PlantedFilesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="blockfs-userfile-")
        os.makedirs(os.path.join(self.tmp, ".blockfs"))
        self.info = os.path.join(self.tmp, ".blockfs", "info.json")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def refused(self, call, fifo, pattern):
        """call() raises a ValueError matching pattern within WAIT seconds. A call still waiting
        on fifo then is released (a writer opens and closes it, as often as it waits again), so
        the test fails rather than hangs."""
        out = {}

        def run():
            try:
                out["value"] = call()
            except BaseException as e:  # noqa: B902 (reported in the test's thread)
                out["error"] = e

        t = threading.Thread(target=run, daemon=True)
        start = time.monotonic()
        t.start()
        t.join(WAIT)
        waited = t.is_alive()
        while t.is_alive():
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # no reader waiting at this moment
            t.join(0.05)
        self.assertFalse(waited, f"still waiting on the FIFO {fifo} after {WAIT} s")
        self.assertLess(time.monotonic() - start, WAIT)
        self.assertIn("error", out, f"no error; returned {out.get('value')!r}")
        self.assertIsInstance(out["error"], ValueError)
        self.assertRegex(str(out["error"]), pattern)
        return out["error"]

    def test_info_json_fifo_is_refused_at_once(self):
        os.mkfifo(self.info)
        err = self.refused(lambda: blockfs.read_info(self.tmp), self.info, "a named pipe \\(FIFO\\), not a regular file")
        self.assertIn(self.info, str(err), "the message names the file")
        self.assertEqual(len(str(err).splitlines()), 1)
        self.refused(lambda: blockfs.epoch_path(self.tmp, 0), self.info, "FIFO")

    def test_info_json_device_is_refused(self):
        os.symlink("/dev/null", self.info)
        with self.assertRaisesRegex(ValueError, "info.json is a character device, not a regular file"):
            blockfs.read_info(self.tmp)

    def test_info_json_over_the_bound_is_refused(self):
        limit = blockfs._files.MAX_INFO_FILE
        head = '{"records": 1, "pad": "'
        with open(self.info, "w") as f:
            f.write(head + "x" * (limit + 1 - len(head) - 2) + '"}')
        self.assertEqual(os.path.getsize(self.info), limit + 1)
        with self.assertRaisesRegex(ValueError, f"^{self.tmp} is not a blockfs mount: {self.info} holds {limit + 1} bytes, "
                                                f"more than the {limit >> 20} MiB"):
            blockfs.read_info(self.tmp)
        with open(self.info, "r+") as f:  # at the bound: read as before
            f.truncate(limit)
            f.seek(limit - 2)
            f.write('"}')
        self.assertEqual(blockfs.read_info(self.tmp)["records"], 1)

    def test_names_fifo_is_refused_at_once(self):
        with open(self.info, "w") as f:
            json.dump({"records": 2, "kind": "files"}, f)
        names = os.path.join(self.tmp, ".blockfs", "names.txt")
        os.mkfifo(names)
        for call in (lambda: blockfs.record_names(self.tmp), lambda: blockfs.labels_from_names(self.tmp),
                     lambda: blockfs.record_names(names)):
            self.refused(call, names, f"^{names} is a named pipe \\(FIFO\\), not a regular file$")
        # For an error message only: a names file that is not one gives no names.
        self.assertIsNone(blockfs._files.names_of(self.tmp, [0]))
        os.remove(names)
        with open(names, "w") as f:
            f.write("cat/0.jpg\ndog/1.jpg\n")
        self.assertEqual(blockfs.record_names(self.tmp), ["cat/0.jpg", "dog/1.jpg"])
        self.assertEqual(blockfs._files.names_of(self.tmp, [1, 0]), ["dog/1.jpg", "cat/0.jpg"])

    def test_epoch_file_fifo_is_refused_at_once(self):
        """The Loader's reads of the files (_Batches) open an epoch file without waiting on it."""
        import blockfs._batches  # torch: only this test needs it
        with open(self.info, "w") as f:
            json.dump({"records": 2, "kind": "fixed", "record_size": 4}, f)
        batches = blockfs._batches._Batches(self.tmp, blockfs.read_info(self.tmp), None, None, False, shm=False)
        fifo = batches._path(0, "")
        os.mkfifo(fifo)
        self.refused(lambda: batches._fd(0, ""), fifo, f"^{fifo} is a named pipe \\(FIFO\\), not a regular file$")
        self.refused(lambda: batches._fd(0, "", direct=True), fifo, "FIFO")

    def test_labels_fifo_is_refused_at_once(self):
        fifo = os.path.join(self.tmp, "labels.npy")
        os.mkfifo(fifo)
        self.refused(lambda: blockfs.load_labels(fifo), fifo, f"^{fifo} is a named pipe \\(FIFO\\), not a regular file$")
        with self.assertRaisesRegex(ValueError, "is a directory, not a regular file"):
            blockfs.load_labels(self.tmp)

    def test_labels_files_read_as_before(self):
        npy, txt = os.path.join(self.tmp, "l.npy"), os.path.join(self.tmp, "l.txt")
        np.save(npy, np.array([3, 1, 2], dtype=np.int16))
        with open(txt, "w") as f:
            f.write("# labels\n3\n1\n2\n")
        got = blockfs.load_labels(npy)
        self.assertIsInstance(got, np.memmap, "a .npy is mapped, not read")
        self.assertEqual((got.dtype, got.tolist()), (np.dtype(np.int16), [3, 1, 2]))
        got = blockfs.load_labels(txt)
        self.assertEqual((got.dtype, got.tolist()), (np.dtype(np.int64), [3, 1, 2]))
        with open(txt, "w") as f:
            f.write("7")
        self.assertEqual(blockfs.load_labels(txt).tolist(), [7], "one label: still an array")
        with gzip.open(txt + ".gz", "wt") as f:
            f.write("4\n5\n")
        self.assertEqual(blockfs.load_labels(txt + ".gz").tolist(), [4, 5], "numpy decompresses a .gz")


if __name__ == "__main__":
    unittest.main()
