#!/usr/bin/env python3
"""When do DataLoader workers help blockfs.torch.Loader? Records/s of one warm epoch, side by
side, for num_workers 0, 1, 2 and 4, on two workloads a trainer has:

- small records, no decode: 60k records of 512 B, batches of 256 (tokens, features). The
  Loader's batch is already one read and one tensor; a worker adds a process hop and a pickled
  copy of every batch.
- records that need decoding: 3000 zlib-compressed 256 x 256 images (a PNG is zlib inside),
  batches of 64, decode inflating and blurring each (1 to 2 ms a record, about what decoding
  and augmenting an image costs; the bench prints it). The decode is CPU work that workers run in parallel.

Each round runs every setting once, in an order that rotates round by round (the machine is
shared and noisy); the median of the rounds is reported. The mount and the data are warm (a
warm-up epoch of each setting first): this measures the loader, not the disk.

    workers_bench.py [--work DIR] [--rounds 3] [--workers 0,1,2,4]

Run as root from the repository after make build (bin/blockfs); make bench runs it.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
import zlib

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import blockfs  # noqa: E402
import blockfs.torch  # noqa: E402
from loader_bench import epoch_rate  # noqa: E402  (this folder is on sys.path)

RAW = 64 << 10  # bytes of one decoded record


def decode_image(r):
    """About what decoding and augmenting an image costs (1-2 ms a record here): inflate, as a PNG
    does, then six 3x3 box blurs of the 256 x 256 image; 64 KiB of uint8 out."""
    a = np.frombuffer(zlib.decompress(np.asarray(r).tobytes()), dtype=np.uint8).reshape(256, 256).astype(np.float32)
    for _ in range(6):
        p = np.pad(a, 1, mode="edge")
        a = sum(p[i:i + 256, j:j + 256] for i in range(3) for j in range(3)) / 9
    return a.astype(np.uint8)


def inflate(records):
    """decode for the compressed workload: a batch of images, uint8."""
    return torch.from_numpy(np.stack([decode_image(r) for r in records]))


def make_small(work, bin_):
    npy = os.path.join(work, "small-60000x512.npy")
    if not os.path.exists(npy):
        np.save(npy, np.random.default_rng(0).integers(0, 256, size=(60000, 512), dtype=np.uint8))
    ds = os.path.join(work, "small-ds")
    subprocess.run([bin_, "pack", "--quiet", "--force", npy, ds], check=True)
    return ds, 60000, 256, None


def make_compressed(work, bin_):
    src = os.path.join(work, "compressed-src")
    n = 3000
    if not os.path.isdir(src):
        os.makedirs(src)
        rng = np.random.default_rng(1)
        for i in range(n):
            # Smooth values compress about 3:1, as natural images do.
            a = np.cumsum(rng.integers(-2, 3, size=RAW), dtype=np.int64).astype(np.uint8)
            with open(os.path.join(src, "%05d.z" % i), "wb") as f:
                f.write(zlib.compress(a.tobytes(), 6))
    ds = os.path.join(work, "compressed-ds")
    subprocess.run([bin_, "pack", "--quiet", "--force", src, ds], check=True)
    return ds, n, 64, inflate


def run(work, rounds, workers):
    os.makedirs(work, exist_ok=True)
    bin_ = os.environ.get("BLOCKFS_BIN") or os.path.join(ROOT, "bin", "blockfs")
    os.environ["BLOCKFS_BIN"] = bin_
    lines = ["| workload | " + " | ".join("num_workers=%d" % w for w in workers) + " |",
             "|---|" + "---|" * len(workers)]
    for name, make in (("512 B records, no decode, batch 256", make_small),
                       ("zlib images, decode 1-2 ms a record, batch 64", make_compressed)):
        ds, n, batch, decode = make(work, bin_)
        with blockfs.Mount(ds, seed=1) as m:
            loaders = [blockfs.torch.Loader(m, batch, num_workers=w, persistent_workers=w > 0, decode=decode)
                       for w in workers]
            for ld in loaders:
                epoch_rate(ld, n)  # warm-up: workers started, the data in the caches
            rates = [[] for _ in workers]
            for r in range(rounds):
                for k in range(len(workers)):
                    i = (k + r) % len(workers)
                    rates[i].append(epoch_rate(loaders[i], n))
            for ld in loaders:
                ld.close()
        med = [statistics.median(v) for v in rates]
        lines.append("| %s | %s |" % (name, " | ".join("%.0f (%.2fx)" % (v, v / med[0]) for v in med)))
    z = zlib.compress(np.cumsum(np.random.default_rng(2).integers(-2, 3, size=RAW)).astype(np.uint8).tobytes(), 6)
    start = time.perf_counter()
    for _ in range(200):
        decode_image(np.frombuffer(z, np.uint8))
    cost = (time.perf_counter() - start) / 200
    lines.append("")
    lines.append("records/s, median of %d rounds; in brackets, against num_workers=0; %d cores; the decode took %.1f ms a record"
                 % (rounds, os.cpu_count(), cost * 1e3))
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", default="0,1,2,4")
    a = ap.parse_args()
    print("\n".join(run(a.work, a.rounds, [int(w) for w in a.workers.split(",")])))


if __name__ == "__main__":
    main()
