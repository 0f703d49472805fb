#!/usr/bin/env python3
"""Data larger than memory: blockfs beside an in-process block shuffle on the same file.

  larger.py [--work DIR] [--markdown FILE] [--fraction 0.6] [--ratio 2.3] [--throttle-mbps 400]

Rows (docs/PERFORMANCE.md, "Larger than memory"); each epoch row is one warm-up epoch, then
epochs 1-3 (median of three where it says so):
  (a) a raw file of 4 KiB records of FRACTION x the memory this machine gives (the least of
      RAM and this process's memory cgroup), served in place with default flags: disk bytes
      per epoch (the daemon's /proc/PID/io), `dd bs=1M` of new epochs beside the same flags on
      a 1 GiB file (alternating which goes first), Python f.read(4096) per record beside the
      in-process loader (records yielded from 16 MiB preads, blocks in a random order), the
      daemon's RSS and the file's pages in the page cache (fincore);
  (b) the same file in a memory cgroup of D / RATIO (made here, v1 or v2), the daemon and the
      reader inside it: disk bytes and time per epoch for blockfs and for the in-process loader,
      then both again with the disk throttled (v1 blkio or v2 io.max) to THROTTLE MB/s.
Needs root. The file is made once under --work (and kept).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

from bench import BIN, MiB, ROOT, Daemon, drop_caches, info

GiB = 1 << 30


def memory():
    """The least of MemTotal and this process's memory cgroup limit (v1 or v2)."""
    with open("/proc/meminfo") as f:
        total = int(next(l for l in f if l.startswith("MemTotal:")).split()[1]) * 1024
    for line in open("/proc/self/cgroup"):
        _, ctl, path = line.strip().split(":", 2)
        for lim in ("/sys/fs/cgroup/memory%s/memory.limit_in_bytes" % path if "memory" in ctl.split(",") else "",
                    "/sys/fs/cgroup%s/memory.max" % path if ctl == "" else ""):
            try:
                v = open(lim).read().strip()
                if v != "max" and int(v) < total:
                    total = int(v)
            except (OSError, ValueError):
                pass
    return total


def headroom(total):
    """view.Headroom: a quarter, at least 1 GiB, at most half."""
    return max(total // 4, min(GiB, total // 2))


def make_file(path, size):
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    print("making %s (%.1f GiB)" % (path, size / GiB), flush=True)
    seed = os.urandom(64 * MiB)
    with open(path + ".tmp", "wb") as f:
        for i in range(size // len(seed)):
            f.write(seed[i % 7:] + seed[:i % 7])  # not one block repeated: shifted copies
        f.write(seed[:size % len(seed)])
    os.rename(path + ".tmp", path)


def disk_read(pid):
    with open("/proc/%d/io" % pid) as f:
        return int(next(l for l in f if l.startswith("read_bytes:")).split()[1])


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(l for l in f if l.startswith("VmRSS:")).split()[1]) // 1024


def cached_gib(path):
    out = subprocess.check_output(["fincore", "-nbo", "RES", path], text=True).split()
    return int(out[0]) / GiB


class Cgroup:
    """A memory cgroup (and, with throttle, an I/O limit) that commands can be run in."""

    def __init__(self, name, limit, throttle=0):
        self.v1 = os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")
        self.dirs = []
        if self.v1:
            mem = "/sys/fs/cgroup/memory/" + name
            os.makedirs(mem, exist_ok=True)
            open(mem + "/memory.limit_in_bytes", "w").write(str(limit))
            self.dirs.append(mem)
            if throttle:
                blk = "/sys/fs/cgroup/blkio/" + name
                os.makedirs(blk, exist_ok=True)
                open(blk + "/blkio.throttle.read_bps_device", "w").write("%s %d" % (self.dev(), throttle))
                self.dirs.append(blk)
        else:
            d = "/sys/fs/cgroup/" + name
            os.makedirs(d, exist_ok=True)
            open(d + "/memory.max", "w").write(str(limit))
            if throttle:
                open(d + "/io.max", "w").write("%s rbps=%d" % (self.dev(), throttle))
            self.dirs.append(d)

    @staticmethod
    def dev():
        st = os.stat(ROOT)
        base = os.path.realpath("/sys/dev/block/%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev)))
        if os.path.exists(os.path.join(base, "partition")):
            base = os.path.dirname(base)
        return open(os.path.join(base, "dev")).read().strip()

    def argv(self, argv):
        enter = "; ".join("echo $$ > %s/cgroup.procs" % d for d in self.dirs)
        return ["sh", "-c", enter + '; exec "$@"', "sh"] + list(argv)

    def close(self):
        for d in self.dirs:
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.1)


def mount(data, mnt, cg=None):
    """bench.Daemon for blockfs mount --record-size 4096 DATA MNT with default flags (inside cg)."""
    argv = [BIN, "mount", "--record-size", "4096", data, mnt]
    return Daemon(cg.argv(argv) if cg else argv, mnt, wait=30)


def dd(path, cg=None):
    argv = ["dd", "if=" + path, "of=/dev/null", "bs=1M", "status=none"]
    t = time.perf_counter()
    subprocess.run(cg.argv(argv) if cg else argv, check=True)
    return time.perf_counter() - t


def reader(args, cg=None):
    """bench/readers.py ARGS (inside cg): (records, bytes, seconds, disk bytes)."""
    argv = [sys.executable, os.path.join(ROOT, "bench", "readers.py")] + [str(a) for a in args]
    out = subprocess.run(cg.argv(argv) if cg else argv, check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1]), float(out[2]), int(out[3]) if len(out) > 3 else 0


