"""Where the time goes, from Python: Mount.stats() (the mount's stats.json: the data stall,
and a line per open file) and Loader.read_stats() (the share of the workers' time spent in
reads of the mount)."""
import os
import time
import unittest

from support import Scratch

import blockfs
import blockfs.torch



class StatsTest(Scratch):
    n = 6000

    def test_mount_stats(self):
        with blockfs.Mount(self.data, seed=3) as m:
            s = m.stats()
            for key in ("read_wait_seconds", "read_seconds", "reads_waited", "reader_seconds", "stall", "readers",
                        "bytes_served", "cache_hits", "daemon_rss_bytes"):
                self.assertIn(key, s)
            self.assertEqual(s["readers"], [])
            path = blockfs.epoch_path(m, 1)
            with open(path, "rb") as f:
                f.read(1 << 16)
                s = m.stats()
                [r] = [r for r in s["readers"] if r["file"] == os.path.basename(path)]
                self.assertEqual(r["pid"], os.getpid())
                self.assertEqual(r["size"], os.path.getsize(path))
                self.assertGreater(r["bytes"], 0)
                self.assertGreaterEqual(r["wait_seconds"], 0.0)
                self.assertLessEqual(r["stall"], 1.0)
            # The kernel sends FUSE's RELEASE after close() returns, asynchronously: wait for it.
            deadline = time.monotonic() + 5
            while m.stats()["readers"] and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertEqual(m.stats()["readers"], [], "a closed file is no reader")

    def test_loader_read_stats(self):
        with blockfs.Mount(self.data, seed=3) as m:
            loader = blockfs.torch.Loader(m, 250, num_workers=2)
            empty = loader.read_stats()
            self.assertEqual((empty["batches"], empty["read_fraction"]), (0, 0.0))
            n = sum(1 for _ in loader)
            r = loader.read_stats()
            self.assertEqual(r["batches"], n)
            self.assertEqual(r["workers"], 2)
            self.assertGreater(r["read_seconds"], 0.0)
            self.assertGreaterEqual(r["batch_seconds"], r["read_seconds"])
            self.assertGreater(r["seconds"], 0.0)
            self.assertGreater(r["read_fraction"], 0.0)
            self.assertLessEqual(r["read_fraction"], 1.0)
            for _ in loader:  # a second epoch adds to the figures
                pass
            self.assertEqual(loader.read_stats()["batches"], 2 * n)


if __name__ == "__main__":
    unittest.main()
