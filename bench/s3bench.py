#!/usr/bin/env python3
"""make bench's object store rows (bench.py --s3-only, or python3 bench/s3bench.py).

Starts MinIO (scripts/minio.sh builds it once per machine) on a free port with its data under
WORK/s3, packs 1 GiB of 4 KiB records in 16 MiB blocks into it, and measures in one run, with
the page cache dropped before each cold run (MinIO's objects are on the same disk):

- the ceiling: every block object GET whole with minio-go, --s3-concurrency at a time
  (bin/s3get whole);
- naive per-record ranged GETs in random order with the same client and concurrency, what a
  map-style Dataset over the store does (bin/s3get naive), in records/s;
- blockfs: epoch dd bs=1M from a fresh s3:// mount (empty cache), through the page cache and
  with iflag=direct (a reader that opens with O_DIRECT: no copy through the page cache), and
  the daemon's peak RSS against --cache-size + 64 MiB;
- blockfs --disk-cache: a first epoch with the disk cache empty, then a second epoch from it
  (page cache dropped), against the same dataset packed on the local disk (a fresh mount, the
  same epoch).

The ceiling and the epochs are measured twice: with every process free to run on both cores
(where the store's CPU and memory bandwidth are shared with blockfs and dd, so each copy blockfs
makes also slows the store), and with MinIO on core 1 and the client (s3get, or blockfs and
dd) on core 0, as a store on another host would be.

Floors (issue 16): epoch >= 0.8x the ceiling; >= 20x naive in records/s; second epoch with
the disk cache >= 0.9x local disk; RSS within budget.
Needs root (drop_caches, mounts).
"""
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

import bench
from bench import BIN, MiB, ROOT, drop_caches, sh

