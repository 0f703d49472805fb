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

import procstat
from bench_report import emit, human, report, report_steady
import small as small_records

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

    def __init__(self, argv, mnt, wait=20):
        self.argv, self.mnt, self.wait = argv, mnt, wait

    def __enter__(self):
        os.makedirs(self.mnt, exist_ok=True)
        self.p = subprocess.Popen(self.argv, stderr=subprocess.DEVNULL)
        deadline = time.time() + self.wait
        while not mounted(self.mnt):
            if self.p.poll() is not None or time.time() > deadline:
                self.p.kill()  # a daemon still mounting must not outlive the bench
                self.p.wait()
                raise SystemExit("daemon did not mount: %s" % " ".join(self.argv))
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(timeout=30)
        if mounted(self.mnt):
            sh("umount -l " + self.mnt)

    def cpu_seconds(self):
        return procstat.cpu_seconds(self.p.pid)

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


def peers(raw, ds, rs, naive, inproc, *limit):
    """The rows blockfs is compared with, named naive and inproc: Python preads of records of
    the raw file in random order (cold and warm), and the in-process block shuffle of the
    packed dataset ds (of its first limit bytes, if given)."""
    r = Row(naive, rs)
    measure(r, ("cold",), python_reader("naive", raw, rs, 20000, 7), drop_caches)
    measure(r, ("warm",), python_reader("naive", raw, rs, 200000, 7), lambda: None)
    return [r, measure(Row(inproc, rs), ("cold", "warm"), python_reader("inproc", ds, rs, 7, *limit), drop_caches)]


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
            sh("%s pack --quiet --force --block-size 16MiB --record-size %d %s %s" % (BIN, rs, raw, ds))
        sets[name] = (raw, ds, rs)
    lines = os.path.join(work, "input-var.txt")
    if not os.path.exists(lines):
        print("making 512 MiB of variable-length lines", flush=True)
        # Random bytes: newlines fall at random, giving lines of geometric length (mean 256 B).
        sh("head -c %d /dev/urandom > %s" % (512 * MiB, lines))
    ds = os.path.join(work, "ds-var")
    if not os.path.exists(os.path.join(ds, "blockfs.json")):
        sh("%s pack --quiet --force --block-size 16MiB %s %s" % (BIN, lines, ds))
    sets["var"] = (lines, ds, 256)
    return sets


def packed_bytes(ds):
    """The bytes of the dataset at ds, or None if there is none."""
    try:
        with open(os.path.join(ds, "blockfs.json")) as f:
            return json.load(f)["bytes"]
    except (OSError, ValueError, KeyError):
        return None


def blocks_of(ds):
    with open(os.path.join(ds, "blockfs.json")) as f:
        return [os.path.join(ds, b["file"]) for b in json.load(f)["blocks"]]


def meminfo(field):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def stats(mnt):
    with open(os.path.join(mnt, ".blockfs", "stats.json")) as f:
        return json.load(f)


def info(mnt):
    with open(os.path.join(mnt, ".blockfs", "info.json")) as f:
        return json.load(f)


