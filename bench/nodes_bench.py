#!/usr/bin/env python3
"""Many nodes over one dataset in an object store (issue 35): the rows of PERFORMANCE.md's
"Many nodes" table, on a cluster simulated on one machine.

MinIO (scripts/minio.sh) holds 1 GiB of 4 KiB records in 4 MiB blocks, packed pre-shuffled or
with --no-shuffle. bench/caprelay is the store's network: one listener per node, all sharing a
bandwidth cap (--cap MB/s), so the store is the bottleneck as on a cluster, and counting the
bytes it sends each node. Each of the 4 nodes is a node-aware mount (--nodes 4 --node I, 24
parts, --mix 1) with its own disk cache and a 96 MiB memory cache, read with dd bs=1M, all four
at once.

- first epoch: the store's bytes over the wall time of the four reads, against the cap (floor
  0.9); then epochs 1-3: each node's store bytes over its share, with a disk cache of the
  share plus 12% (floor 0.05) and of half of it (floor 0.55);
- CPU: a node-aware daemon's CPU seconds per GiB the store sent it in its epoch 0, read with dd
  with no cap (--nodes 1, so that it fetches the whole GiB: a node's share of a quarter GiB
  leaves the per-run constant a large part of the figure), beside a mount of the whole data's
  and bin/s3get whole's (a bare client that GETs every block object whole), all through the
  relay, alternated --runs times (the floor is 1.5x the bare client's).

    nodes_bench.py [--cap 100] [--runs 3] [--markdown FILE]

Needs root (mounts, drop_caches).
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from bench import BIN, MiB, ROOT, drop_caches, sh  # noqa: E402
from s3bench import S3GET, Minio  # noqa: E402

RELAY = os.path.join(ROOT, "bin", "caprelay")
NODES = 4
RECORDS = 1 << 18  # 1 GiB of 4 KiB
MOUNT_FLAGS = ["--parts", "24", "--mix", "1", "--cache-size", "96MiB", "--seed", "3"]


class Relay:
    def __init__(self, upstream, rate, stats):
        self.argv = [RELAY, "-upstream", upstream, "-nodes", str(NODES), "-rate", str(rate), "-stats", stats]
        self.stats = stats

    def __enter__(self):
        self.p = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True)
        self.addrs = [self.p.stdout.readline().strip() for _ in range(NODES)]
        return self

    def sent(self):
        time.sleep(0.25)  # a write every 100 ms
        with open(self.stats) as f:
            return json.load(f)["sent"]

    def __exit__(self, *exc):
        self.p.terminate()
        self.p.wait()


def node_mounts(relay, url, work, disk_size, tag):
    out = []
    for i in range(NODES):
        mnt = os.path.join(work, "mnt-%s-%d" % (tag, i))
        dc = os.path.join(work, "dc-%s-%d" % (tag, i))
        argv = [BIN, "mount", "--endpoint", "http://" + relay.addrs[i], "--nodes", str(NODES), "--node", str(i),
                "--disk-cache", dc, "--disk-cache-size", str(disk_size)] + MOUNT_FLAGS + [url, mnt]
        out.append(bench.Daemon(argv, mnt, wait=60))
    return out


def read_all(mounts, epoch):
    """dd of every node's epoch at once: the wall time."""
    t = time.perf_counter()
    ps = [subprocess.Popen(["dd", "if=%s/epoch-%04d" % (m.mnt, epoch), "of=/dev/null", "bs=1M", "status=none"])
          for m in mounts]
    for p in ps:
        if p.wait() != 0:
            raise SystemExit("dd failed")
    return time.perf_counter() - t


def share_bytes(mnt):
    with open(os.path.join(mnt, ".blockfs", "info.json")) as f:
        info = json.load(f)
    return info["records"] * 4096 + (info["records"] * 8 if info["preshuffled"] else 0)


def cluster(minio, url, work, cap, frac, share, epochs=3):
    """One run of the four nodes: epoch 0 rate, and each node's store bytes over its share in
    epochs 1-3, with a disk cache of frac x the share. Also the daemons' CPU seconds per GiB
    of epoch 0."""
    for d in os.listdir(work):
        if d.startswith("dc-"):
            shutil.rmtree(os.path.join(work, d))
    with Relay(minio.addr, cap * 1e6, os.path.join(work, "relay.json")) as relay:
        mounts = node_mounts(relay, url, work, int(share * frac), "%g" % frac)
        for m in mounts:
            m.__enter__()
        try:
            drop_caches()
            cpu0 = sum(m.cpu_seconds() for m in mounts)
            secs = read_all(mounts, 0)
            cpu = sum(m.cpu_seconds() for m in mounts) - cpu0
            sent = relay.sent()
            first = {"rate_mbs": sum(sent) / secs / 1e6, "cap_mbs": cap, "sent": sent,
                     "cpu_s_per_gib": cpu / (sum(sent) / (1 << 30))}
            later = []
            for e in range(1, epochs + 1):
                drop_caches()
                before = relay.sent()
                read_all(mounts, e)
                after = relay.sent()
                later.append([(a - b) / share for a, b in zip(after, before)])
            return first, later
        finally:
            for m in mounts:
                m.__exit__()


