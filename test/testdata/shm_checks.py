#!/usr/bin/env python3
"""The shared-memory path against the mount's files, run by test/shm_test.go (TestShmSameBytes):

  shm_checks.py MOUNT

For every file of epochs 0 and 1 the mount lists (data and every sidecar: ids, offsets, a
mixture's source, each field's values and offsets), and the same in shard-1-of-3/, reads through
the shared-memory path equal reads of the file: the whole file, ranges across its end and
past it, and 40 random ranges; a new buffer's pages are mapped before its first read (each
way of filling them); a folder naming the daemon's socket gets no channel; a full daemon sends
reads to the files for a while, not for good. Then
blockfs.torch.Loader's batches of epoch 1 (rank 1 of 2, or a node's rank on a node-aware
mount) are the same with shm=True and shm=False (buffered reads
of the files, and every read of the files through O_DIRECT), and the daemon counted the
path's reads. Prints "ok ..." or exits non-zero with what differs.
"""
import errno
import json
import mmap
import os
import random
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import blockfs  # noqa: E402
import blockfs._batches  # noqa: E402
import blockfs._shm as shm  # noqa: E402
import blockfs.torch  # noqa: E402
from blockfs._files import read_info  # noqa: E402


def same(a, b, what):
    """a and b (batches: tensors, arrays, lists, tuples, dicts) hold the same values."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{what}: keys {list(a)} and {list(b)}"
        for k in a:
            same(a[k], b[k], f"{what}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{what}: {type(a)} of {len(a)}, {type(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{what}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.shape} {b.shape}"
        assert torch.equal(a, b), f"{what}: values differ"
    else:
        assert a == b, f"{what}: {a!r} != {b!r}"


def files(mount):
    names = sorted(n for n in os.listdir(mount) if n.startswith(("epoch-0000", "epoch-0001")))
    assert names, f"{mount} lists no epoch files"
    return names + [f"shard-1-of-3/{n}" for n in names]


def check_files(mount, info):
    ch = shm.Channel(mount, info)
    rng = random.Random(7)
    compared = 0
    for name in files(mount):
        with open(os.path.join(mount, name), "rb") as f:
            whole = f.read()
        size = len(whole)
        ranges = [(0, size), (max(0, size - 100), 300), (size, 10), (size + 4096, 1)]
        for _ in range(40):
            off = rng.randrange(0, size + 1)
            ranges.append((off, rng.randrange(1, max(2, min(size - off, 1 << 20) + 50))))
        for off, n in ranges:
            if n == 0:
                continue
            got = ch.read(name, off, n)
            assert got is not None, "the arenas had room"
            want = whole[off:off + n]
            assert len(got) == len(want), f"{name} at {off}+{n}: {len(got)} bytes, the file gives {len(want)}"
            assert bytes(got) == want, f"{name} at {off}+{n}: bytes differ from the file's"
            compared += len(want)
    ch.close()
    return compared


def mapped_rss(base):
    """The bytes of this process's mapping that starts at base that its page tables map (smaps' Rss)."""
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                inside = int(head.split("-")[0], 16) == base
            elif inside and head == "Rss:":
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no mapping at {base:#x} in /proc/self/smaps")


def check_filled(mount, info):
    """A new buffer's pages are in this process's page tables before the first read into it,
    however the client fills them (MADV_POPULATE_WRITE; MAP_POPULATE where the kernel refuses
    that; a memset on a Python without MAP_POPULATE), and the daemon takes the buffer: the
    read's bytes are the file's each way."""
    name = files(mount)[0]
    with open(os.path.join(mount, name), "rb") as f:
        want = f.read(300 << 10)
    keep, populate = shm._populate_write, mmap.MAP_POPULATE
    try:
        for way, with_populate in ((keep, True), (False, True), (False, False)):
            shm._populate_write = way
            if not with_populate:
                del mmap.MAP_POPULATE
            ch = shm.Channel(mount, info)
            got = ch.read(name, 0, len(want))
            how = f"populate_write {way}, MAP_POPULATE {with_populate}"
            assert not ch.refused, f"the daemon refused the buffer ({how})"
            assert got is not None and bytes(got) == want, f"{name}: bytes differ from the file's ({how})"
            assert shm._populate_write == way, f"the client gave up MADV_POPULATE_WRITE ({how})"
            for a in ch.arenas + ch.small:
                rss = mapped_rss(a.base)
                assert rss == a.size, f"buffer {a.id}: {rss} of its {a.size} bytes mapped here ({how})"
            del got
            ch.close()
            mmap.MAP_POPULATE = populate
    finally:
        shm._populate_write = keep
        mmap.MAP_POPULATE = populate


def check_folder_refused(info):
    """A folder whose info.json names the daemon's socket (anyone who can write there could make
    one, naming any socket) gets no channel: the daemon trusted is the mount's."""
    with tempfile.TemporaryDirectory() as d:
        try:
            shm.Channel(d, info)
        except shm.ShmUnavailable as e:
            assert "no blockfs mount" in str(e), e
            return
        raise AssertionError(f"a channel for the folder {d}")


