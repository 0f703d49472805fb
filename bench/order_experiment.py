#!/usr/bin/env python3
"""Does block shuffling hurt training? Fashion-MNIST, stored in the worst realistic layout.

The 60,000 training images are stored sorted by class (a record = 1 label byte + 784 pixels),
packed with and without pack's pre-shuffle, and a 2-layer MLP is trained reading only from a
blockfs mount, for each order configuration, beside a true uniform shuffle (the reference,
from memory). It reports test accuracy (mean over seeds) next to blockfs order --stats.

    order_experiment.py [--seeds 3] [--epochs 5] [--short] [--jobs N] [--json FILE] [--markdown FILE]

The node-aware rows mount 4 nodes (--nodes 4, one rank each, a batch of 32 a rank) and train on
their global batches of 128, one batch from every rank a step, as DDP does.

--short is the version make test runs: 2 seeds, 3 epochs, four configurations. Needs root
(mounts), Debian's dataset-fashion-mnist, python3-torch and python3-numpy.
"""
import argparse
import collections
import concurrent.futures
import gzip
import itertools
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import blockfs.torch  # noqa: E402

FMNIST = "/usr/share/datasets/fashion-mnist"
BLOCK = "256KiB"  # about 330 records a block: 180 blocks, so the order has room to matter

# name, dataset ("sorted" or "pre"), mount flags
CONFIGS = [
    ("none, class-sorted", "sorted", ["--shuffle", "none"]),
    ("blocks, class-sorted", "sorted", ["--shuffle", "blocks"]),
    ("full --mix 1, class-sorted", "sorted", ["--shuffle", "full", "--mix", "1"]),
    ("full --mix 4, class-sorted", "sorted", ["--shuffle", "full", "--mix", "4"]),
    ("full --mix 16, class-sorted", "sorted", ["--shuffle", "full", "--mix", "16"]),
    ("full, pre-shuffled (the defaults)", "pre", ["--shuffle", "full"]),
    ("in place, class-sorted .npy (the defaults)", "npy", []),
    ("4 parts (pack --part I/4 of 8 class-sorted .npy, merged; the defaults)", "parts", ["--cache-size", "auto", "--readahead", "auto"]),
    ("4 nodes (--nodes 4), class-sorted", "sorted", ["--nodes", "4"]),
    ("4 nodes (--nodes 4), pre-shuffled", "pre", ["--nodes", "4"]),
]
SHORT = ["none, class-sorted", "full, pre-shuffled (the defaults)", "in place, class-sorted .npy (the defaults)",
         "4 nodes (--nodes 4), class-sorted"]
NODES = 4
MOUNT_ONLY = ("--cache-size", "--readahead")  # a mount's flags that blockfs order does not take


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load():
    xtr = idx(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")).reshape(-1, 784)
    ytr = idx(os.path.join(FMNIST, "train-labels-idx1-ubyte.gz"))
    xte = idx(os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784)
    yte = idx(os.path.join(FMNIST, "t10k-labels-idx1-ubyte.gz"))
    order = np.argsort(ytr, kind="stable")  # the worst realistic layout: sorted by class
    rows = np.concatenate([ytr[order, None], xtr[order]], axis=1)  # (60000, 785) uint8
    return rows, xte, yte


def sh(*args, **kw):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, **kw).stdout


def prepare(work, blockfs, rows):
    os.makedirs(work, exist_ok=True)
    npy = os.path.join(work, "train-sorted.npy")
    if not os.path.exists(npy):
        np.save(npy, rows)
    labels = os.path.join(work, "labels.txt")
    with open(labels, "w") as f:
        f.write("\n".join(str(int(v)) for v in rows[:, 0]) + "\n")
    sets = {}
    for name, extra in (("sorted", ["--no-shuffle"]), ("pre", [])):
        ds = os.path.join(work, "ds-" + name)
        sh(blockfs, "pack", "--quiet", "--force", "--block-size", BLOCK, *extra, npy, ds)
        sets[name] = ds
    sets["npy"] = npy  # served in place, as stored: sorted by class
    # Packed in 4 parts from 8 class-sorted inputs (each part pre-shuffles its own 2, which hold
    # two or three classes), then merged: the mount's automatic window mixes across parts.
    inputs = []
    for k, chunk in enumerate(np.array_split(rows, 8)):
        inputs.append(os.path.join(work, "train-sorted-%d.npy" % k))
        if not os.path.exists(inputs[-1]):
            np.save(inputs[-1], chunk)
    ds = os.path.join(work, "ds-parts")
    for i in range(4):
        sh(blockfs, "pack", "--quiet", "--force", "--block-size", BLOCK, "--part", "%d/4" % i, *inputs, ds)
    sh(blockfs, "pack", "--merge", "--force", ds)
    sets["parts"] = ds
    return sets, labels


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def evaluate(net, xte, yte):
    with torch.no_grad():
        pred = net(torch.from_numpy(xte.copy()).float() / 255).argmax(1).numpy()
    return float((pred == yte).mean() * 100)


