#!/usr/bin/env python3
"""What a trainer pays in RAM: 1 parent + N reader processes, through blockfs or a map-style index.

  memory.py DATASET MOUNT [--readers 8]

blockfs: the parent holds nothing; reader R reads MOUNT/shard-R-of-N/epoch-0000 front to back.
map-style: the parent builds the sample index as Python objects (a (file, offset, length)
tuple per record, as a typical map-style Dataset keeps), the readers are forked from it (as
DataLoader workers are), and each reads its N-th of a random permutation through the index
with os.pread. Every process reports its USS (Private_Clean + Private_Dirty of
/proc/self/smaps_rollup) when it starts reading and when it is done; the parent sums PSS over
all processes while they are all alive. Needs Linux and the fork start method.
"""
import argparse
import json
import multiprocessing as mp
import os
import random
import time

MiB = 1 << 20


def rollup(pid="self"):
    out = {}
    with open("/proc/%s/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return out


def uss(pid="self"):
    r = rollup(pid)
    return r.get("Private_Clean", 0) + r.get("Private_Dirty", 0)


def blockfs_reader(mount, r, n, results, done):
    start = uss()
    path = os.path.join(mount, "shard-%d-of-%d" % (r, n), "epoch-0000")
    got = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(MiB)
            if not b:
                break
            got += len(b)
    results.put((r, start, uss(), got))
    done.wait()


def index_reader(index, r, n, results, done):
    start = uss()
    order = list(range(r, len(index), n))
    random.Random(r).shuffle(order)
    got = 0
    fds = {}
    for i in order:
        path, off, length = index[i]
        fd = fds.get(path)
        if fd is None:
            fd = fds[path] = os.open(path, os.O_RDONLY)
        got += len(os.pread(fd, length, off))
    results.put((r, start, uss(), got))
    done.wait()


def run(target, args, n):
    ctx = mp.get_context("fork")
    results, done = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=target, args=args + (r, n, results, done)) for r in range(n)]
    t = time.perf_counter()
    for p in procs:
        p.start()
    rows = sorted(results.get() for _ in procs)
    elapsed = time.perf_counter() - t
    pss = rollup()["Pss"] + sum(rollup(p.pid)["Pss"] for p in procs)
    parent = uss()
    done.set()
    for p in procs:
        p.join()
    return {"parent_uss": parent, "total_pss": pss, "elapsed": elapsed,
            "readers": [{"start_uss": a, "end_uss": b, "bytes": g} for _, a, b, g in rows]}


def build_index(dataset):
    with open(os.path.join(dataset, "blockfs.json")) as f:
        man = json.load(f)
    rs = man["record_size"]
    index = []
    for b in man["blocks"]:
        path = os.path.join(dataset, b["file"])
        for k in range(b["records"]):
            index.append((path, k * rs, rs))
    return index


def show(name, r):
    ru = r["readers"]
    print("%-10s parent USS %6.1f MiB | readers' USS start %5.1f-%5.1f MiB, end %5.1f-%5.1f MiB | total PSS %7.1f MiB | %.1f s"
          % (name, r["parent_uss"] / MiB,
             min(x["start_uss"] for x in ru) / MiB, max(x["start_uss"] for x in ru) / MiB,
             min(x["end_uss"] for x in ru) / MiB, max(x["end_uss"] for x in ru) / MiB,
             r["total_pss"] / MiB, r["elapsed"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("mount")
    ap.add_argument("--readers", type=int, default=8)
    a = ap.parse_args()
    show("blockfs", run(blockfs_reader, (a.mount,), a.readers))
    index = build_index(a.dataset)
    print("map-style index: %d records as Python tuples" % len(index))
    show("map-style", run(index_reader, (index,), a.readers))


if __name__ == "__main__":
    main()