def steady_state(work, mnt, lb):
    """The steady state of a training run on a 1 GiB dataset of 4 KiB records, default flags:
    (a) new epochs after one warm-up epoch, against what the same bytes cost from memory
    elsewhere; (b) 30 epochs in a row; (c) data larger than the cache with the block files
    dropped from the page cache between epochs. Returns (rows, facts)."""
    size, rs = 1 << 30, 4096
    raw = os.path.join(work, "input-ss.bin")
    if not os.path.exists(raw) or os.path.getsize(raw) != size:
        print("making 1 GiB of 4 KiB records for the steady state", flush=True)
        sh("head -c %d /dev/urandom > %s" % (size, raw))
    ds = os.path.join(work, "ds-ss")
    if packed_bytes(ds) != size:
        sh("%s pack --quiet --force --block-size 16MiB --record-size %d %s %s" % (BIN, rs, raw, ds))
    files = blocks_of(ds)
    rows, facts = [], {}
    print("steady state: 1 GiB of 4 KiB records, default flags", flush=True)

    # (a) New epochs after a warm-up epoch: every run reads an epoch never read before.
    drop_caches()
    with Daemon([BIN, "mount", "--seed", "1", ds, mnt], mnt) as d:
        epoch = iter(range(1, 1000))
        path = lambda e: os.path.join(mnt, "epoch-%04d" % e)
        sh("dd if=%s of=/dev/null bs=1M status=none" % path(0))
        before = stats(mnt)["disk_bytes"]
        for e in (next(epoch), next(epoch), next(epoch)):
            sh("dd if=%s of=/dev/null bs=1M status=none" % path(e))
        facts["disk_mib_epochs_1_3"] = (stats(mnt)["disk_bytes"] - before) / MiB
        nfo = info(mnt)
        facts["direct_io"], facts["direct_io_reason"] = nfo["direct_io"], nfo["direct_io_reason"]
        facts["cache_size"], facts["cache_size_reason"] = nfo["cache_size"], nfo["cache_size_reason"]
        # The loopback baseline (the block files warm in the page cache, a fresh mount each
        # run) interleaved with blockfs's new epochs, alternating which goes first: on this
        # machine a run's rate depends on what ran just before it, and runs grouped by kind
        # (first all of blockfs's, later all of the loopback's) put the ratio at 0.72-0.77
        # where interleaved runs put it at 0.84-1.28 (median 1.07).
        sh("cat %s > /dev/null" % " ".join(files))

        def loop():
            with Daemon([LOOP, lb] + files, lb):
                return size, timed("dd if=%s/data of=/dev/null bs=1M" % lb)

        def new_epoch():
            return size, timed("dd if=%s of=/dev/null bs=1M" % path(next(epoch)))

        ours, base = [], []
        for i in range(5):
            for f, out in ((new_epoch, ours), (loop, base))[::1 if i % 2 == 0 else -1]:
                out.append(f())
        row = Row("steady: blockfs new epoch, dd bs=1M", rs)
        row.set("new", ours)
        rows.append(row)
        lb_row = Row("steady: loopback FUSE daemon, dd bs=1M, warm", rs)
        lb_row.set("new", base)
        row = Row("steady: blockfs new epoch, Python read(4096)", rs)
        row.set("new", [python_reader("seq", path(next(epoch)), rs)() for _ in range(3)])
        rows.append(row)
        row = Row("steady: blockfs new epoch, 4 readers on shard-R-of-4", rs)
        def shards():
            e = next(epoch)
            cmd = " ".join("dd if=%s/shard-%d-of-4/epoch-%04d of=/dev/null bs=1M status=none &" % (mnt, r, e) for r in range(4))
            return size, timed(cmd + " wait")
        row.set("new", [shards() for _ in range(3)])
        rows.append(row)

    # Baselines from memory: the same bytes in the page cache, read the ways loaders do today.
    sh("cat %s > /dev/null" % raw)
    row = Row("steady: naive Python pread per record, warm", rs)
    row.set("new", [python_reader("naive", raw, rs, 200000, 7 + i)() for i in range(3)])
    rows.append(row)
    sh("cat %s > /dev/null" % " ".join(files))
    row = Row("steady: in-process block shuffle (Python), warm", rs)
    row.set("new", [python_reader("inproc", ds, rs, 7 + i)() for i in range(3)])
    rows.append(row)
    rows.append(lb_row)  # measured with blockfs's new epochs, above
    for r in rows:
        print("  %-52s %8.0f MB/s %10.0f rec/s" % (r.name, *r.rate["new"]), flush=True)

    # (b) 30 epochs in a row after the warm-up: the rate stays, the page cache does not grow.
    drop_caches()
    with Daemon([BIN, "mount", "--seed", "2", ds, mnt], mnt) as d:
        sh("dd if=%s/epoch-0000 of=/dev/null bs=1M status=none" % mnt)
        cached0 = meminfo("Cached")
        rates = []
        for e in range(1, 31):
            rates.append(size / timed("dd if=%s/epoch-%04d of=/dev/null bs=1M" % (mnt, e)) / 1e6)
        facts["first5_mbs"] = statistics.median(rates[:5])
        facts["last5_mbs"] = statistics.median(rates[-5:])
        facts["cached_growth_mib"] = (meminfo("Cached") - cached0) / MiB
        facts["rss_mib"] = d.peak_rss_kib() / 1024
        facts["budget_mib"] = info(mnt)["cache_size"] / MiB
    print("  30 epochs: first five %.0f MB/s, last five %.0f MB/s; page cache %+.0f MiB; peak RSS %.0f MiB (cache %.0f MiB)"
          % (facts["first5_mbs"], facts["last5_mbs"], facts["cached_growth_mib"], facts["rss_mib"], facts["budget_mib"]), flush=True)

    # (c) Larger than the cache, and (dropping the page cache between epochs) than RAM.
    drop_caches()
    with Daemon([BIN, "mount", "--seed", "3", "--cache-size", "256MiB", ds, mnt], mnt):
        facts["large_direct_io"] = info(mnt)["direct_io"]
        per = []
        for e in range(3):
            before = stats(mnt)["disk_bytes"]
            sh("dd if=%s/epoch-%04d of=/dev/null bs=1M status=none" % (mnt, e))
            per.append((stats(mnt)["disk_bytes"] - before) / size)
            drop_caches()
        facts["large_disk_per_epoch"] = max(per)
    print("  larger than the cache: disk bytes per epoch / data size, worst of 3: %.3f (direct I/O %s)"
          % (facts["large_disk_per_epoch"], facts["large_direct_io"]), flush=True)
    return rows, facts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=int, default=2, help="size of the 4 KiB-record set")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--steady-only", action="store_true", help="only the steady-state rows")
    ap.add_argument("--windows-only", action="store_true", help="only the time-series window rows")
    ap.add_argument("--small-only", action="store_true", help="only the small-record rows (bench/small.py)")
    ap.add_argument("--s3-only", action="store_true", help="only the object store rows (bench/s3bench.py)")
    ap.add_argument("--loader-only", action="store_true", help="only the PyTorch loader rows (bench/loader_bench.py)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("make bench needs root (it drops the page cache and mounts)")
    t_start = time.time()
    mnt = os.path.join(a.work, "mnt")
    lb = os.path.join(a.work, "lb")
    if a.steady_only:
        os.makedirs(a.work, exist_ok=True)
        srows, sfacts = steady_state(a.work, mnt, lb)
        report_steady(srows, sfacts, time.time() - t_start, a.markdown)
        return
    if a.loader_only:
        import loader_bench
        lines = ["blockfs bench --loader-only, %s; %s" % (time.strftime("%Y-%m-%d"), os.uname().release), ""]
        emit(lines + loader_bench.run(a.work), a.markdown)
        return
    if a.s3_only:
        import s3bench
        lines = ["blockfs bench --s3-only, %s; %s" % (time.strftime("%Y-%m-%d"), os.uname().release), ""]
        emit(lines + s3bench.run(a.work), a.markdown)
        return
    if a.windows_only:
        os.makedirs(a.work, exist_ok=True)
        lines = ["blockfs bench --windows-only, %s; %s" % (time.strftime("%Y-%m-%d"), os.uname().release), ""]
        emit(lines + windows_bench(a.work, mnt), a.markdown)
        return
    if a.small_only:
        os.makedirs(a.work, exist_ok=True)
        emit(["blockfs bench --small-only, %s; %s" % (time.strftime("%Y-%m-%d"), os.uname().release), ""]
             + small_records.small_records(a.work, mnt), a.markdown)
        return
    sets = make_datasets(a.work, a.gib)
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

    rows += peers(raw4k, ds4k, rs, "naive: Python pread per record, random order", "in-process block shuffle (Python)")

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
    small += peers(raw256, ds256, rs256, "256 B: naive Python pread, random order", "256 B: in-process block shuffle, 128 MiB", 128 * MiB)

    lines, dsvar, _ = sets["var"]
    bvar = Remount(blockfs_argv(dsvar), mnt)
    bvar()
    sizevar = os.path.getsize(os.path.join(mnt, "epoch-0000"))
    small.append(measure(Row("variable lines: blockfs epoch dd bs=1M", 256), ("cold", "warm"),
                         lambda: (sizevar, timed("dd if=%s/epoch-0000 of=/dev/null bs=1M" % mnt)), bvar))
    bvar.close()

    srows, sfacts = steady_state(a.work, mnt, lb)
    wlines = windows_bench(a.work, mnt)
    slines = small_records.small_records(a.work, mnt)
    report(rows, small, facts, srows, sfacts, size4k, len(files), time.time() - t_start, a.markdown)
    emit(wlines, a.markdown + ".windows" if a.markdown else None)
    import loader_bench
    emit(loader_bench.run(a.work), a.markdown + ".loader" if a.markdown else None)
    emit(slines, a.markdown + ".small" if a.markdown else None)
    import s3bench
    emit(s3bench.run(a.work), a.markdown + ".s3" if a.markdown else None)


def windows_bench(work, mnt, gib=4, L=50):
    """Time-series windows (issue 14): gib GiB of 64-byte rows (float32 x 16) in a .npy, windows
    of L rows. blockfs --window L reads the first 400k windows of an epoch front to back; the
    baseline is the usual np.memmap loader (uniform random starts, each window copied) over 20k
    windows. Cold: page cache dropped (and the daemon remounted) before each run; warm: the .npy
    in the page cache, and blockfs reading an epoch it has not read. Returns Markdown lines."""
    import numpy as np
    cols, row = 16, 64
    n = (gib << 30) // row
    npy = os.path.join(work, "series-%dg.npy" % gib)
    if not os.path.exists(npy) or os.path.getsize(npy) < n * row:
        print("making %d GiB of float32 x 16 rows" % gib, flush=True)
        x = np.lib.format.open_memmap(npy, mode="w+", dtype=np.float32, shape=(n, cols))
        step = 1 << 22
        for i in range(0, n, step):
            k = min(step, n - i)
            x[i:i + k] = np.arange(i * cols, (i + k) * cols, dtype=np.float32).reshape(k, cols)
        x.flush()
        del x
    win = L * row
    argv = [BIN, "mount", "--window", str(L), "--seed", "1", npy, mnt]
    nwin, nbase = 400_000, 20_000
    out = {}
    print("windows: %d GiB of 64-byte rows, windows of %d rows" % (gib, L), flush=True)
    for mode in ("cold", "warm"):
        base, blk = [], []
        for i in range(3):
            if mode == "cold":
                drop_caches()
            else:
                sh("cat %s > /dev/null" % npy)
            b, t = python_reader("windows", npy, L, nbase, i)()
            base.append(nbase / t)
            with Daemon(argv, mnt):
                if mode == "cold":
                    drop_caches()
                path = os.path.join(mnt, "epoch-%04d" % (i + 1))
                b, t = python_reader("seq", path, win, nwin * win)()
                blk.append(nwin / t)
        out[mode] = (statistics.median(blk), statistics.median(base))
        print("  %s: blockfs %.0f windows/s, np.memmap random windows %.0f windows/s" % (mode, out[mode][0], out[mode][1]), flush=True)
    # Disk bytes per epoch: a whole epoch of a 64 MiB series (1M rows, 3.2 GB of windows) read
    # with dd, through a cache that cannot hold the file, with direct I/O (no kernel cache).
    small = os.path.join(work, "series-64m.npy")
    if not os.path.exists(small):
        x = np.lib.format.open_memmap(small, mode="w+", dtype=np.float32, shape=(1 << 20, cols))
        x[:] = np.arange((1 << 20) * cols, dtype=np.float32).reshape(-1, cols)
        x.flush()
        del x
    drop_caches()
    with Daemon([BIN, "mount", "--window", str(L), "--cache-size", "40MiB", "--direct", "on", "--readahead", "16MiB", small, mnt], mnt):
        sh("dd if=%s/epoch-0001 of=/dev/null bs=1M status=none" % mnt)
        disk_ratio = stats(mnt)["disk_bytes"] / os.path.getsize(small)
    cold_ratio = out["cold"][0] / out["cold"][1]
    warm_ratio = out["warm"][0] / out["warm"][1]
    lines = [
        "Time-series windows: %d GiB of 64-byte rows (float32 x 16), windows of %d rows; blockfs reads the first %dk windows of a new epoch front to back (Python read of %d bytes per window), np.memmap reads %dk windows at uniformly random starts, each copied (median of 3)." % (gib, L, nwin // 1000, win, nbase // 1000),
        "",
        "| row | cold windows/s | warm windows/s |",
        "|---|---|---|",
        "| blockfs --window %d, epoch file | %.0f | %.0f |" % (L, out["cold"][0], out["warm"][0]),
        "| np.memmap, random windows copied | %.0f | %.0f |" % (out["cold"][1], out["warm"][1]),
        "",
        "| window ratio | measured | floor | |",
        "|---|---|---|---|",
        "| blockfs / memmap random, cold | %.1f | >= 20 | %s |" % (cold_ratio, "ok" if cold_ratio >= 20 else "BELOW"),
        "| blockfs / memmap random, warm | %.2f | >= 0.8 | %s |" % (warm_ratio, "ok" if warm_ratio >= 0.8 else "BELOW"),
        "| disk bytes per epoch / file size (64 MiB series, 40 MiB cache, direct I/O) | %.2f | <= 1.1 | %s |" % (disk_ratio, "ok" if disk_ratio <= 1.1 else "ABOVE"),
    ]
    return lines


if __name__ == "__main__":
    main()
