#!/usr/bin/env python3
"""What the stall accounting costs (issue 29's floor: at most 3%): an A/B of two blockfs
binaries, the one with the accounting (every FUSE read timed, its waits counted, its reader's
counters kept) and one built from before it, each mounting the same 1 GiB of 4 KiB records in
RAM (a raw file in /dev/shm, served in place, --cache-size 2GiB). After a warm-up epoch (which
loads the cache), each run reads a new epoch of each mount, the binaries alternating which
goes first: `dd bs=1M` (MB/s) and Python reading the epoch with read(4096) on an unbuffered
file (MB/s). The ratio is new over base, run by run; its median is the figure.

    stall_ab.py --new BIN --base BIN [--runs 7] [--mib 1024] [--markdown FILE]

A base binary: git worktree add /tmp/wt-base REV && (cd /tmp/wt-base && go build -o
/tmp/bfs-base ./cmd/blockfs), REV the commit before the accounting (efaf030). Run as root.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench import Daemon, sh  # noqa: E402

MiB = 1 << 20
PY_READ = "import sys\nf = open(sys.argv[1], 'rb', buffering=0)\nwhile f.read(4096):\n    pass\n"


def rate(cmd, nbytes):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return nbytes / (time.perf_counter() - t) / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--new", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--work", default="/dev/shm/blockfs-stall-ab")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    raw = os.path.join(a.work, "records.bin")
    size = a.mib * MiB
    if not os.path.exists(raw) or os.path.getsize(raw) != size:
        sh("head -c %d /dev/urandom > %s" % (size, raw))
    mounts = {}
    daemons = []
    try:
        for name, b in (("new", a.new), ("base", a.base)):
            mnt = os.path.join(a.work, "mnt-" + name)
            d = Daemon([b, "mount", raw, mnt, "--record-size", "4096", "--cache-size", "2GiB", "--seed", "1"], mnt)
            d.__enter__()
            daemons.append(d)
            mounts[name] = mnt
            sh("cat %s/epoch-0000 > /dev/null" % mnt)  # warm-up: the cache loads
        res = {k: {"dd": [], "py": []} for k in mounts}
        epoch = 1
        for run in range(a.runs):
            order = ["new", "base"] if run % 2 == 0 else ["base", "new"]
            for kind in ("dd", "py"):
                for name in order:
                    path = "%s/epoch-%04d" % (mounts[name], epoch)
                    if kind == "dd":
                        r = rate(["dd", "if=" + path, "of=/dev/null", "bs=1M"], size)
                    else:
                        r = rate([sys.executable, "-c", PY_READ, path], size)
                    res[name][kind].append(r)
                epoch += 1
            print("run %d: dd new %.0f base %.0f MB/s; python read(4096) new %.0f base %.0f MB/s" % (
                run, res["new"]["dd"][-1], res["base"]["dd"][-1], res["new"]["py"][-1], res["base"]["py"][-1]), flush=True)
    finally:
        for d in daemons:
            d.__exit__(None, None, None)
    lines = ["| read | with accounting (MB/s, median) | without (MB/s, median) | ratio, run by run (median; min-max) |", "|---|---|---|---|"]
    for kind, what in (("dd", "`dd bs=1M` of a new epoch"), ("py", "Python `read(4096)` of a new epoch")):
        ratios = [n / b for n, b in zip(res["new"][kind], res["base"][kind])]
        lines.append("| %s | %.0f | %.0f | **%.3f** (%.3f-%.3f) |" % (what, statistics.median(res["new"][kind]),
                                                                      statistics.median(res["base"][kind]),
                                                                      statistics.median(ratios), min(ratios), max(ratios)))
    lines.append("")
    lines.append("%d runs alternated, %d MiB of 4 KiB records in RAM; command: `%s`" % (a.runs, a.mib, " ".join(["bench/stall_ab.py"] + sys.argv[1:])))
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
