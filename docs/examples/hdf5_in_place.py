#!/usr/bin/python3
"""Serve an HDF5 dataset with blockfs, in place when it can be.

An uncompressed, contiguous HDF5 dataset is one run of bytes inside the .h5 file: blockfs can
mount the file itself, with no copy, given where the run starts and how long its rows are:

    hdf5_in_place.py flags FILE.h5 DATASET
        prints the blockfs flags that serve DATASET in place, e.g.
        --record-size 64 --offset 2048 --records 1000000 --dtype <f4 --shape 16
    blockfs mount FILE.h5 /mnt/train $(hdf5_in_place.py flags FILE.h5 DATASET)

Each record is one row (the dataset's first axis); the flags carry its dtype and row shape, so
the mount's info.json says them and readers (blockfs.torch.Loader) get typed arrays.

A chunked or compressed dataset is not one run of bytes, so `flags` refuses it in one line and
exits 1. Convert it once, with bounded memory (a slice of rows at a time), and mount the .npy:

    hdf5_in_place.py to-npy FILE.h5 DATASET OUT.npy [--chunk-mib 64]
    blockfs mount OUT.npy /mnt/train

(or `blockfs pack OUT.npy DATASET_DIR` for a pre-shuffled, checksummed copy).

Needs h5py (Debian: python3-h5py) and numpy.
"""

import argparse
import sys

import h5py
import numpy as np


def in_place(path, name):
    """Return (offset, record_size, records, dtype, row_shape) of an HDF5 dataset stored as one
    contiguous, uncompressed run of bytes, or raise ValueError saying why it is not."""
    with h5py.File(path, "r") as f:
        if name not in f:
            raise ValueError(f"{path} has no dataset {name!r} (it has: {', '.join(f.keys())})")
        ds = f[name]
        if not isinstance(ds, h5py.Dataset):
            raise ValueError(f"{name!r} in {path} is a group, not a dataset")
        if ds.ndim == 0 or ds.shape[0] == 0:
            raise ValueError(f"{name!r} in {path} has no rows")
        if ds.chunks is not None or ds.compression is not None:
            how = "compressed" if ds.compression else "chunked"
            raise ValueError(
                f"{name!r} in {path} is {how}: it is not one run of bytes in the file, so it cannot be "
                f"served in place; convert it once: hdf5_in_place.py to-npy {path} {name} OUT.npy")
        if ds.dtype.hasobject or h5py.check_vlen_dtype(ds.dtype) is not None:
            raise ValueError(f"{name!r} in {path} holds variable-length values ({ds.dtype}): rows are not fixed-size bytes")
        offset = ds.id.get_offset()
        if offset is None:
            raise ValueError(f"{name!r} in {path} has no storage yet (never written)")
        rows = ds.shape[0]
        record = ds.dtype.itemsize * int(np.prod(ds.shape[1:], dtype=np.int64))
        return offset, record, rows, ds.dtype, ds.shape[1:]


def to_npy(path, name, out, chunk_mib=64):
    """Copy an HDF5 dataset to a .npy file, chunk_mib of rows at a time."""
    with h5py.File(path, "r") as f:
        ds = f[name]
        arr = np.lib.format.open_memmap(out, mode="w+", dtype=ds.dtype, shape=ds.shape)
        row = max(1, ds.dtype.itemsize * int(np.prod(ds.shape[1:], dtype=np.int64)))
        step = max(1, (chunk_mib << 20) // row)
        for i in range(0, ds.shape[0], step):
            arr[i:i + step] = ds[i:i + step]
        arr.flush()
        del arr


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    fl = sub.add_parser("flags", help="print the blockfs flags that serve DATASET in place")
    fl.add_argument("file")
    fl.add_argument("dataset")
    cv = sub.add_parser("to-npy", help="convert DATASET to a .npy file with bounded memory")
    cv.add_argument("file")
    cv.add_argument("dataset")
    cv.add_argument("out")
    cv.add_argument("--chunk-mib", type=int, default=64)
    a = p.parse_args()
    try:
        if a.cmd == "flags":
            offset, record, rows, dtype, shape = in_place(a.file, a.dataset)
            typed = f" --dtype {dtype.str}" if dtype.fields is None else ""
            if typed and len(shape):
                typed += " --shape " + ",".join(str(d) for d in shape)
            print(f"--record-size {record} --offset {offset} --records {rows}{typed}")
            print(f"{a.dataset}: {rows} rows of {dtype} {tuple(shape)} ({record} bytes) at byte {offset}", file=sys.stderr)
        else:
            to_npy(a.file, a.dataset, a.out, a.chunk_mib)
    except (ValueError, OSError, KeyError) as e:
        print(f"hdf5_in_place.py: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
