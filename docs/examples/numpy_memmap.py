#!/usr/bin/env python3
"""np.memmap over a blockfs epoch file of a fixed-size dataset: batches are array slices.

    numpy_memmap.py MOUNT [--epoch 0] [--batch 256]

The epoch file is a flat array of records in the epoch's shuffled order, so slicing it in
order gives sequential reads; .ids gives each row's source index, to join labels.
"""
import argparse
import json
import os

import numpy as np


def epoch_array(mount, epoch):
    """The epoch as a read-only array of shape (records, *record shape), and its ids."""
    with open(os.path.join(mount, ".blockfs", "info.json")) as f:
        info = json.load(f)
    if info["kind"] != "fixed":
        raise SystemExit("np.memmap needs fixed-size records; this dataset is variable-length")
    name = os.path.join(mount, "epoch-%04d" % epoch)
    if "dtype" in info:
        dtype, shape = np.dtype(info["dtype"]), tuple(info["shape"])
    else:
        dtype, shape = np.dtype("u1"), (info["record_size"],)
    x = np.memmap(name, dtype=dtype, mode="r").reshape((-1,) + shape)
    ids = np.memmap(name + ".ids", dtype="<u8", mode="r")
    return x, ids


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mount")
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    x, ids = epoch_array(a.mount, a.epoch)
    total = 0.0
    for i in range(0, len(x), a.batch):
        batch = np.asarray(x[i:i + a.batch])  # one sequential read of batch rows
        total += float(batch.astype(np.float64).sum())
    print("%d records of shape %s, %d batches; sum %.6g; first ids %s"
          % (len(x), x.shape[1:], (len(x) + a.batch - 1) // a.batch, total, list(ids[:5])))


if __name__ == "__main__":
    main()
