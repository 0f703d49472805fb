#!/usr/bin/env python3
"""Compressed blocks (issue 40): the rows of PERFORMANCE.md's "Compressed blocks" table.

Two inputs, each packed raw and with --compress zstd (level 3, frames of 1 MiB):
- text: a JSON Lines corpus (words of a Zipf-like vocabulary, lines of 3 to 120 words);
- tokens: uint16 tokens drawn from a Zipf law (exponent 1.2, as a tokenized corpus), records
  of 2048 tokens (4 KiB).

Rows, each raw against compressed, alternated --runs times, a new epoch each run, read with
dd bs=1M as a trainer reads an epoch once:
- store: both packed into MinIO; the bytes the store sends for one epoch (bench/caprelay
  counts them), compressed over raw;
- ram: the files in the kernel's page cache (read once before), a mount with --direct off and a
  cache of 256 MiB, smaller than the data: every page of every epoch is loaded from the page
  cache, and for the compressed dataset decompressed; the rate of each, and what decompressing
  costs: the bytes served over the daemon's extra CPU seconds (compressed less raw), in MB/s a
  core;
- cached: the default mount, which caches a dataset this size whole in the daemon's pages
  (uncompressed): a second epoch, from the daemon's cache;
- capped: the store behind a bandwidth cap (--cap MB/s), a new mount of each with the default
  flags (no disk cache), page cache dropped: the first epoch's rate.

    compress_bench.py [--mib 512] [--runs 3] [--cap 100] [--markdown FILE]

Needs root (mounts, drop_caches).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from bench import BIN, MiB, ROOT, drop_caches, sh  # noqa: E402
from s3bench import Minio  # noqa: E402

RELAY = os.path.join(ROOT, "bin", "caprelay")


def make_inputs(work, mib):
    """The text corpus and the token file, mib MiB each, written with numpy."""
    import numpy as np
    r = np.random.default_rng(40)
    text, tokens = os.path.join(work, "text.jsonl"), os.path.join(work, "tokens.u16")
    if not os.path.exists(text):
        vocab = np.array(["w%d" % i for i in range(20000)])
        p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
        p /= p.sum()
        with open(text, "w") as f:
            n, i = 0, 0
            while n < mib * MiB:
                words = vocab[r.choice(len(vocab), size=200000, p=p)]
                lens = r.integers(3, 120, size=4000)
                at = 0
                lines = []
                for k in lens:
                    lines.append('{"id": %d, "text": "%s"}\n' % (i, " ".join(words[at:at + k])))
                    at, i = at + k, i + 1
                    if at > len(words) - 120:
                        break
                chunk = "".join(lines)
                f.write(chunk)
                n += len(chunk)
    if not os.path.exists(tokens):
        np.minimum(r.zipf(1.2, mib * MiB // 2), 65535).astype("<u2").tofile(tokens)
    return {"text": (text, []), "tokens": (tokens, ["--format", "raw", "--record-size", "4096"])}


class Relay:
    """bench/caprelay: one listener, a bandwidth cap, the bytes sent."""

    def __init__(self, upstream, rate, stats):
        self.argv = [RELAY, "-upstream", upstream, "-nodes", "1", "-rate", str(int(rate)), "-stats", stats]
        self.stats = stats

    def __enter__(self):
        self.p = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True)
        self.addr = self.p.stdout.readline().strip()
        return self

    def sent(self):
        time.sleep(0.25)
        with open(self.stats) as f:
            return json.load(f)["sent"][0]

    def __exit__(self, *exc):
        self.p.terminate()
        self.p.wait()


def dd(path):
    t = time.perf_counter()
    sh("dd if=%s of=/dev/null bs=1M status=none" % path)
    return time.perf_counter() - t


def epoch_bytes(mnt):
    return os.path.getsize(os.path.join(mnt, "epoch-0000"))


def stats(mnt):
    with open(os.path.join(mnt, ".blockfs", "stats.json")) as f:
        return json.load(f)


def mount(data, mnt, *flags):
    return bench.Daemon([BIN, "mount", "--seed", "1"] + list(flags) + [data, mnt], mnt, wait=60)


def alternate(runs, kinds, one):
    """one(kind, run) for each run, the kinds' order alternated: {kind: [results]}."""
    out = {k: [] for k in kinds}
    for i in range(runs):
        order = kinds if i % 2 == 0 else kinds[::-1]
        for k in order:
            out[k].append(one(k, i))
    return out


def ram_row(work, ds, runs):
    """Epochs from the kernel's page cache through a cache smaller than the data."""
    mnts = {k: os.path.join(work, "mnt-ram-" + k) for k in ds}
    daemons = {k: mount(ds[k], mnts[k], "--direct", "off", "--cache-size", "256MiB") for k in ds}
    for d in daemons.values():
        d.__enter__()
    try:
        for k in ds:  # the block files into the page cache
            sh("cat %s/blocks/* > /dev/null" % ds[k])
        size = epoch_bytes(mnts["raw"])

        cpu = {k: 0.0 for k in ds}

        def one(k, i):
            c = daemons[k].cpu_seconds()
            secs = dd(os.path.join(mnts[k], "epoch-%04d" % (i + 1)))
            cpu[k] += daemons[k].cpu_seconds() - c
            return size / secs / 1e6
        rates = alternate(runs, list(ds), one)
        # The daemon's CPU a GB served, compressed less raw: what decompressing costs a core.
        extra = (cpu["zstd"] - cpu["raw"]) / (runs * size / 1e9)
        return rates, 1e3 / extra if extra > 0 else float("inf")
    finally:
        for d in daemons.values():
            d.__exit__()


