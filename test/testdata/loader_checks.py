#!/usr/bin/env python3
"""Checks of docs/examples/*.py against a real blockfs mount, run by test/python_test.go.

  loader_checks.py epochs MOUNT SOURCE      DataLoader(num_workers=3), epochs 0 and 1: every
                                            record once per epoch, bytes equal to the source,
                                            the two epochs in different orders; prints the
                                            orders' digests (the Go test runs it twice)
  loader_checks.py ranks MOUNT              2 ranks x 2 workers: disjoint, equal length, all
                                            records but the remainder, in the global order
  loader_checks.py resume MOUNT             stop after k batches, resume from the positions:
                                            the union is the epoch exactly
  loader_checks.py train MOUNT              logistic regression fed only from the mount:
                                            the loss falls
  loader_checks.py memmap MOUNT             np.memmap of an epoch equals read()

SOURCE is the packed input: a .npy file (fixed-size records) or a text file (one record per
line). Each prints "ok ..." or exits non-zero with what failed.
"""
import hashlib
import json
import os
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "examples"))
from numpy_memmap import epoch_array  # noqa: E402
from pytorch_iterable import BlockfsDataset, collate_variable  # noqa: E402


def fail(msg):
    sys.exit("FAIL: " + msg)


def source_records(path):
    if path.endswith(".npy"):
        a = np.load(path, mmap_mode="r")
        return lambda i: a[i].tobytes(), len(a)
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lambda i: lines[i], len(lines)


def read_epoch(ds, epoch, workers=3, batch=64):
    ds.set_epoch(epoch)
    collate = None if ds.fixed else collate_variable
    ids, recs = [], []
    for bid, brec in DataLoader(ds, batch_size=batch, num_workers=workers, collate_fn=collate):
        ids.extend(int(i) for i in bid)
        recs.extend(r.numpy().tobytes() for r in brec)
    return ids, recs


def epochs(mount, source):
    get, n = source_records(source)
    ds = BlockfsDataset(mount)
    digests = []
    orders = []
    for epoch in (0, 1):
        ids, recs = read_epoch(ds, epoch)
        if sorted(ids) != list(range(n)):
            fail("epoch %d: ids are not every record exactly once (%d ids for %d records)" % (epoch, len(ids), n))
        for i, r in zip(ids, recs):
            if r != get(i):
                fail("epoch %d: record %d differs from the source" % (epoch, i))
        orders.append(ids)
        digests.append(hashlib.sha256(np.array(ids, dtype="<u8").tobytes()).hexdigest())
    if orders[0] == orders[1]:
        fail("epochs 0 and 1 have the same order")
    print("ok", json.dumps({"records": n, "digests": digests}))


def ranks(mount):
    with open(os.path.join(mount, "epoch-0000.ids"), "rb") as f:
        order = list(np.frombuffer(f.read(), dtype="<u8"))
    per_rank = []
    for rank in (0, 1):
        ds = BlockfsDataset(mount, rank=rank, world_size=2)
        ids, _ = read_epoch(ds, 0, workers=2)
        per_rank.append(ids)
    a, b = per_rank
    if len(a) != len(b):
        fail("ranks read %d and %d records" % (len(a), len(b)))
    if set(a) & set(b):
        fail("ranks overlap")
    kept = len(order) - len(order) % 4
    if sorted(a + b) != sorted(order[:kept]):
        fail("ranks together are not the epoch's first %d records" % kept)
    print("ok %d records per rank, %d dropped" % (len(a), len(order) - kept))


def resume(mount, k=5, batch=32, workers=3):
    ds = BlockfsDataset(mount)
    full, _ = read_epoch(ds, 2, workers=workers, batch=batch)
    ds.set_epoch(2)
    collate = None if ds.fixed else collate_variable
    first = []
    for i, (bid, _) in enumerate(DataLoader(ds, batch_size=batch, num_workers=workers, collate_fn=collate)):
        if i == k:
            break  # the trainer stops here; it saved only k
        first.extend(int(x) for x in bid)
    positions = BlockfsDataset.resume_positions(k, batch, workers)
    ds2 = BlockfsDataset(mount)
    ds2.set_epoch(2, resume=positions)
    rest = []
    for bid, _ in DataLoader(ds2, batch_size=batch, num_workers=workers, collate_fn=collate):
        rest.extend(int(x) for x in bid)
    if sorted(first + rest) != sorted(full) or len(first + rest) != len(full):
        fail("first %d batches plus the resumed rest are not the epoch (%d + %d vs %d)" % (k, len(first), len(rest), len(full)))
    print("ok %d records before the stop, %d after" % (len(first), len(rest)))


def train(mount):
    torch.manual_seed(0)
    ds = BlockfsDataset(mount)
    d = ds.shape[0] - 1  # rows are [x_1 .. x_d, label]
    model = torch.nn.Linear(d, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    lossf = torch.nn.BCEWithLogitsLoss()
    losses = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        total = count = 0
        for _, rows in DataLoader(ds, batch_size=64, num_workers=2):
            x, y = rows[:, :d], rows[:, d:]
            opt.zero_grad()
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            total += float(loss) * len(rows)
            count += len(rows)
        losses.append(total / count)
    if not losses[-1] < 0.5 * losses[0]:
        fail("loss did not fall: %s" % losses)
    print("ok losses %s" % ["%.4f" % l for l in losses])


def memmap(mount):
    x, ids = epoch_array(mount, 3)
    with open(os.path.join(mount, "epoch-0003"), "rb") as f:
        data = f.read()
    if x.tobytes() != data:
        fail("np.memmap of epoch-0003 differs from read()")
    with open(os.path.join(mount, "epoch-0003.ids"), "rb") as f:
        if ids.tobytes() != f.read():
            fail("np.memmap of epoch-0003.ids differs from read()")
    print("ok %d records" % len(x))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"epochs": epochs, "ranks": ranks, "resume": resume, "train": train, "memmap": memmap}[cmd](*args)


if __name__ == "__main__":
    main()
