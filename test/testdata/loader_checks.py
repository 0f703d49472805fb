#!/usr/bin/env python3
"""Checks of the Python package (python/) and docs/examples against a real blockfs mount made
by the Go test (mounted by hand, read with blockfs.attach), run by test/python_test.go.

  loader_checks.py epochs MOUNT SOURCE      Loader(num_workers=3), epochs 0 and 1: every record
                                            once per epoch, bytes equal to the source, the two
                                            epochs in different orders; prints the orders'
                                            digests (the Go test runs it twice)
  loader_checks.py ranks MOUNT              2 ranks x 2 workers, drop_last: disjoint, equal
                                            length, in the global order
  loader_checks.py resume MOUNT             stop after k batches with 3 workers, resume from
                                            the state with 2: the union is the epoch exactly
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

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
sys.path.insert(0, os.path.join(here, "..", "..", "docs", "examples"))
import blockfs  # noqa: E402
import blockfs.torch  # noqa: E402
from numpy_memmap import epoch_array  # noqa: E402


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


def as_bytes(recs):
    """A batch's records (a tensor of fixed-size rows, or a list of tensors) as bytes."""
    return [r.numpy().tobytes() for r in recs]


def read_epoch(loader, epoch):
    loader.set_epoch(epoch)
    ids, recs = [], []
    for bid, brec in loader:
        ids.extend(bid.tolist())
        recs.extend(as_bytes(brec))
    return ids, recs


def epochs(mount, source):
    get, n = source_records(source)
    loader = blockfs.torch.Loader(blockfs.attach(mount), 64, num_workers=3)
    digests = []
    orders = []
    for epoch in (0, 1):
        ids, recs = read_epoch(loader, epoch)
        if sorted(ids) != list(range(n)):
            fail("epoch %d: ids are not every record exactly once (%d ids for %d records)" % (epoch, len(ids), n))
        for i, r in zip(ids, recs):
            if r != get(i):
                fail("epoch %d: record %d differs from the source" % (epoch, i))
        if ids != blockfs.order(mount, epoch).tolist():
            fail("epoch %d: the loader's order is not the epoch file's" % epoch)
        orders.append(ids)
        digests.append(hashlib.sha256(np.array(ids, dtype="<u8").tobytes()).hexdigest())
    if orders[0] == orders[1]:
        fail("epochs 0 and 1 have the same order")
    print("ok", json.dumps({"records": n, "digests": digests}))


def ranks(mount):
    order = blockfs.order(mount, 0).tolist()
    per_rank = []
    for rank in (0, 1):
        loader = blockfs.torch.Loader(mount, 32, num_workers=2, rank=rank, world_size=2, drop_last=True)
        ids, _ = read_epoch(loader, 0)
        per_rank.append(ids)
    a, b = per_rank
    if len(a) != len(b):
        fail("ranks read %d and %d records" % (len(a), len(b)))
    if set(a) & set(b):
        fail("ranks overlap")
    kept = len(order) - len(order) % 64
    if sorted(a + b) != sorted(order[:kept]):
        fail("ranks together are not the epoch's first %d records" % kept)
    print("ok %d records per rank, %d dropped" % (len(a), len(order) - kept))


def resume(mount, k=5, batch=32):
    full = blockfs.order(mount, 2).tolist()
    loader = blockfs.torch.Loader(mount, batch, num_workers=3, epoch=2)
    first = []
    for i, (bid, _) in enumerate(loader):
        first.extend(bid.tolist())
        if i == k - 1:
            break  # the trainer stops here and saves
    state = json.loads(json.dumps(loader.state_dict()))
    again = blockfs.torch.Loader(mount, batch, num_workers=2)
    again.load_state_dict(state)
    rest = []
    for bid, _ in again:
        rest.extend(bid.tolist())
    if first + rest != full:
        fail("first %d batches plus the resumed rest are not the epoch (%d + %d vs %d)" % (k, len(first), len(rest), len(full)))
    print("ok %d records before the stop, %d after" % (len(first), len(rest)))


def train(mount):
    torch.manual_seed(0)
    loader = blockfs.torch.Loader(mount, 64, num_workers=2)
    d = loader.info["shape"][0] - 1  # rows are [x_1 .. x_d, label]
    model = torch.nn.Linear(d, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    lossf = torch.nn.BCEWithLogitsLoss()
    losses = []
    for epoch in range(3):
        loader.set_epoch(epoch)
        total = count = 0
        for _, rows in loader:
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
