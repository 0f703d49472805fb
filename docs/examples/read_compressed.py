#!/usr/bin/env python3
"""Read a blockfs dataset's blocks without blockfs, compressed or not (docs/FORMAT.md).

    read_compressed.py DATASET OUT        write every block's records, uncompressed, in
                                          storage order, to OUT (the raw pack's .bin files
                                          concatenated)
    read_compressed.py DATASET --range B A N   print bytes [A, A+N) of block B, in hex

A reader of the format written from FORMAT.md alone, with Python's standard library and
zstandard (Debian's python3-zstandard): it checks the header's CRC32C, each frame's CRC32C
before decompressing it, and each frame's length after, and reads only the frames a range
touches.
"""
import json
import os
import struct
import sys

import zstandard

_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli), as FORMAT.md's checksums."""
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


class Corrupt(Exception):
    pass


def read_range(path: str, raw: int, frame: int, a: int, b: int) -> bytes:
    """Uncompressed bytes [a, b) of a compressed block of raw bytes in frames of frame."""
    if a >= b:
        return b""
    n = -(-raw // frame)
    with open(path, "rb") as f:
        head = f.read(20 + 8 * n)
        if len(head) != 20 + 8 * n or head[:4] != b"BFZ1":
            raise Corrupt(f"{path}: no BFZ1 header")
        if struct.unpack_from("<IQ", head, 4) != (frame, raw):
            raise Corrupt(f"{path}: header says frame/bytes {struct.unpack_from('<IQ', head, 4)}, manifest {(frame, raw)}")
        if crc32c(head[:-4]) != struct.unpack_from("<I", head, len(head) - 4)[0]:
            raise Corrupt(f"{path}: header CRC32C")
        sizes = [struct.unpack_from("<II", head, 16 + 8 * i) for i in range(n)]
        if len(head) + sum(s for s, _ in sizes) != os.fstat(f.fileno()).st_size:
            raise Corrupt(f"{path}: frames do not add up to the file")
        first, last = a // frame, (b - 1) // frame
        f.seek(len(head) + sum(s for s, _ in sizes[:first]))
        dec = zstandard.ZstdDecompressor()
        out = bytearray()
        for i in range(first, last + 1):
            comp = f.read(sizes[i][0])
            if crc32c(comp) != sizes[i][1]:
                raise Corrupt(f"{path}: frame {i} CRC32C")
            want = min(frame, raw - i * frame)
            got = dec.decompress(comp, max_output_size=frame)
            if len(got) != want:
                raise Corrupt(f"{path}: frame {i} holds {len(got)} bytes, want {want}")
            out += got
    skip = a - first * frame
    return bytes(out[skip : skip + (b - a)])


def block_bytes(ds: str, m: dict, blk: dict, a: int, b: int) -> bytes:
    path = os.path.join(ds, blk["file"])
    if "stored_bytes" not in blk:  # a raw block
        with open(path, "rb") as f:
            f.seek(a)
            return f.read(b - a)
    return read_range(path, blk["bytes"], m["compression"]["frame"], a, b)


def main() -> None:
    ds = sys.argv[1]
    with open(os.path.join(ds, "blockfs.json")) as f:
        m = json.load(f)
    if m["version"] not in (1, 2):
        sys.exit(f"unknown format version {m['version']}")
    if sys.argv[2] == "--range":
        blk = m["blocks"][int(sys.argv[3])]
        a, n = int(sys.argv[4]), int(sys.argv[5])
        print(block_bytes(ds, m, blk, a, min(a + n, blk["bytes"])).hex())
        return
    with open(sys.argv[2], "wb") as out:
        for blk in m["blocks"]:
            for a in range(0, blk["bytes"], 4 << 20):
                out.write(block_bytes(ds, m, blk, a, min(a + (4 << 20), blk["bytes"])))


if __name__ == "__main__":
    main()
