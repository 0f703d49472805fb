#!/usr/bin/env python3
"""A PyTorch IterableDataset over a blockfs mount.

Each DataLoader worker of each DDP rank reads its own shard file, shard-R-of-W/epoch-NNNN with
W = ranks x workers and R = rank x workers + worker id, front to back in large reads. With one
rank, the workers together read every record (the last one also reads the few records that
belong to no shard); across ranks that remainder is dropped so all ranks get the same count. The mount
already holds the shuffled order, so the loader does not shuffle and keeps no index: fixed-size
records are split by the record size from .blockfs/info.json (and typed by its dtype and
shape), variable-length ones by the shard's .offsets file, read in chunks beside the data.

Resuming needs no loader state: a reader's position is a record index in its shard file (a
byte offset, for fixed-size records). BlockfsDataset.resume_positions turns "k batches were
consumed" into the position of every reader.

Usage in a training script:

    ds = BlockfsDataset("/mnt/train", rank=rank, world_size=world)
    loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=4)
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for ids, x in loader:
            ...

Run as a script, it reads epochs of a mount and prints what it saw:
    pytorch_iterable.py MOUNT [--epochs 2] [--workers 3] [--batch 64]
"""
import argparse
import json
import os

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class BlockfsDataset(IterableDataset):
    """Yields (id, record) pairs of one epoch, this reader's shard of it.

    id is the record's source index (its row in the packed input). record is a torch tensor
    of the dataset's dtype and per-record shape for fixed-size records (uint8 bytes when the
    dataset has no dtype), or a uint8 tensor of the record's bytes for variable-length ones.
    """

    def __init__(self, mount, epoch=0, rank=0, world_size=1, resume=None, chunk_bytes=1 << 20):
        self.mount = mount
        self.epoch = epoch
        self.rank = rank
        self.world_size = world_size
        # resume: {reader index R: record position in its shard file} for the current epoch.
        self.resume = dict(resume or {})
        self.chunk_bytes = chunk_bytes
        with open(os.path.join(mount, ".blockfs", "info.json")) as f:
            self.info = json.load(f)
        self.fixed = self.info["kind"] == "fixed"
        if self.fixed:
            self.record_size = self.info["record_size"]
            self.dtype = np.dtype(self.info.get("dtype", "|u1"))
            shape = self.info.get("shape")
            self.shape = tuple(shape) if "dtype" in self.info else (self.record_size,)

    def set_epoch(self, epoch, resume=None):
        """Selects the epoch to read next, optionally resuming each reader mid-epoch."""
        self.epoch = epoch
        self.resume = dict(resume or {})

    def reader(self):
        """This process's reader index R and the number of readers W."""
        info = get_worker_info()
        workers = info.num_workers if info else 1
        worker = info.id if info else 0
        return self.rank * workers + worker, self.world_size * workers

    def path(self, r, w):
        name = "epoch-%04d" % self.epoch
        if w == 1:
            return os.path.join(self.mount, name)
        return os.path.join(self.mount, "shard-%d-of-%d" % (r, w), name)

    def __iter__(self):
        r, w = self.reader()
        n = self.info["records"]
        per = n // w
        # This reader's records: its shard, and with a single rank also the epoch's last
        # n mod w records (they belong to no shard) for the last worker, so the workers of one
        # trainer see every record. Across DDP ranks the remainder is dropped, as
        # DistributedSampler(drop_last=True) does, so every rank gets the same count.
        segments = [(self.path(r, w), 0, per)]
        if self.world_size == 1 and r == w - 1 and n % w:
            segments.append((self.path(0, 1), w * per, n % w))
        skip = self.resume.get(r, 0)
        for path, first, count in segments:
            if skip >= count:
                skip -= count
                continue
            read = self._fixed if self.fixed else self._variable
            yield from read(path, first + skip, first + count)
            skip = 0

    def _fixed(self, path, start, end):
        rs = self.record_size
        per = max(1, self.chunk_bytes // rs)
        with open(path, "rb", buffering=0) as f, open(path + ".ids", "rb", buffering=0) as fi:
            f.seek(start * rs)
            fi.seek(start * 8)
            pos = start
            while pos < end:
                want = min(per, end - pos)
                buf = bytearray(want * rs)
                n = f.readinto(buf) // rs
                if n == 0:
                    return
                ids = np.frombuffer(fi.read(8 * n), dtype="<u8")
                recs = np.frombuffer(buf, dtype=self.dtype, count=n * rs // self.dtype.itemsize)
                recs = recs.reshape((n,) + self.shape)
                for i in range(n):
                    yield int(ids[i]), torch.from_numpy(recs[i])
                pos += n

    def _variable(self, path, start, end):
        per = max(1, self.chunk_bytes // 256)
        with open(path, "rb", buffering=0) as f, open(path + ".ids", "rb", buffering=0) as fi, \
                open(path + ".offsets", "rb", buffering=0) as fo:
            pos = start
            while pos < end:
                fo.seek(8 * pos)
                offs = np.frombuffer(fo.read(8 * (min(per, end - pos) + 1)), dtype="<u8")
                n = len(offs) - 1
                if n <= 0:
                    return
                fi.seek(8 * pos)
                ids = np.frombuffer(fi.read(8 * n), dtype="<u8")
                f.seek(int(offs[0]))
                buf = bytearray(int(offs[n] - offs[0]))
                f.readinto(buf)
                data = np.frombuffer(buf, dtype=np.uint8)
                base = int(offs[0])
                for i in range(n):
                    yield int(ids[i]), torch.from_numpy(data[int(offs[i]) - base:int(offs[i + 1]) - base])
                pos += n

    @staticmethod
    def resume_positions(batches, batch_size, num_workers, rank=0):
        """Reader positions after the trainer consumed `batches` full batches of a DataLoader
        with num_workers workers: DataLoader takes batches from its workers in turn, so worker
        i has delivered the batches i, i + num_workers, ... It returns {R: record position}.
        (Save the positions before a worker's last, partial batch: stop at a full one.)"""
        workers = max(1, num_workers)
        return {rank * workers + i: len(range(i, batches, workers)) * batch_size for i in range(workers)}


def collate_variable(batch):
    """A collate_fn for variable-length records: ids as a tensor, records as a list."""
    return torch.tensor([i for i, _ in batch]), [r for _, r in batch]


def main():
    ap = argparse.ArgumentParser(description="Read epochs of a blockfs mount with a DataLoader.")
    ap.add_argument("mount")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    ds = BlockfsDataset(a.mount)
    collate = None if ds.fixed else collate_variable
    loader = DataLoader(ds, batch_size=a.batch, num_workers=a.workers, collate_fn=collate)
    for epoch in range(a.epochs):
        ds.set_epoch(epoch)
        n = 0
        first = None
        for ids, recs in loader:
            n += len(ids)
            if first is None:
                first = [int(i) for i in ids[:5]]
        print("epoch %d: %d records, first ids %s" % (epoch, n, first))


if __name__ == "__main__":
    main()