S3GET = os.path.join(ROOT, "bin", "s3get")
USER, PASS = "blockfs-bench", "blockfs-bench-secret"
CONCURRENCY = 8
CACHE = 256 * MiB
ROUNDS = 6  # of the epoch rows: each of the three runs takes each place twice


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Minio:
    def __init__(self, work):
        self.bin = subprocess.run([os.path.join(ROOT, "scripts", "minio.sh")], check=True,
                                  capture_output=True, text=True).stdout.strip()
        self.dir = os.path.join(work, "minio-data")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.addr = "127.0.0.1:%d" % free_port()
        self.endpoint = "http://" + self.addr

    def __enter__(self):
        env = dict(os.environ, MINIO_BROWSER="off", MINIO_ROOT_USER=USER, MINIO_ROOT_PASSWORD=PASS)
        self.p = subprocess.Popen([self.bin, "server", self.dir, "--address", self.addr, "--quiet"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while True:
            try:
                if urllib.request.urlopen(self.endpoint + "/minio/health/ready", timeout=1).status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or self.p.poll() is not None:
                raise SystemExit("minio did not start")
            time.sleep(0.1)
        os.environ.update(AWS_ACCESS_KEY_ID=USER, AWS_SECRET_ACCESS_KEY=PASS, AWS_REGION="us-east-1")
        sh("%s -endpoint %s -bucket bench mb" % (S3GET, self.endpoint))
        return self

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()


def s3get(m, mode, *extra, pin=()):
    out = subprocess.run(list(pin) + [S3GET, "-endpoint", m.endpoint, "-bucket", "bench", "-prefix", "4k",
                          "-workers", str(CONCURRENCY)] + list(extra) + [mode],
                         check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), float(out[1]), int(out[2])


class Mount(bench.Daemon):
    """blockfs mount DATA MNT [flags] in the foreground, for a with block."""

    def __init__(self, data, mnt, *flags, pin=()):
        argv = (list(pin) + [BIN, "mount", "--seed", "1", "--cache-size", "%dMiB" % (CACHE // MiB)] + list(flags)
                + os.environ.get("S3BENCH_FLAGS", "").split() + [data, mnt])
        super().__init__(argv, mnt, wait=60)

    def dd(self, epoch, flags="", pin=""):
        """Reads epoch with dd (extra dd flags, a taskset prefix): (bytes, seconds)."""
        path = os.path.join(self.mnt, "epoch-%04d" % epoch)
        size = os.path.getsize(path)
        t = time.perf_counter()
        sh("%sdd if=%s of=/dev/null bs=1M %s status=none" % (pin, path, flags))
        return size, time.perf_counter() - t


def s3mount(m, mnt, *flags, pin=()):
    return Mount("s3://bench/4k", mnt, "--endpoint", m.endpoint, "--s3-concurrency", str(CONCURRENCY), *flags, pin=pin)


def blockfs_epoch(m, mnt, epoch, flags="", pin=()):
    """A fresh mount (empty cache), one epoch read with dd (extra dd flags), blockfs and dd
    run under pin: (bytes, seconds, peak RSS KiB)."""
    with s3mount(m, mnt, pin=pin) as b:
        size, secs = b.dd(epoch, flags, " ".join(pin) + " " if pin else "")
        return size, secs, b.peak_rss_kib()


def pin_minio(m, cpus):
    """Moves every thread of MinIO to the CPUs in the mask cpus."""
    sh("taskset -a -p %#x %d >/dev/null" % (cpus, m.p.pid))


def epoch_rounds(m, mnt, rounds, first, pin=()):
    """rounds x (ceiling, epoch through the page cache, epoch with iflag=direct), each cold.
    Round i runs them rotated by i: on this machine a run's rate depends on what ran just
    before it (the same blockfs binary read at 0.67-0.84x of the ceiling right after a GET
    run and 0.83-0.93x right after another mount), so each row takes every place equally
    often. Returns lists of MB/s, and the peak RSS seen (KiB)."""
    ceil, plain, direct, rss = [], [], [], 0

    def get():
        b, s, _ = s3get(m, "whole", pin=pin)
        ceil.append(b / s / 1e6)

    def epoch(flags, out, i):
        nonlocal rss
        b, s, r = blockfs_epoch(m, mnt, first + i, flags, pin)
        out.append(b / s / 1e6)
        rss = max(rss, r)

    for i in range(rounds):
        runs = [get, lambda: epoch("", plain, i), lambda: epoch("iflag=direct", direct, i)]
        for k in range(3):
            drop_caches()
            runs[(i + k) % 3]()
        print("  round %d%s: GET whole %.0f MB/s, blockfs epoch %.0f MB/s, with iflag=direct %.0f MB/s"
              % (i, " (pinned)" if pin else "", ceil[-1], plain[-1], direct[-1]), flush=True)
    return ceil, plain, direct, rss


def run(work, markdown=None):
    """Measures the object store rows; returns the report's lines."""
    work = os.path.join(os.path.abspath(work), "s3")  # /proc/self/mountinfo has absolute paths
    os.makedirs(work, exist_ok=True)
    raw = os.path.join(work, "4k.raw")
    if not os.path.exists(raw) or os.path.getsize(raw) != 1 << 30:
        sh("head -c 1G /dev/urandom > %s" % raw)
    mnt = os.path.join(work, "mnt")
    dc = os.path.join(work, "disk-cache")
    local = os.path.join(work, "4k-local")
    if not os.path.exists(os.path.join(local, "blockfs.json")):
        shutil.rmtree(local, ignore_errors=True)
        sh("%s pack --quiet --format raw --record-size 4096 --block-size 16MiB %s %s" % (BIN, raw, local))
    lines = []
    with Minio(work) as m:
        t = time.perf_counter()
        sh("%s pack --quiet --endpoint %s --format raw --record-size 4096 --block-size 16MiB --s3-concurrency %d %s s3://bench/4k"
           % (BIN, m.endpoint, CONCURRENCY, raw))
        pack_s = time.perf_counter() - t
        print("  packed 1 GiB into s3://bench/4k in %.1f s" % pack_s, flush=True)
        ceil, bfs, bfsd, top = epoch_rounds(m, mnt, ROUNDS, 0)
        rss = [top]
        # MinIO alone on core 1, s3get or blockfs and dd on core 0.
        pin_minio(m, 0x2)
        pceil, pbfs, pbfsd, top = epoch_rounds(m, mnt, ROUNDS, ROUNDS, pin=("taskset", "0x1"))
        pin_minio(m, 0x3)
        rss.append(top)
        dc1, dc2, loc = [], [], []
        for i in range(3):
            # The disk cache: a first epoch fills it (empty at the start), a second reads it,
            # against the same dataset packed on the local disk; page cache dropped before each.
            shutil.rmtree(dc, ignore_errors=True)
            drop_caches()
            with s3mount(m, mnt, "--disk-cache", dc) as b:
                b1, s1 = b.dd(i)
                drop_caches()
                b2, s2 = b.dd(i + 1)
                rss.append(b.peak_rss_kib())
            dc1.append(b1 / s1 / 1e6)
            dc2.append(b2 / s2 / 1e6)
            drop_caches()
            with Mount(local, mnt) as b:
                b3, s3 = b.dd(i + 1)
            loc.append(b3 / s3 / 1e6)
            print("  round %d: disk cache: empty %.0f MB/s, second epoch %.0f MB/s; local disk %.0f MB/s, RSS %d MiB"
                  % (i, dc1[-1], dc2[-1], loc[-1], rss[-1] // 1024), flush=True)
        drop_caches()
        b, s, n = s3get(m, "naive", "-record", "4096", "-count", "20000")
        naive = n / s
        print("  naive ranged GETs: %.0f records/s" % naive, flush=True)
    med = statistics.median
    c, e = med(ceil), med(bfs)

    def vs(rows, ceils):
        """The median of the per-round ratios, and the row for it."""
        r = med([a / b for a, b in zip(rows, ceils)])
        return "%.2fx %s" % (r, "ok" if r >= 0.8 else "MISS")
    d1, d2, lo = statistics.median(dc1), statistics.median(dc2), statistics.median(loc)
    ratio = statistics.median([a / b for a, b in zip(dc2, loc)])
    lines += [
        "Object store (MinIO on this machine, 1 GiB of 4 KiB records in 16 MiB blocks, %d requests in flight, cache %d MiB; cold; epoch rows: median of %d rounds, each row in every place of a round equally often, ratios the median of each round's ratio; disk cache rows: median of 3)"
        % (CONCURRENCY, CACHE // MiB, ROUNDS),
        "",
        "| row | MB/s | records/s | floor | result |",
        "|---|---|---|---|---|",
        "| GET every block object whole (s3get whole): the ceiling | %.0f | %.0f | | |" % (c, c * 1e6 / 4096),
        "| blockfs mount s3://, epoch dd bs=1M, empty cache | %.0f | %.0f | >= 0.8x ceiling | %s |"
        % (e, e * 1e6 / 4096, vs(bfs, ceil)),
        "| same, dd iflag=direct (O_DIRECT: no page cache copy) | %.0f | %.0f | >= 0.8x ceiling | %s |"
        % (med(bfsd), med(bfsd) * 1e6 / 4096, vs(bfsd, ceil)),
        "| MinIO on core 1, client on core 0: GET whole | %.0f | %.0f | | |" % (med(pceil), med(pceil) * 1e6 / 4096),
        "| MinIO on core 1, blockfs and dd on core 0: epoch dd bs=1M | %.0f | %.0f | >= 0.8x ceiling | %s |"
        % (med(pbfs), med(pbfs) * 1e6 / 4096, vs(pbfs, pceil)),
        "| same, dd iflag=direct | %.0f | %.0f | >= 0.8x ceiling | %s |"
        % (med(pbfsd), med(pbfsd) * 1e6 / 4096, vs(pbfsd, pceil)),
        "| same, `--disk-cache` (empty at the start) | %.0f | %.0f | >= 0.8x ceiling | %.2fx %s |"
        % (d1, d1 * 1e6 / 4096, d1 / c, "ok" if d1 >= 0.8 * c else "MISS"),
        "| second epoch from the disk cache (fresh page cache) | %.0f | %.0f | >= 0.9x local disk | %.2fx %s |"
        % (d2, d2 * 1e6 / 4096, ratio, "ok" if ratio >= 0.9 else "MISS"),
        "| the same dataset mounted from local disk, epoch dd | %.0f | %.0f | | |" % (lo, lo * 1e6 / 4096),
        "| naive ranged GET per record, random order (s3get naive) | %.1f | %.0f | blockfs >= 20x | %.0fx %s |"
        % (naive * 4096 / 1e6, naive, e * 1e6 / 4096 / naive, "ok" if e * 1e6 / 4096 >= 20 * naive else "MISS"),
        "| blockfs daemon peak RSS (also with the disk cache) | %d MiB | | <= cache %d MiB + 64 MiB | %s |"
        % (max(rss) // 1024, CACHE // MiB, "ok" if max(rss) * 1024 <= CACHE + 64 * MiB else "MISS"),
        "",
        "Pack of the 1 GiB set to s3:// (local staging + upload): %.1f s." % pack_s,
    ]
    return lines


if __name__ == "__main__":
    if os.geteuid() != 0:
        raise SystemExit("needs root (drop_caches, mounts)")
    work = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bench")
    print("\n".join(run(work)))
