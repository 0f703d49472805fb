#!/usr/bin/env python3
"""make bench: blockfs against the disk, a loopback FUSE daemon, and what loaders do today.

Builds datasets under build/bench (2 GiB of 4 KiB records by default; 256 B records; variable-
length lines), then measures every row in this one run, cold (page cache dropped and daemons
remounted before each run, median of 3) and warm (median of 5), and prints one table with the issue's
floors. Needs root (drop_caches, mounts). Options: --gib N scales the 4 KiB set; --markdown
FILE also writes the table as Markdown.
"""
import argparse
import glob
import json
import os
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin", "blockfs")
LOOP = os.path.join(ROOT, "bin", "loopback")
READERS = os.path.join(ROOT, "bench", "readers.py")
MiB = 1 << 20


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, **kw)


def drop_caches():
    sh("sync; echo 3 > /proc/sys/vm/drop_caches")


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


class Daemon:
    """A FUSE daemon in the foreground, mounted at mnt, stopped with SIGTERM."""

    def __init__(self, argv, mnt):
        self.argv, self.mnt = argv, mnt

    def __enter__(self):
        os.makedirs(self.mnt, exist_ok=True)
        self.p = subprocess.Popen(self.argv, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while not mounted(self.mnt):
            if self.p.poll() is not None or time.time() > deadline:
                raise SystemExit("daemon did not mount: %s" % " ".join(self.argv))
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(timeout=30)
        if mounted(self.mnt):
            sh("umount -l " + self.mnt)

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.p.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_kib(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0


def timed(cmd):
    t = time.perf_counter()
    sh(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def python_reader(*args):
    """A run of bench/readers.py with args: returns (bytes, seconds)."""
    def run():
        out = subprocess.run([sys.executable, READERS] + [str(a) for a in args], check=True,
                             capture_output=True, text=True).stdout.split()
        return int(out[1]), float(out[2])
    return run


class Row:
    def __init__(self, name, rs):
        self.name, self.rs = name, rs
        self.rate = {}  # mode -> (MB/s, records/s)

    def set(self, mode, results):
        """results: list of (bytes, seconds) runs; keeps the median rate."""
        mbs = statistics.median(b / s / 1e6 for b, s in results)
        self.rate[mode] = (mbs, mbs * 1e6 / self.rs)


def measure(row, modes, run, prepare_cold):
    for mode in modes:
        res = []
        runs = 3
        if mode == "warm":
            run()  # warm up
            runs = 5  # warm runs are short and noisier
        for _ in range(runs):
            if mode == "cold":
                prepare_cold()
            res.append(run())
        row.set(mode, res)
        print("  %-44s %-4s %8.0f MB/s %10.0f rec/s" % (row.name, mode, *row.rate[mode]), flush=True)
    return row


def make_datasets(work, gib):
    os.makedirs(work, exist_ok=True)
    sets = {}
    for name, rs, size in (("4k", 4096, gib << 30), ("256", 256, 512 * MiB)):
        raw = os.path.join(work, "input-%s.bin" % name)
        if not os.path.exists(raw) or os.path.getsize(raw) != size:
            print("making %s of %d B records" % (human(size), rs), flush=True)
            sh("head -c %d /dev/urandom > %s" % (size, raw))
        ds = os.path.join(work, "ds-%s" % name)
        if packed_bytes(ds) != size:
            sh("%s pack --quiet --force --record-size %d %s %s" % (BIN, rs, raw, ds))
        sets[name] = (raw, ds, rs)
    lines = os.path.join(work, "input-var.txt")
    if not os.path.exists(lines):
        print("making 512 MiB of variable-length lines", flush=True)
        # Random bytes: newlines fall at random, giving lines of geometric length (mean 256 B).
        sh("head -c %d /dev/urandom > %s" % (512 * MiB, lines))
    ds = os.path.join(work, "ds-var")
    if not os.path.exists(os.path.join(ds, "blockfs.json")):
        sh("%s pack --quiet --force %s %s" % (BIN, lines, ds))
    sets["var"] = (lines, ds, 256)
    return sets


def packed_bytes(ds):
    """The bytes of the dataset at ds, or None if there is none."""
    try:
        with open(os.path.join(ds, "blockfs.json")) as f:
            return json.load(f)["bytes"]
    except (OSError, ValueError, KeyError):
        return None


def human(n):
    return "%.0f MiB" % (n / MiB) if n < 1 << 30 else "%.1f GiB" % (n / (1 << 30))


def blocks_of(ds):
    with open(os.path.join(ds, "blockfs.json")) as f:
        return [os.path.join(ds, b["file"]) for b in json.load(f)["blocks"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=int, default=2, help="size of the 4 KiB-record set")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--markdown", help="also write the table here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("make bench needs root (it drops the page cache and mounts)")
    t_start = time.time()
    sets = make_datasets(a.work, a.gib)
    mnt = os.path.join(a.work, "mnt")
    lb = os.path.join(a.work, "lb")
    rows = []
    blockfs_argv = lambda ds: [BIN, "mount", "--seed", "1", ds, mnt]

    raw4k, ds4k, rs = sets["4k"]
    size4k = os.path.getsize(raw4k)
    files = blocks_of(ds4k)
    print("4 KiB records, %s, %d blocks" % (human(size4k), len(files)), flush=True)
    cat_blocks = "for f in %s; do dd if=$f of=/dev/null bs=1M status=none; done" % " ".join(files)
    rows.append(measure(Row("raw: dd bs=1M of the block files", rs), ("cold", "warm"),
                        lambda: (size4k, timed(cat_blocks)), drop_caches))

    class Remount:
        """prepare_cold for daemon rows: drop caches and restart the daemon."""

        def __init__(self, argv, at):
            self.argv, self.at, self.d = argv, at, None

        def __call__(self):
            if self.d:
                self.d.__exit__()
            drop_caches()
            self.d = Daemon(self.argv, self.at).__enter__()
            drop_caches()

        def close(self):
            if self.d:
                self.d.__exit__()
                self.d = None

    loop = Remount([LOOP, lb] + files, lb)
    loop()
    rows.append(measure(Row("loopback FUSE daemon: dd bs=1M", rs), ("cold", "warm"),
                        lambda: (size4k, timed("dd if=%s/data of=/dev/null bs=1M" % lb)), loop))
    loop.close()

    bfs = Remount(blockfs_argv(ds4k), mnt)
    bfs()
    epoch = os.path.join(mnt, "epoch-0000")
    rows.append(measure(Row("blockfs epoch: dd bs=1M", rs), ("cold", "warm"),
                        lambda: (size4k, timed("dd if=%s of=/dev/null bs=1M" % epoch)), bfs))
    rows.append(measure(Row("blockfs epoch: dd bs=4k", rs), ("cold", "warm"),
                        lambda: (size4k, timed("dd if=%s of=/dev/null bs=4k" % epoch)), bfs))
    rows.append(measure(Row("blockfs epoch: Python read(4096) per record", rs), ("cold", "warm"),
                        python_reader("seq", epoch, rs), bfs))
    rows.append(measure(Row("blockfs epoch: Python read(4096), unbuffered", rs), ("cold", "warm"),
                        python_reader("seq0", epoch, rs), bfs))
    shards = " ".join("dd if=%s/shard-%d-of-4/epoch-0000 of=/dev/null bs=1M status=none &" % (mnt, r) for r in range(4))
    rows.append(measure(Row("blockfs: 4 readers on shard-R-of-4", rs), ("cold", "warm"),
                        lambda: (size4k - size4k % (4 * rs), timed(shards + " wait")), bfs))
    bfs.close()

    r = Row("naive: Python pread per record, random order", rs)
    measure(r, ("cold",), python_reader("naive", raw4k, rs, 20000, 7), drop_caches)
    measure(r, ("warm",), python_reader("naive", raw4k, rs, 200000, 7), lambda: None)
    rows.append(r)
    rows.append(measure(Row("in-process block shuffle (Python)", rs), ("cold", "warm"),
                        python_reader("inproc", ds4k, rs, 7), drop_caches))

    # Daemon facts for one cold epoch plus four shard readers.
    drop_caches()
    with Daemon(blockfs_argv(ds4k), mnt) as d:
        cpu0 = d.cpu_seconds()
        sh("dd if=%s/epoch-0001 of=/dev/null bs=1M status=none" % mnt)
        sh(" ".join("dd if=%s/shard-%d-of-4/epoch-0002 of=/dev/null bs=1M status=none &" % (mnt, r) for r in range(4)) + " wait")
        with open(os.path.join(mnt, ".blockfs", "stats.json")) as f:
            stats = json.load(f)
        cpu = d.cpu_seconds() - cpu0
        rss = d.peak_rss_kib()
    served = stats["bytes_served"]
    facts = {
        "peak_rss_mib": rss / 1024,
        "cpu_s_per_gib": cpu / (served / (1 << 30)),
        "disk_reads": stats["disk_reads"],
        "avg_disk_read_mib": stats["disk_bytes"] / max(1, stats["disk_reads"]) / MiB,
    }

    small = []
    raw256, ds256, rs256 = sets["256"]
    b256 = Remount(blockfs_argv(ds256), mnt)
    b256()
    e256 = os.path.join(mnt, "epoch-0000")
    size256 = os.path.getsize(raw256)
    small.append(measure(Row("256 B: blockfs epoch dd bs=1M", rs256), ("cold", "warm"),
                         lambda: (size256, timed("dd if=%s of=/dev/null bs=1M" % e256)), b256))
    small.append(measure(Row("256 B: blockfs Python read(256), 128 MiB", rs256), ("cold", "warm"),
                         python_reader("seq", e256, rs256, 128 * MiB), b256))
    b256.close()
    r = Row("256 B: naive Python pread, random order", rs256)
    measure(r, ("cold",), python_reader("naive", raw256, rs256, 20000, 7), drop_caches)
    measure(r, ("warm",), python_reader("naive", raw256, rs256, 200000, 7), lambda: None)
    small.append(r)
    small.append(measure(Row("256 B: in-process block shuffle, 128 MiB", rs256), ("cold", "warm"),
                         python_reader("inproc", ds256, rs256, 7, 128 * MiB), drop_caches))

    lines, dsvar, _ = sets["var"]
    bvar = Remount(blockfs_argv(dsvar), mnt)
    bvar()
    sizevar = os.path.getsize(os.path.join(mnt, "epoch-0000"))
    small.append(measure(Row("variable lines: blockfs epoch dd bs=1M", 256), ("cold", "warm"),
                         lambda: (sizevar, timed("dd if=%s/epoch-0000 of=/dev/null bs=1M" % mnt)), bvar))
    bvar.close()

    report(rows, small, facts, size4k, len(files), time.time() - t_start, a.markdown)


def report(rows, small, facts, size, blocks, elapsed, markdown):
    by = {r.name: r for r in rows}
    g = lambda name, mode, i=0: by[name].rate[mode][i]
    dd1m, lbk, rawr = "blockfs epoch: dd bs=1M", "loopback FUSE daemon: dd bs=1M", "raw: dd bs=1M of the block files"
    py, shards = "blockfs epoch: Python read(4096) per record", "blockfs: 4 readers on shard-R-of-4"
    naive, inproc = "naive: Python pread per record, random order", "in-process block shuffle (Python)"
    checks = [
        ("epoch dd bs=1M / loopback, warm", g(dd1m, "warm") / g(lbk, "warm"), 0.9),
        ("epoch dd bs=1M / loopback, cold", g(dd1m, "cold") / g(lbk, "cold"), 0.9),
        ("epoch dd bs=1M / raw, cold", g(dd1m, "cold") / g(rawr, "cold"), 0.7),
        ("Python read(4096) / dd bs=1M, warm", g(py, "warm") / g(dd1m, "warm"), 0.5),
        ("Python read(4096) / dd bs=1M, cold", g(py, "cold") / g(dd1m, "cold"), 0.5),
        ("Python read(4096) / naive, cold, records/s", g(py, "cold", 1) / g(naive, "cold", 1), 10),
        ("Python read(4096) / in-process, cold, records/s", g(py, "cold", 1) / g(inproc, "cold", 1), 1.2),
        ("Python read(4096) / in-process, warm, records/s", g(py, "warm", 1) / g(inproc, "warm", 1), 0.8),
        ("4 shard readers / 1 reader (dd bs=1M), warm", g(shards, "warm") / g(dd1m, "warm"), 1.5),
        ("average disk read, MiB", facts["avg_disk_read_mib"], 1.0),
    ]
    lines = []
    out = lines.append
    out("blockfs bench, %s, %s, %d blocks; %s; %.0f s" % (time.strftime("%Y-%m-%d"), human(size), blocks,
                                                        os.uname().release, elapsed))
    out("")
    out("| row | cold MB/s | cold rec/s | warm MB/s | warm rec/s |")
    out("|---|---|---|---|---|")
    for r in rows + small:
        out("| %s | %.0f | %.0f | %.0f | %.0f |" % (r.name, *r.rate["cold"], *r.rate["warm"]))
    out("")
    out("| ratio | measured | floor | |")
    out("|---|---|---|---|")
    for name, v, floor in checks:
        out("| %s | %.2f | %.2f | %s |" % (name, v, floor, "ok" if v >= floor else "BELOW"))
    out("")
    out("Daemon, one cold epoch plus 4 shard readers (4 KiB set, default options): peak RSS %.0f MiB "
        "(--cache-size 512 MiB), %.2f CPU s per GiB served, %d disk reads averaging %.2f MiB."
        % (facts["peak_rss_mib"], facts["cpu_s_per_gib"], facts["disk_reads"], facts["avg_disk_read_mib"]))
    text = "\n".join(lines)
    print()
    print(text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