def train(net, batches_of_epoch, epochs):
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    lossf = torch.nn.CrossEntropyLoss()
    for epoch in range(epochs):
        for x, y in batches_of_epoch(epoch):
            opt.zero_grad()
            lossf(net(x), y).backward()
            opt.step()


def from_mount(mnt):
    # No worker processes: the order is the same with any num_workers, and starting workers
    # each epoch cost more than this MLP's data (make test's --short: 169 s -> 122 s).
    loader = blockfs.torch.Loader(mnt, batch_size=128)

    def batches(epoch):
        loader.set_epoch(epoch)
        for _, rows in loader:
            yield rows[:, 1:].float() / 255, rows[:, 0].long()
    return batches


def from_nodes(mnts, epochs):
    """The global batches of len(mnts) nodes of one rank each (batch 128 / nodes a rank): each
    training step takes one batch from every rank, as a DDP step averages their gradients."""
    n = len(mnts)
    loaders = [blockfs.torch.Loader(m, batch_size=128 // n, rank=i, world_size=n) for i, m in enumerate(mnts)]

    def batches(epoch):
        for ld in loaders:
            ld.set_epoch(epoch)
        for step in itertools.zip_longest(*loaders):
            rows = torch.cat([b[1] for b in step if b is not None])
            yield rows[:, 1:].float() / 255, rows[:, 0].long()
        if epoch == epochs - 1:
            for ld in loaders:
                ld.close()  # its files, so the mounts can go
    return batches


def uniform(rows, seed):
    x = torch.from_numpy(rows[:, 1:].copy()).float() / 255
    y = torch.from_numpy(rows[:, 0].copy()).long()
    g = torch.Generator().manual_seed(seed)
    loader = DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True, generator=g)
    return lambda epoch: iter(loader)


UNIFORM = "uniform shuffle (reference, in memory)"


# What every job reads, set before the jobs' processes are forked (so they share it, unpickled):
# the arguments, the datasets, the training rows and the test set.
SHARED = {}


def run(mnt, job):
    """One training run: the job's configuration (name, dataset, mount flags) and seed, read
    from mounts under mnt, or the in-memory reference (UNIFORM); its test accuracy."""
    a, sets, rows, xte, yte = (SHARED[k] for k in ("args", "sets", "rows", "xte", "yte"))
    name, which, flags, seed = job
    net = model(seed)
    if name == UNIFORM:
        train(net, uniform(rows, seed), a.epochs)
        return evaluate(net, xte, yte)
    nodes = "--nodes" in flags
    mnts = [os.path.join(mnt, str(i)) for i in range(NODES if nodes else 1)]
    for i, m in enumerate(mnts):
        os.makedirs(m, exist_ok=True)
        sh(a.blockfs, "mount", "--daemon", "--seed", seed, "--cache-size", "64MiB", "--readahead", "8MiB",
           *flags, *(["--node", i] if nodes else []), sets[which], m)
    try:
        train(net, from_nodes(mnts, a.epochs) if nodes else from_mount(mnts[0]), a.epochs)
        return evaluate(net, xte, yte)
    finally:
        for m in mnts:
            sh(a.blockfs, "unmount", m)


def stats(blockfs, ds, flags, labels, seed):
    out = sh(blockfs, "order", ds, "--stats", "--labels", labels, "--seed", seed, *flags)
    def pick(name, col):
        m = re.search(re.escape(name) + r"\s+(\S+)\s+(\S+)", out)
        return m.group(col) if m else "-"
    return {k: pick(k, 1) for k in STAT_KEYS}, {k: pick(k, 2) for k in STAT_KEYS}


STAT_KEYS = ["distinct blocks per batch of 256", "label TV distance, batch of 256",
             "record id gap entropy (uniform = 1)", "position correlation with next epoch"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--short", action="store_true", help="2 seeds, 3 epochs, 3 configurations (make test)")
    ap.add_argument("--blockfs", default=os.path.join(ROOT, "bin", "blockfs"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "order"))
    ap.add_argument("--only", help="the configurations whose names contain one of these comma-separated words")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                    help="training runs at once, a process and a thread each (default: the cores, at most 4)")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    if a.short:
        a.seeds, a.epochs = 2, 3
    t0 = time.time()
    rows, xte, yte = load()
    sets, labels = prepare(a.work, a.blockfs, rows)
    configs = [c for c in CONFIGS if not a.short or c[0] in SHORT]
    if a.only:
        configs = [c for c in configs if any(w in c[0] for w in a.only.split(","))]
    mnt = os.path.join(a.work, "mnt")
    # Every training run (a configuration and a seed, or the reference and a seed) is a job of
    # its own, a process each, a.jobs at a time, one thread each: a run of this MLP keeps one
    # core busy. Forked before this process trains anything (torch makes its threads then).
    jobs = [(name, which, flags, seed) for name, which, flags in configs for seed in range(a.seeds)]
    jobs += [(UNIFORM, None, [], seed) for seed in range(a.seeds)]
    SHARED.update(args=a, sets=sets, rows=rows, xte=xte, yte=yte)
    # A process pool of concurrent.futures: a job's process that dies fails the run
    # (BrokenProcessPool), where multiprocessing.Pool would wait for it forever.
    with concurrent.futures.ProcessPoolExecutor(a.jobs, mp_context=multiprocessing.get_context("fork"),
                                                initializer=torch.set_num_threads, initargs=(1,)) as pool:
        accs_of = list(pool.map(run, [os.path.join(mnt, str(k)) for k in range(len(jobs))], jobs))
    accs = collections.defaultdict(list)
    for (name, _, _, _), acc in zip(jobs, accs_of):
        accs[name].append(acc)
    results = []
    uni_stats = None
    for name, which, flags in configs:
        if "--nodes" in flags:
            results.append({"config": name, "accuracy": float(np.mean(accs[name])), "runs": accs[name],
                            **{k: "-" for k in STAT_KEYS}})
            print("%-36s %6.2f%%  %s" % (name, results[-1]["accuracy"], accs[name]), flush=True)
            continue
        order_flags = [f for k, f in enumerate(flags) if f not in MOUNT_ONLY and (k == 0 or flags[k - 1] not in MOUNT_ONLY)]
        q, uni_stats = stats(a.blockfs, sets[which], order_flags, labels, 0)
        results.append({"config": name, "accuracy": float(np.mean(accs[name])), "runs": accs[name], **q})
        print("%-36s %6.2f%%  %s" % (name, results[-1]["accuracy"], accs[name]), flush=True)
    results.append({"config": UNIFORM, "accuracy": float(np.mean(accs[UNIFORM])), "runs": accs[UNIFORM], **uni_stats})
    print("%-36s %6.2f%%  %s" % ("uniform shuffle", results[-1]["accuracy"], accs[UNIFORM]), flush=True)

    lines = ["Fashion-MNIST, 60,000 training images stored sorted by class, %s blocks; 2-layer MLP (784-64-10), "
             "Adam 1e-3, batch 128, %d epochs, test accuracy as the mean of %d seeds; %.0f s" % (BLOCK, a.epochs, a.seeds, time.time() - t0),
             "",
             "| order | test accuracy | runs | distinct blocks per batch of 256 | label TV, batch of 256 | id gap entropy | next-epoch correlation |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append("| %s | %.2f%% | %s | %s | %s | %s | %s |" % (
            r["config"], r["accuracy"], ", ".join("%.2f" % v for v in r["runs"]),
            r["distinct blocks per batch of 256"], r["label TV distance, batch of 256"],
            r["record id gap entropy (uniform = 1)"], r["position correlation with next epoch"]))
    text = "\n".join(lines)
    print()
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
