"""make bench: small records (issue 17). A 1 GiB file served in place with --record-size N for
N = 16, 64 and 256, against numpy's in-process block shuffle of the same file (16 MiB blocks in
random order, records permuted by fancy indexing, permutation included) and a naive pread per
record at random positions.

New epoch: the file in the page cache, the daemon mounted and one warm-up epoch read, then each
run reads an epoch never read before with dd bs=1M; numpy runs right after each blockfs run
(side by side, median of 3). Cold: the page cache dropped (and the daemon remounted) before each
run.
"""
import os
import statistics
import subprocess
import sys

import bench

SIZES = (16, 64, 256)
FLOOR = {16: 1.0, 64: 1.0}  # blockfs new epoch / numpy warm, issue 17


def raw_file(work):
    raw = os.path.join(work, "input-ss.bin")
    if not os.path.exists(raw) or os.path.getsize(raw) != 1 << 30:
        print("making 1 GiB of random bytes", flush=True)
        bench.sh("head -c %d /dev/urandom > %s" % (1 << 30, raw))
    return raw


def npblock(raw, rs, seed):
    """(bytes, seconds) of numpy's block shuffle of raw."""
    return bench.python_reader("npblock", raw, rs, seed)()


def naive(raw, rs, sample, seed):
    return bench.python_reader("naive", raw, rs, sample, seed)()


def dd(path):
    return os.path.getsize(path), bench.timed("dd if=%s of=/dev/null bs=1M" % path)


def mbs(runs):
    return statistics.median(b / s / 1e6 for b, s in runs)


def one_size(raw, mnt, rs, runs=3):
    """Returns {row: MB/s} for record size rs."""
    argv = [bench.BIN, "mount", "--record-size", str(rs), "--seed", "1", raw, mnt]
    epoch = lambda e: os.path.join(mnt, "epoch-%04d" % e)
    new, npw = [], []
    bench.sh("cat %s > /dev/null" % raw)
    with bench.Daemon(argv, mnt):
        bench.sh("dd if=%s of=/dev/null bs=1M status=none" % epoch(0))
        for i in range(runs):
            new.append(dd(epoch(i + 1)))
            npw.append(npblock(raw, rs, 7 + i))
    navw = [naive(raw, rs, 200000, 7 + i) for i in range(runs)]
    cold, npc, navc = [], [], []
    for i in range(runs):
        bench.drop_caches()
        with bench.Daemon(argv, mnt):
            bench.drop_caches()
            cold.append(dd(epoch(i + 1)))
        bench.drop_caches()
        npc.append(npblock(raw, rs, 7 + i))
        bench.drop_caches()
        navc.append(naive(raw, rs, 20000, 7 + i))
    r = {"blockfs new epoch": mbs(new), "numpy block shuffle": mbs(npw), "naive pread": mbs(navw),
         "blockfs cold": mbs(cold), "numpy cold": mbs(npc), "naive cold": mbs(navc),
         "ratios": [a[0] / a[1] / (b[0] / b[1]) for a, b in zip(new, npw)]}
    print("  %4d B: blockfs new %.0f MB/s, numpy %.0f, naive %.1f; cold: blockfs %.0f, numpy %.0f, naive %.2f"
          % (rs, r["blockfs new epoch"], r["numpy block shuffle"], r["naive pread"], r["blockfs cold"],
             r["numpy cold"], r["naive cold"]), flush=True)
    return r


def small_records(work, mnt, sizes=SIZES):
    """Measures every size and returns the Markdown lines of the table and the floors."""
    raw = raw_file(work)
    print("small records: 1 GiB in place", flush=True)
    res = {rs: one_size(raw, mnt, rs) for rs in sizes}
    lines = ["Small records (1 GiB file served in place, --record-size N, default flags). New epoch: "
             "page cache warm, one warm-up epoch, then an epoch never read before with dd bs=1M; numpy "
             "runs after each blockfs run (median of 3). Cold: page cache dropped (and the daemon "
             "remounted) before each run. MB/s (records/s = MB/s / N):", "",
             "| record | blockfs new epoch | numpy block shuffle, warm | naive pread, warm | blockfs cold | numpy cold | naive pread, cold |",
             "|---|---|---|---|---|---|---|"]
    for rs, r in res.items():
        lines.append("| %d B | %.0f | %.0f | %.1f | %.0f | %.0f | %.2f |" % (
            rs, r["blockfs new epoch"], r["numpy block shuffle"], r["naive pread"],
            r["blockfs cold"], r["numpy cold"], r["naive cold"]))
    lines += ["", "| small-record ratio (side by side, median of 3) | measured | floor | |", "|---|---|---|---|"]
    for rs, r in res.items():
        v = statistics.median(r["ratios"])
        floor = FLOOR.get(rs)
        verdict = "" if floor is None else ("ok" if v >= floor else "BELOW")
        lines.append("| %d B: blockfs new epoch / numpy block shuffle | %.2f | %s | %s |"
                     % (rs, v, ">= %.1f" % floor if floor else "-", verdict))
    return lines


if __name__ == "__main__":
    work = sys.argv[1] if len(sys.argv) > 1 else os.path.join(bench.ROOT, "build", "bench")
    sizes = tuple(int(s) for s in sys.argv[2:]) or SIZES
    bench.emit(small_records(work, os.path.join(work, "mnt"), sizes), None)
