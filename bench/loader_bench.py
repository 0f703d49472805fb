#!/usr/bin/env python3
"""PyTorch loading side by side (issue 15's floor): blockfs.torch.Loader over a mount against
the usual map-style Dataset over np.memmap with DataLoader(shuffle=True), both with the same
workers (persistent) and batch size, on 60k records of 512 B, warm (the .npy and the dataset in
the page cache, after a warm-up epoch of each). Each run is a new epoch for both; the median of
three runs, alternated, is reported in records/s.

    loader_bench.py [--work DIR] [--records 60000] [--record-size 512] [--workers 2] [--batch 256]

Run as root from the repository (make bench runs it); it builds nothing: bin/blockfs must exist.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import blockfs  # noqa: E402
import blockfs.torch  # noqa: E402

FLOOR = 1.5


class MemmapDataset(Dataset):
    """The per-sample map-style Dataset a user writes over a .npy."""

    def __init__(self, path):
        self.path, self.x = path, None

    def __len__(self):
        return len(np.load(self.path, mmap_mode="r"))

    def __getitem__(self, i):
        if self.x is None:
            self.x = np.load(self.path, mmap_mode="r")
        return i, torch.from_numpy(np.array(self.x[i]))


def epoch_rate(batches, n):
    start = time.perf_counter()
    seen = 0
    for ids, _ in batches:
        seen += len(ids)
    el = time.perf_counter() - start
    assert seen == n, "read %d of %d records" % (seen, n)
    return n / el


def run(work, records=60000, record_size=512, workers=2, batch=256):
    """Returns Markdown lines: the two rates and their ratio against the floor."""
    os.makedirs(work, exist_ok=True)
    npy = os.path.join(work, "loader-%dx%d.npy" % (records, record_size))
    if not os.path.exists(npy):
        rng = np.random.default_rng(0)
        np.save(npy, rng.integers(0, 256, size=(records, record_size), dtype=np.uint8))
    ds = os.path.join(work, "loader-ds")
    bin_ = os.environ.get("BLOCKFS_BIN") or os.path.join(ROOT, "bin", "blockfs")
    os.environ["BLOCKFS_BIN"] = bin_
    subprocess.run([bin_, "pack", "--quiet", "--force", npy, ds], check=True, stdout=subprocess.DEVNULL)
    base = DataLoader(MemmapDataset(npy), batch_size=batch, shuffle=True, num_workers=workers,
                      persistent_workers=workers > 0)
    rates = {"blockfs": [], "memmap": []}
    with blockfs.Mount(ds, seed=1) as m, \
            blockfs.torch.Loader(m, batch, num_workers=workers, persistent_workers=True) as loader:
        epoch_rate(loader, records)  # warm-up: workers started, data in the caches
        epoch_rate(base, records)
        for _ in range(3):
            rates["blockfs"].append(epoch_rate(loader, records))  # the loader moves to a new epoch
            rates["memmap"].append(epoch_rate(base, records))
    med = {k: statistics.median(v) for k, v in rates.items()}
    ratio = med["blockfs"] / med["memmap"]
    lines = [
        "| PyTorch, %d x %d B, %d workers, batch %d, warm | records/s (median of 3) | runs |" % (records, record_size, workers, batch),
        "|---|---|---|",
        "| blockfs.torch.Loader, a new epoch each run | %.0f | %s |" % (med["blockfs"], " ".join("%.0f" % r for r in rates["blockfs"])),
        "| map-style Dataset over np.memmap, DataLoader(shuffle=True) | %.0f | %s |" % (med["memmap"], " ".join("%.0f" % r for r in rates["memmap"])),
        "",
        "Loader / memmap DataLoader: %.2fx (floor %.1fx: %s)" % (ratio, FLOOR, "ok" if ratio >= FLOOR else "MISSED"),
    ]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--records", type=int, default=60000)
    ap.add_argument("--record-size", type=int, default=512)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    print("\n".join(run(a.work, a.records, a.record_size, a.workers, a.batch)))


if __name__ == "__main__":
    main()
