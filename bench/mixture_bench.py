#!/usr/bin/env python3
"""Mixtures side by side (issue 27's floors), every figure from one run:

1. in RAM: a mixture of two sources (weights 0.7/0.3, 4 KiB records) against one dataset of
   the same total size, each mounted with default flags; after a warm-up epoch, each run reads
   a new epoch of each, alternated: `dd bs=1M` (MB/s) and the Python Loader (records/s,
   batch 256, no workers);
2. larger than the cache: the same mixture with --cache-size below its size and --direct on
   (every block from disk): the bytes each source gave the cache per epoch (stats.json
   "sources") against the bytes the epoch draws from it;
3. the daemon's peak RSS (VmHWM) with 16 sources under --cache-size, reading two epochs.

    mixture_bench.py [--work DIR] [--mib 1024] [--runs 5] [--markdown FILE]

Run as root from the repository (bin/blockfs must exist; make bench runs it).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin", "blockfs")
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))
from bench import Daemon, drop_caches, sh  # noqa: E402

RS = 4096
MiB = 1 << 20


def pack(work, name, mib):
    """A packed dataset of mib MiB of 4 KiB records under work; returns its directory."""
    d = os.path.join(work, name)
    if not os.path.exists(os.path.join(d, "blockfs.json")):
        raw = d + ".bin"
        sh("head -c %d /dev/urandom > %s" % (mib * MiB, raw))
        sh("%s pack --format raw --record-size %d %s %s >/dev/null" % (BIN, RS, raw, d))
        os.remove(raw)
    return d


def write_mixture(path, sources, epoch_records=None, opts=None):
    doc = {"sources": [dict({"data": d, "weight": w}, **({"options": opts} if opts else {})) for d, w in sources]}
    if epoch_records:
        doc["epoch_records"] = epoch_records
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def dd_rate(path):
    t = time.perf_counter()
    out = subprocess.run(["dd", "if=" + path, "of=/dev/null", "bs=1M"], capture_output=True, text=True, check=True)
    el = time.perf_counter() - t
    n = int(out.stderr.strip().splitlines()[-1].split()[0])
    return n / el / 1e6


def loader_rate(mnt, epoch):
    """Records/s of blockfs.torch.Loader over a new epoch (run in a child: a fresh process)."""
    code = """
import sys, time
sys.path.insert(0, %r)
import blockfs.torch
l = blockfs.torch.Loader(%r, batch_size=256)
l.set_epoch(%d)
t = time.perf_counter(); n = 0
for b in l:
    n += len(b[0])
print(n / (time.perf_counter() - t))
""" % (os.path.join(ROOT, "python"), mnt, epoch)
    out = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def stats(mnt):
    with open(os.path.join(mnt, ".blockfs", "stats.json")) as f:
        return json.load(f)


def info(mnt):
    with open(os.path.join(mnt, ".blockfs", "info.json")) as f:
        return json.load(f)


def in_ram(work, mib, runs):
    a, b = pack(work, "mix-a", mib * 7 // 10), pack(work, "mix-b", mib - mib * 7 // 10)
    one = pack(work, "mix-one", mib)
    records = mib * MiB // RS
    mix = write_mixture(os.path.join(work, "mix.json"), [(a, 0.7), (b, 0.3)], records)
    m1, m2 = os.path.join(work, "mnt-one"), os.path.join(work, "mnt-mix")
    res = {"dd": ([], []), "loader": ([], [])}
    with Daemon([BIN, "mount", one, m1], m1), Daemon([BIN, "mount", mix, m2], m2):
        for m in (m1, m2):  # warm-up: the data into memory
            dd_rate(os.path.join(m, "epoch-0000"))
        for r in range(runs):
            e = 1 + r
            order = [(0, m1), (1, m2)] if r % 2 == 0 else [(1, m2), (0, m1)]
            for k, m in order:
                res["dd"][k].append(dd_rate(os.path.join(m, "epoch-%04d" % e)))
            for k, m in order:
                res["loader"][k].append(loader_rate(m, 100 + e))
    rows = []
    for what, unit in (("dd", "MB/s"), ("loader", "records/s")):
        one_r, mix_r = statistics.median(res[what][0]), statistics.median(res[what][1])
        rows.append((what, unit, one_r, mix_r, mix_r / one_r, res[what]))
    return rows


def larger(work, runs):
    a, b = pack(work, "mix-a", 716), pack(work, "mix-b", 308)
    mix = write_mixture(os.path.join(work, "mix-larger.json"), [(a, 0.7), (b, 0.3)], 1024 * MiB // RS)
    mnt = os.path.join(work, "mnt-larger")
    out = []
    with Daemon([BIN, "mount", "--cache-size", "256MiB", "--direct", "on", mix, mnt], mnt):
        inf = info(mnt)
        for e in range(2, 2 + runs):
            before = stats(mnt)["sources"]
            drop_caches()
            sh("dd if=%s of=/dev/null bs=1M 2>/dev/null" % os.path.join(mnt, "epoch-%04d" % e))
            after = stats(mnt)["sources"]
            for i, s in enumerate(inf["sources"]):
                drawn = s["records_per_epoch"] * RS
                got = after[i]["bytes_read"] - before[i]["bytes_read"]
                out.append((e, s["name"], drawn, got, got / drawn))
    return out


def sixteen(work):
    srcs = [(pack(work, "mix16-%02d" % i, 64), 1) for i in range(16)]
    mix = write_mixture(os.path.join(work, "mix16.json"), srcs)
    mnt = os.path.join(work, "mnt-16")
    with Daemon([BIN, "mount", "--cache-size", "512MiB", mix, mnt], mnt) as d:
        for e in range(2):
            sh("dd if=%s of=/dev/null bs=1M 2>/dev/null" % os.path.join(mnt, "epoch-%04d" % e))
        cache = info(mnt)["cache_size"]
        return d.peak_rss_kib() * 1024, cache, 512 * MiB


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--markdown")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    lines = ["| figure | one dataset | mixture 0.7/0.3 | ratio | floor |", "|---|---|---|---|---|"]
    for what, unit, one_r, mix_r, ratio, raw in in_ram(a.work, a.mib, a.runs):
        name = "new epoch, `dd bs=1M`" if what == "dd" else "new epoch, Python `Loader` (batch 256)"
        lines.append("| %s (%s) | %.0f | %.0f | **%.2fx** | 0.9x |" % (name, unit, one_r, mix_r, ratio))
        print("%s runs: one %s, mixture %s" % (what, ["%.0f" % x for x in raw[0]], ["%.0f" % x for x in raw[1]]), file=sys.stderr)
    lines += ["", "| epoch | source | bytes drawn | bytes read from disk | ratio (floor 1.05x) |", "|---|---|---|---|---|"]
    for e, name, drawn, got, ratio in larger(a.work, 2):
        lines.append("| %d | %s | %d | %d | **%.3fx** |" % (e, os.path.basename(name), drawn, got, ratio))
    rss, cache, budget = sixteen(a.work)
    lines += ["", "16 sources of 64 MiB, `--cache-size 512MiB`, two epochs: peak RSS %.0f MiB; the daemon's cache %.0f MiB "
              "(the rest of the budget keeps blocks in the kernel's page cache): RSS less the budget **%.0f MiB**, "
              "less the cache %.0f MiB (floor: budget + 64 MiB)" % (rss / MiB, cache / MiB, (rss - budget) / MiB, (rss - cache) / MiB)]
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