def s3get_cpu(minio, prefix):
    """bin/s3get whole of every block object through the relay (no cap): CPU s per GiB."""
    with Relay(minio.addr, 0, os.path.join(minio.dir, "..", "relay-get.json")) as relay:
        drop_caches()
        return get_cpu(relay, prefix)


def get_cpu(relay, prefix):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([S3GET, "-endpoint", "http://" + relay.addrs[0], "-bucket", "bench", "-prefix", prefix,
                          "-workers", "8", "whole"], check=True, capture_output=True, text=True).stdout.split()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu / (int(out[0]) / (1 << 30))


def one_cpu(minio, url, work, flags):
    """One mount (of the whole data, or with flags one node's), its disk cache empty, epoch 0
    read with dd through the relay with no cap: the daemon's CPU seconds per GiB fetched."""
    shutil.rmtree(os.path.join(work, "dc-whole"), ignore_errors=True)
    with Relay(minio.addr, 0, os.path.join(work, "relay-whole.json")) as relay:
        argv = [BIN, "mount", "--endpoint", "http://" + relay.addrs[0], "--disk-cache", os.path.join(work, "dc-whole"),
                "--cache-size", "320MiB", "--seed", "3"] + flags + [url, os.path.join(work, "mnt-whole")]
        with bench.Daemon(argv, os.path.join(work, "mnt-whole"), wait=60) as m:
            drop_caches()
            c0 = m.cpu_seconds()
            read_all([m], 0)
            return (m.cpu_seconds() - c0) / (relay.sent()[0] / (1 << 30))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=float, default=100, help="the store's bandwidth, MB/s, all nodes together")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench", "nodes"))
    ap.add_argument("--markdown")
    ap.add_argument("--cpu-only", action="store_true", help="only the CPU rows")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sh("cd %s && go build -o bin/caprelay ./bench/caprelay && go build -o bin/s3get ./bench/s3get" % ROOT)
    raw = os.path.join(a.work, "records.bin")
    if not os.path.exists(raw) or os.path.getsize(raw) != RECORDS * 4096:
        sh("head -c %d /dev/urandom > %s" % (RECORDS * 4096, raw))
    t0 = time.time()  # after the raw file is made
    rows, cpu = [], {"nodes": [], "whole": [], "get": []}
    with Minio(a.work) as minio:
        ep = ["--endpoint", minio.endpoint]
        for name, flags in (("pre-shuffled", []), ("--no-shuffle", ["--no-shuffle"])):
            prefix = "nodes-" + ("pre" if not flags else "inorder")
            sh(" ".join([BIN, "pack", "--quiet", "--force"] + ep + ["--format", "raw", "--record-size", "4KiB",
                                                               "--block-size", "4MiB"] + flags + [raw, "s3://bench/" + prefix]))
            share = RECORDS // NODES * 4096 + (RECORDS // NODES * 8 if not flags else 0)
            for frac in (1.12, 0.5) if not a.cpu_only else ():
                first, later = cluster(minio, "s3://bench/" + prefix, a.work, a.cap, frac, share)
                print(name, frac, first, later, flush=True)
                rows.append({"layout": name, "disk": frac, "first": first["rate_mbs"] / a.cap,
                             "later_max": max(max(e) for e in later), "later_min": min(min(e) for e in later)})
            if flags:
                continue
            for r in range(a.runs):  # CPU, no cap, each of the three first in turn
                node = ["--nodes", "1", "--node", "0"] + MOUNT_FLAGS[:4]
                runs = [("nodes", lambda: one_cpu(minio, "s3://bench/" + prefix, a.work, node)),
                        ("whole", lambda: one_cpu(minio, "s3://bench/" + prefix, a.work, [])),
                        ("get", lambda: s3get_cpu(minio, prefix))]
                for k, f in runs[r % 3:] + runs[:r % 3]:
                    cpu[k].append(f())
                print("cpu s/GiB", {k: v[-1] for k, v in cpu.items()}, flush=True)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    lines = ["4 nodes (node-aware mounts, --parts 24 --mix 1, 96 MiB memory cache each) over MinIO behind a relay "
             "capped at %.0f MB/s; 1 GiB of 4 KiB records in 4 MiB blocks; %.0f s" % (a.cap, time.time() - t0), "",
             "| layout | disk cache a node | first epoch, the 4 nodes together / the cap | store bytes a node, epochs 1-3 / its share |",
             "|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %.2f | %.3f-%.3f |" % (
            r["layout"], "its share + 12%" if r["disk"] > 1 else "half its share", r["first"], r["later_min"], r["later_max"]))
    lines += ["", "CPU seconds per GiB fetched from the store, epoch 0 with no cap (median of %d, alternated): "
              "a node-aware daemon (--nodes 1, 320 MiB cache) %.2f, one mount of the whole data (320 MiB) %.2f, bin/s3get whole %.2f; the node-aware one "
              "at %.2fx the bare client (runs: %s; %s; %s)" % (
                  a.runs, med["nodes"], med["whole"], med["get"], med["nodes"] / med["get"],
                  ", ".join("%.2f" % v for v in cpu["nodes"]), ", ".join("%.2f" % v for v in cpu["whole"]),
                  ", ".join("%.2f" % v for v in cpu["get"]))]
    bench.emit(lines, a.markdown)


if __name__ == "__main__":
    main()
