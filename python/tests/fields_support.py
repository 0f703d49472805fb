"""What test_fields (and test_inplace) write and read of datasets with fields: TFRecord files
(each record framed by its length and masked CRC32C), WebDataset shards as webdataset's
TarWriter writes them, a dataset of fixed fields assembled by hand as docs/FORMAT.md lays one
out, and plain reads of a mount's field files and of stats.json's reads per field."""
import io
import json
import os
import struct
import tarfile
import time

import numpy as np

from support import run

import blockfs

# CRC32C (Castagnoli), reflected polynomial 0x82F63B78, table-driven: TFRecord's checksum.
_CRC32C_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    """TFRecord's masked CRC32C of data: the CRC rotated right by 15 bits plus 0xa282ead8."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_bytes(records):
    """A TFRecord file of records: per record its uint64 LE length, the masked CRC32C of those
    8 bytes (uint32 LE), the data, and the data's masked CRC32C (uint32 LE)."""
    out = bytearray()
    for r in records:
        n = struct.pack("<Q", len(r))
        out += n + struct.pack("<I", masked_crc(n)) + r + struct.pack("<I", masked_crc(r))
    return bytes(out)


def write_shard(path, samples):
    """A WebDataset shard as webdataset's TarWriter writes one: a streamed tar (mode "w|",
    tarfile's default PAX format), per sample its members KEY.EXT in sorted order of EXT, each
    with mode 0444, owner bigdata:bigdata and the time of writing. samples: (key, {ext: bytes})."""
    now = time.time()
    with open(path, "wb") as f, tarfile.open(fileobj=f, mode="w|") as t:
        for key, fields in samples:
            for ext in sorted(fields):
                data = fields[ext]
                ti = tarfile.TarInfo(f"{key}.{ext}")
                ti.size, ti.mtime, ti.mode = len(data), now, 0o444
                ti.uname = ti.gname = "bigdata"
                t.addfile(ti, io.BytesIO(data))


def stats_sources(m):
    """stats.json's reads per field of the mount m: {name: bytes_read}."""
    tree = m.info["tree"]
    with open(os.path.join(m.path, tree["meta_dir"], tree["stats"])) as f:
        return {s["name"]: s["bytes_read"] for s in json.load(f)["sources"]}


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def values_of(m, epoch, name, shard=None):
    """Field name's values of an epoch (or shard) of mount m, by plain reads of its files: a
    list of bytes, cut by its offsets file for a variable field, by its record size else."""
    data = read_file(blockfs.field_path(m, epoch, name, shard))
    f = {f.name: f for f in blockfs.fields(m)}[name]
    if f.fixed:
        return [data[i:i + f.record_size] for i in range(0, len(data), f.record_size)]
    offs = np.frombuffer(read_file(blockfs.field_path(m, epoch, name, shard, offsets=True)), "<u8").tolist()
    assert offs[0] == 0 and offs[-1] == len(data), (offs[0], offs[-1], len(data))
    return [data[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]


def assemble_fields(dst, parts, records):
    """A dataset with fields at dst laid out by hand as docs/FORMAT.md describes one: a dataset
    per field under fields/NAME (each packed in input order from parts[name], (array, entry),
    entry the field's manifest entry less dir) and blockfs-fields.json. The fields must be cut
    at the same records: here every record is 8 bytes, so blocks of 4 KiB hold 512 of each."""
    os.makedirs(os.path.join(dst, "fields"))
    entries = []
    for name, (array, entry) in parts.items():
        base = os.path.join(os.path.dirname(dst), f"{os.path.basename(dst)}-{name}")
        if "dtype" in entry:
            src, fmt = base + ".npy", []
            np.save(src, array)
        else:  # opaque bytes: a raw file, so the field's own manifest has no dtype either
            src, fmt = base + ".bin", ["--format", "raw", "--record-size", str(entry["record_size"])]
            array.tofile(src)
        run("pack", "--quiet", "--no-shuffle", "--block-size", "4KiB", *fmt, src, os.path.join(dst, "fields", name))
        entries.append(dict(entry, name=name, dir=f"fields/{name}"))
    with open(os.path.join(dst, "blockfs-fields.json"), "w") as f:
        json.dump({"format": "blockfs-fields", "version": 1, "records": records, "source": "test", "fields": entries}, f)
    return dst
