#!/usr/bin/env python3
"""Checks a mounted epoch the way a Python trainer reads it.

It recomputes the epoch's order from the dataset's manifest and ids files with the reference
implementation in docs/examples/shuffle_order.py, compares it with epoch-NNNN.ids from the
mount, then reads epoch-NNNN one record at a time with f.read(record_size) and compares each
record with the raw input at its id. Prints "ok RECORDS" or exits non-zero.

usage: check_epoch.py DATASET MOUNT SOURCE_RAW SEED EPOCH MODE MIX
"""
import json
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "docs", "examples"))
from shuffle_order import epoch_order  # noqa: E402


def main():
    dataset, mnt, source, seed, epoch, mode, mix = sys.argv[1:8]
    seed, epoch, mix = int(seed), int(epoch), int(mix)
    with open(os.path.join(dataset, "blockfs.json")) as f:
        man = json.load(f)
    rs = man["record_size"]
    counts = [b["records"] for b in man["blocks"]]
    stored = []
    for b in man["blocks"]:
        if man["ids"]:
            with open(os.path.join(dataset, b["ids_file"]), "rb") as f:
                raw = f.read()
            stored.extend(struct.unpack("<%dQ" % b["records"], raw))
        else:
            stored.extend(range(len(stored), len(stored) + b["records"]))
    want = [stored[i] for i in epoch_order(counts, seed, epoch, mode, mix)]
    name = "epoch-%04d" % epoch
    with open(os.path.join(mnt, name + ".ids"), "rb") as f:
        raw = f.read()
    got = list(struct.unpack("<%dQ" % (len(raw) // 8), raw))
    if got != want:
        sys.exit("ids differ from the reference order (first 8: %s vs %s)" % (got[:8], want[:8]))
    with open(source, "rb") as src, open(os.path.join(mnt, name), "rb", buffering=0) as f:
        for i, rid in enumerate(got):
            rec = f.read(rs)
            src.seek(rid * rs)
            if rec != src.read(rs):
                sys.exit("record %d (id %d) differs from the input" % (i, rid))
        if f.read(rs) != b"":
            sys.exit("data after the last record")
    print("ok", len(got))


if __name__ == "__main__":
    main()