def epochs_blockfs(m, size, first, n, cg=None):
    """Read epochs first..first+n-1 with dd: [(seconds, disk bytes)]."""
    out = []
    for e in range(first, first + n):
        before = disk_read(m.p.pid)
        s = dd(os.path.join(m.mnt, "epoch-%04d" % e), cg)
        out.append((s, disk_read(m.p.pid) - before))
    return out


def epochs_inproc(data, n, cg=None, seed=0):
    out = []
    for e in range(n):
        _, _, s, disk = reader(["rawblock", data, 4096, seed + e], cg)
        out.append((s, disk))
    return out


def fmt_epochs(rows, size):
    return "; ".join("%.1f s, %.2f GiB (%.0f%%)" % (s, d / GiB, 100 * d / size) for s, d in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--markdown")
    ap.add_argument("--fraction", type=float, default=0.6)
    ap.add_argument("--ratio", type=float, default=2.3)
    ap.add_argument("--throttle-mbps", type=int, default=400)
    ap.add_argument("--skip-a", action="store_true")
    ap.add_argument("--skip-b", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("larger.py needs root (cgroups, drop_caches, mounts)")
    os.makedirs(a.work, exist_ok=True)
    mem = memory()
    size = int(mem * a.fraction) // (16 * MiB) * (16 * MiB)
    big = os.path.join(a.work, "larger.bin")
    small = os.path.join(a.work, "larger-1g.bin")
    make_file(big, size)
    make_file(small, GiB)
    lines = ["blockfs bench larger.py, %s; %s; memory %.1f GiB; data %.1f GiB" % (
        time.strftime("%Y-%m-%d"), os.uname().release, mem / GiB, size / GiB), ""]
    lines += ["| row | figure |", "|---|---|"]

    def row(name, value):
        lines.append("| %s | %s |" % (name, value))
        print(lines[-1], flush=True)

    if not a.skip_a:
        drop_caches()
        with mount(big, os.path.join(a.work, "mnt-big")) as mb, mount(small, os.path.join(a.work, "mnt-small")) as ms:
            nfo = info(mb.mnt)
            row("(a) plan", "%s; %s" % (nfo["memory"]["budget_reason"], nfo["direct_io_reason"]))
            warm = epochs_blockfs(mb, size, 0, 1)
            epochs_blockfs(ms, GiB, 0, 1)
            row("(a) blockfs epoch 0 (cold, warm-up)", fmt_epochs(warm, size))
            big_rows, small_rates = [], []
            for e in range(1, 4):
                order = [(mb, size, big_rows), (ms, GiB, small_rates)]
                if e % 2 == 0:
                    order.reverse()
                for m, sz, acc in order:
                    r = epochs_blockfs(m, sz, e, 1)[0]
                    acc.append(r)
            row("(a) blockfs epochs 1-3: time, disk read", fmt_epochs(big_rows, size))
            big_rate = statistics.median(size / s for s, _ in big_rows) / 1e6
            small_rate = statistics.median(GiB / s for s, _ in small_rates) / 1e6
            row("(a) new epoch dd bs=1M, MB/s: %.1f GiB / 1 GiB (median of 3)" % (size / GiB),
                "%.0f / %.0f = **%.2f** (floor 0.8)" % (big_rate, small_rate, big_rate / small_rate))
            worst = max(d for _, d in big_rows)
            row("(a) disk read per epoch, worst of epochs 1-3", "%.3f GiB = **%.1f%%** of the data (floor 5%%)" % (worst / GiB, 100 * worst / size))
            row("(a) daemon RSS; file pages cached", "%d MiB; %.1f GiB" % (rss_mib(mb.p.pid), cached_gib(big)))
            # Python read(4096) per record beside the in-process loader, 4 GiB of each, alternated.
            cap = min(size, 4 * GiB)
            reader(["rawblock", big, 4096, 99, cap])  # the loader's warm-up (its file pages)
            py, ip = [], []
            for e in range(4, 7):
                order = [("py", e), ("ip", e)]
                if e % 2:
                    order.reverse()
                for kind, ep in order:
                    if kind == "py":
                        n, b, s, _ = reader(["seq", os.path.join(mb.mnt, "epoch-%04d" % ep), 4096, cap])
                        py.append(b / s / 1e6)
                    else:
                        n, b, s, _ = reader(["rawblock", big, 4096, ep, cap])
                        ip.append(b / s / 1e6)
            row("(a) Python read(4096) per record / in-process loader, MB/s (median of 3, %d GiB each)" % (cap // GiB),
                "%.0f / %.0f = **%.2f** (floor 1.0)" % (statistics.median(py), statistics.median(ip), statistics.median(py) / statistics.median(ip)))
            inproc = epochs_inproc(big, 3, seed=10)
            row("(a) in-process loader, epochs 1-3 (after blockfs's): time, disk read", fmt_epochs(inproc, size))

    if not a.skip_b:
        limit = int(size / a.ratio) // MiB * MiB
        M = limit - headroom(limit)
        bound = 1.1 * (size - M) + 256 * MiB
        row("(b) cgroup", "limit %.2f GiB (data %.1fx), M = limit - headroom = %.2f GiB, floor 1.1 x (D - M) + 256 MiB = %.2f GiB"
            % (limit / GiB, size / limit, M / GiB, bound / GiB))
        for throttle in (0, a.throttle_mbps * 1000000):
            tag = "(b) throttled %d MB/s" % (throttle // 1000000) if throttle else "(b)"
            n = 2 if throttle else 3
            drop_caches()
            cg = Cgroup("blockfs-bench-larger-%d" % os.getpid(), limit, throttle)
            try:
                with mount(big, os.path.join(a.work, "mnt-big"), cg) as m:
                    if not throttle:
                        nfo = info(m.mnt)
                        row("(b) plan", "%s; %s" % (nfo["memory"]["budget_reason"], nfo["direct_io_reason"]))
                    warm = epochs_blockfs(m, size, 0, 1, cg)
                    rows = epochs_blockfs(m, size, 1, n, cg)
                    rss = rss_mib(m.p.pid)
                row("%s blockfs epoch 0; epochs 1-%d" % (tag, n), "%s; %s; daemon RSS %d MiB" % (fmt_epochs(warm, size), fmt_epochs(rows, size), rss))
                med = statistics.median(d for _, d in rows)
                if not throttle:
                    row("(b) blockfs disk read per epoch (median)", "%.2f GiB (floor %.2f GiB: **%s**)" % (med / GiB, bound / GiB, "met" if med <= bound else "missed"))
                drop_caches()
                ip = epochs_inproc(big, n + 1, cg)
                row("%s in-process loader epoch 0; epochs 1-%d" % (tag, n), "%s; %s" % (fmt_epochs(ip[:1], size), fmt_epochs(ip[1:], size)))
                bt = statistics.median(s for s, _ in rows)
                it = statistics.median(s for s, _ in ip[1:])
                row("%s epoch time blockfs / in-process (median)" % tag, "%.1f s / %.1f s = **%.2f** (lower is better; floor 1.0)" % (bt, it, bt / it))
            finally:
                cg.close()
    text = "\n".join(lines) + "\n"
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
