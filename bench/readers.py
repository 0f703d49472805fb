#!/usr/bin/env python3
"""The benchmark's Python readers. Each prints one line: "RECORDS BYTES SECONDS".

  readers.py seq PATH RECORD_SIZE [MAX_BYTES]
      f.read(record_size) per record, front to back, from open(path, "rb"): the way a simple
      Python loader reads a blockfs epoch file (Python buffers by the file's st_blksize).
  readers.py seq0 PATH RECORD_SIZE [MAX_BYTES]
      the same with buffering=0: one read() system call per record.
  readers.py naive PATH RECORD_SIZE SAMPLE SEED
      os.pread of one record at a time at uniformly random positions (a map-style Dataset with
      shuffle=True over the raw data); SAMPLE records of a random permutation.
  readers.py windows NPY L SAMPLE SEED
      the usual time-series loader without blockfs: np.memmap of a 2-D .npy, SAMPLE window
      starts drawn uniformly at random, each window of L rows copied (np.array(x[s:s+L])).
  readers.py inproc DATASET RECORD_SIZE SEED [MAX_BYTES]
      the in-process block shuffle (PyTorch BlockSampler style): whole block files read with
      one pread each, in random order, then the block's records delivered in a random order.
  readers.py rawblock PATH RECORD_SIZE SEED [MAX_BYTES]
      the in-process block shuffle of a raw file (seed 000's loader): blocks of 16 MiB read
      with one buffered os.pread each, in a random order, each block's records yielded as bytes
      objects in a random order. Prints a fourth figure: the bytes this process had read from
      disk (/proc/self/io read_bytes).
  readers.py npblock PATH RECORD_SIZE SEED [BLOCK_BYTES]
      numpy's in-process block shuffle of a raw file: blocks of BLOCK_BYTES (16 MiB) read with
      one pread each, in random order, each block's records permuted by fancy indexing
      (rng.permutation then x[perm]); the permutations are timed too.
"""
import json
import os
import random
import sys
import time


def seq(path, rs, max_bytes=None, buffering=-1):
    n = 0
    with open(path, "rb", buffering=buffering) as f:
        t = time.perf_counter()
        while True:
            rec = f.read(rs)
            if not rec:
                break
            n += 1
            if max_bytes and n * rs >= max_bytes:
                break
        return n, n * rs, time.perf_counter() - t


def naive(path, rs, sample, seed):
    fd = os.open(path, os.O_RDONLY)
    try:
        count = os.fstat(fd).st_size // rs
        rng = random.Random(seed)
        idx = rng.sample(range(count), min(sample, count))
        t = time.perf_counter()
        for i in idx:
            os.pread(fd, rs, i * rs)
        return len(idx), len(idx) * rs, time.perf_counter() - t
    finally:
        os.close(fd)


def deliver(buf, rs, rng):
    """Yield a block's records in a random order, a bytes object each (as read() gives):
    returns (records, bytes)."""
    recs = list(range(len(buf) // rs))
    rng.shuffle(recs)
    n = nbytes = 0
    for i in recs:
        rec = buf[i * rs:(i + 1) * rs]
        n += 1
        nbytes += len(rec)
    return n, nbytes


def inproc(dataset, rs, seed, max_bytes=None):
    with open(os.path.join(dataset, "blockfs.json")) as f:
        blocks = json.load(f)["blocks"]
    rng = random.Random(seed)
    order = list(range(len(blocks)))
    rng.shuffle(order)
    n = nbytes = 0
    t = time.perf_counter()
    for b in order:
        fd = os.open(os.path.join(dataset, blocks[b]["file"]), os.O_RDONLY)
        buf = os.pread(fd, blocks[b]["bytes"], 0)
        os.close(fd)
        k, kb = deliver(buf, rs, rng)
        n, nbytes = n + k, nbytes + kb
        if max_bytes and nbytes >= max_bytes:
            break
    return n, nbytes, time.perf_counter() - t


def disk_read():
    with open("/proc/self/io") as f:
        return int(next(l for l in f if l.startswith("read_bytes:")).split()[1])


def rawblock(path, rs, seed, max_bytes=None, block=16 << 20):
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size // rs * rs
        per = block // rs * rs
        rng = random.Random(seed)
        order = list(range((size + per - 1) // per))
        rng.shuffle(order)
        n = nbytes = 0
        d0 = disk_read()
        t = time.perf_counter()
        for b in order:
            buf = os.pread(fd, min(per, size - b * per), b * per)
            k, kb = deliver(buf, rs, rng)
            n, nbytes = n + k, nbytes + kb
            if max_bytes and nbytes >= max_bytes:
                break
        return n, nbytes, time.perf_counter() - t, disk_read() - d0
    finally:
        os.close(fd)


def npblock(path, rs, seed, block=16 << 20):
    import numpy as np
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size // rs * rs
        per = block // rs * rs
        rng = np.random.default_rng(seed)
        n = nbytes = 0
        t = time.perf_counter()
        for b in rng.permutation((size + per - 1) // per):
            buf = os.pread(fd, min(per, size - b * per), b * per)
            x = np.frombuffer(buf, dtype=np.uint8).reshape(-1, rs)
            y = x[rng.permutation(len(x))]
            n += len(y)
            nbytes += y.nbytes
        return n, nbytes, time.perf_counter() - t
    finally:
        os.close(fd)


def windows(npy, L, sample, seed):
    import numpy as np
    x = np.load(npy, mmap_mode="r")
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(x) - L + 1, size=sample)
    n = nbytes = 0
    t = time.perf_counter()
    for s in starts:
        w = np.array(x[s:s + L])
        n += 1
        nbytes += w.nbytes
    return n, nbytes, time.perf_counter() - t


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode in ("seq", "seq0"):
        r = seq(args[0], int(args[1]), int(args[2]) if len(args) > 2 else None, 0 if mode == "seq0" else -1)
    elif mode == "naive":
        r = naive(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif mode == "windows":
        r = windows(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif mode == "npblock":
        r = npblock(args[0], int(args[1]), int(args[2]), *(int(a) for a in args[3:4]))
    elif mode == "inproc":
        r = inproc(args[0], int(args[1]), int(args[2]), int(args[3]) if len(args) > 3 else None)
    elif mode == "rawblock":
        r = rawblock(args[0], int(args[1]), int(args[2]), int(args[3]) if len(args) > 3 else None)
        print("%d %d %.6f %d" % r)
        return
    else:
        sys.exit(__doc__)
    print("%d %d %.6f" % r)


if __name__ == "__main__":
    main()