def cached_row(work, ds, runs):
    """The default mount caches the data whole: a later epoch from the daemon's pages."""
    mnts = {k: os.path.join(work, "mnt-cached-" + k) for k in ds}
    daemons = {k: mount(ds[k], mnts[k]) for k in ds}
    for d in daemons.values():
        d.__enter__()
    try:
        for k in ds:
            dd(os.path.join(mnts[k], "epoch-0000"))
        size = epoch_bytes(mnts["raw"])
        return alternate(runs, list(ds), lambda k, i: size / dd(os.path.join(mnts[k], "epoch-%04d" % (i + 1))) / 1e6)
    finally:
        for d in daemons.values():
            d.__exit__()


def store_rows(work, minio, name, urls, runs, cap):
    """Bytes the store sends for an epoch, and the first epoch's rate behind a cap."""
    out = {"sent": {}, "capped": {}}
    with Relay(minio.addr, cap * 1e6, os.path.join(work, "relay.json")) as relay:
        ep = "http://" + relay.addr

        def one(k, i):
            mnt = os.path.join(work, "mnt-s3-%s-%s" % (name, k))
            drop_caches()
            with mount(urls[k], mnt, "--endpoint", ep):
                before = relay.sent()
                secs = dd(os.path.join(mnt, "epoch-%04d" % i))
                sent = relay.sent() - before
                size = epoch_bytes(mnt)
            return sent, size / secs / 1e6
        res = alternate(runs, list(urls), one)
    for k, v in res.items():
        out["sent"][k] = v[0][0]
        out["capped"][k] = [r for _, r in v]
    return out


def med(v):
    return statistics.median(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cap", type=float, default=100, help="the store's bandwidth, MB/s")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench", "compress"))
    ap.add_argument("--markdown")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sh("cd %s && go build -o bin/caprelay ./bench/caprelay && go build -o bin/s3get ./bench/s3get" % ROOT)
    inputs = make_inputs(a.work, a.mib)
    results = {}
    with Minio(a.work) as minio:
        for name, (src, flags) in inputs.items():
            ds, urls = {}, {}
            for k, extra in (("raw", []), ("zstd", ["--compress", "zstd"])):
                ds[k] = os.path.join(a.work, "%s-%s" % (name, k))
                urls[k] = "s3://bench/%s-%s" % (name, k)
                for dst, ep in ((ds[k], ""), (urls[k], "--endpoint " + minio.endpoint)):
                    sh("%s pack --quiet --force %s %s %s %s %s" % (BIN, ep, " ".join(flags), " ".join(extra), src, dst),
                       stdout=subprocess.DEVNULL)
            ram, dec = ram_row(a.work, ds, a.runs)
            cached = cached_row(a.work, ds, a.runs)
            st = store_rows(a.work, minio, name, urls, a.runs, a.cap)
            results[name] = {"ram": ram, "decompress_mbs_per_core": dec, "cached": cached, **st}
            print(name, json.dumps(results[name]), flush=True)
    lines = ["| data | row | raw | zstd | zstd / raw | floor |", "|---|---|---|---|---|---|"]
    for name, r in results.items():
        sr, sz = r["sent"]["raw"], r["sent"]["zstd"]
        lines.append("| %s | bytes the store sends for an epoch | %.0f MB | %.0f MB | **%.2f** | < 0.5 (text) |" % (name, sr / 1e6, sz / 1e6, sz / sr))
        rr, rz = med(r["ram"]["raw"]), med(r["ram"]["zstd"])
        lines.append("| %s | new epoch from the page cache (MB/s, median of %d) | %.0f | %.0f | **%.2fx** | >= 0.5x |" % (name, a.runs, rr, rz, rz / rr))
        cr, cz = med(r["cached"]["raw"]), med(r["cached"]["zstd"])
        lines.append("| %s | new epoch from the daemon's cache (MB/s) | %.0f | %.0f | **%.2fx** | |" % (name, cr, cz, cz / cr))
        fr, fz = med(r["capped"]["raw"]), med(r["capped"]["zstd"])
        lines.append("| %s | first epoch from a store capped at %g MB/s (MB/s) | %.0f | %.0f | **%.2fx** | >= 1.5x |" % (name, a.cap, fr, fz, fz / fr))
        lines.append("| %s | decompression, MB/s a core (the daemon's extra CPU) | | %.0f | | |" % (name, r["decompress_mbs_per_core"]))
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n\nRaw runs:\n\n```\n" + json.dumps(results, indent=1) + "\n```\n")
    shutil.rmtree(os.path.join(a.work, "minio-data"), ignore_errors=True)


if __name__ == "__main__":
    main()