def check_full(mount, info):
    """A daemon that maps as many buffers as it may (ENOSPC) sends this read, and the next for a
    while, to the files, not every read for the process's life; then buffers are asked again."""
    name = files(mount)[0]
    ch = shm.Channel(mount, info)
    real = ch._region_of

    def full(n):
        raise OSError(errno.ENOSPC, "map: the daemon maps at most ... in all")
    ch._region_of = full
    assert ch.read(name, 0, 1000) is None, "a read while the daemon is full"
    assert not ch.refused and ch.full_until > 0, (ch.refused, ch.full_until)
    ch._region_of = real
    assert ch.read(name, 0, 1000) is None, "reads within FULL_WAIT use the files"
    ch.full_until = 0.0
    got = ch.read(name, 0, 1000)
    with open(os.path.join(mount, name), "rb") as f:
        assert got is not None and bytes(got) == f.read(1000), "buffers again once the wait is over"
    del got
    ch.close()


def batches(mount, info, use, direct_read=None):
    """The Loader's batches of epoch 1; with direct_read, the files' reads of at least that many
    bytes go through O_DIRECT: 1, every one (and some must have), a huge one, none."""
    kw = {}
    if "nodes" in info:
        kw = dict(rank=info["nodes"]["node"], world_size=info["nodes"]["nodes"], local_world_size=1)
    else:
        kw = dict(rank=1, world_size=2)
    keep = blockfs._batches.DIRECT_READ
    if direct_read is not None:
        blockfs._batches.DIRECT_READ = direct_read
    try:
        ld = blockfs.torch.Loader(mount, 64, epoch=1, shm=use, **kw)
        out = list(ld)
        if direct_read == 1:
            assert ld._batches.direct_reads > 0, "no read went through O_DIRECT"
        elif direct_read is not None:
            assert ld._batches.direct_reads == 0, f"{ld._batches.direct_reads} reads went through O_DIRECT"
        ld.close()
    finally:
        blockfs._batches.DIRECT_READ = keep
    return out


def main(mount):
    info = read_info(mount)
    assert info.get("shm_socket", "").startswith("@"), f"info.json names no shm_socket: {info.get('shm_socket')!r}"
    before = json.load(open(os.path.join(mount, ".blockfs", "stats.json")))["shm_read_requests"]
    compared = check_files(mount, info)
    check_filled(mount, info)
    check_folder_refused(info)
    check_full(mount, info)
    a, b = batches(mount, info, True), batches(mount, info, False, direct_read=1 << 62)
    assert a, "the Loader gave no batches"
    same(a, b, "batches")
    same(a, batches(mount, info, False, direct_read=1), "batches read with O_DIRECT")
    after = json.load(open(os.path.join(mount, ".blockfs", "stats.json")))["shm_read_requests"]
    assert after > before, f"stats.json's shm_read_requests went from {before} to {after}"
    print(f"ok: {len(files(mount))} files, {compared} bytes the same through shared memory; "
          f"{len(a)} Loader batches the same with shm on and off (buffered and O_DIRECT); {after - before} shm reads")


if __name__ == "__main__":
    main(sys.argv[1])
