#!/usr/bin/env python3
"""Readers at once through one cache, run by test/readers_cache_test.go (TestCacheGrowsForReaders):

  readers_at_once.py MOUNT READERS GROWN HOLD

READERS threads each read their shard (shard-R-of-READERS) of epoch 0 in 1 MiB reads, and
keep it open (reading a page of it with O_DIRECT now and then) while this waits up to 15 s for
.blockfs/stats.json's cache_capacity to pass GROWN bytes, or HOLD seconds when GROWN is 0; then
they read epochs 1 to 3 of their shards. Prints "ok " and a JSON object:
the capacity before and after, what the readers wanted beyond it then (cache_short), and the
cache's loads (disk_bytes) and the bytes served over epochs 1 to 3.
"""
import json
import mmap
import os
import sys
import threading
import time

mnt, readers, grown, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])


def stats():
    with open(os.path.join(mnt, ".blockfs", "stats.json")) as f:
        return json.load(f)


def read(path):
    fd = os.open(path, os.O_RDONLY)
    while os.read(fd, 1 << 20):
        pass
    return fd


first = stats()["cache_capacity"]
page = mmap.mmap(-1, 4096)  # aligned, for O_DIRECT
held, go = [None] * readers, threading.Event()


def reader(r):
    path = f"{mnt}/shard-{r}-of-{readers}/epoch-0000"
    os.close(read(path))
    # Held with O_DIRECT: each touch is a read the daemon sees (the kernel's page cache would
    # answer a buffered one), as a trainer's next reads would be.
    held[r] = os.open(path, os.O_RDONLY | os.O_DIRECT)
    go.wait()
    for e in (1, 2, 3):
        os.close(read(f"{mnt}/shard-{r}-of-{readers}/epoch-{e:04d}"))


threads = [threading.Thread(target=reader, args=(r,)) for r in range(readers)]
for t in threads:
    t.start()
deadline = time.monotonic() + (15 if grown else hold)
while (not grown or stats()["cache_capacity"] <= grown) and time.monotonic() < deadline:
    # Each reader's open file counts while it has read lately: touch them.
    for fd in held:
        if fd is not None:
            os.preadv(fd, [page], 0)
    time.sleep(0.2)
before = stats()
go.set()
for t in threads:
    t.join()
for fd in held:
    os.close(fd)
after = stats()
print("ok " + json.dumps({"capacity_first": first, "capacity": before["cache_capacity"], "short": before["cache_short"],
                  "loads": after["disk_bytes"] - before["disk_bytes"], "served": after["bytes_served"] - before["bytes_served"]}))
