"""HDF5 datasets for blockfs: served in place when a dataset is one run of bytes in its file,
converted once to .npy when it is not.

    import blockfs, blockfs.hdf5

    options = blockfs.hdf5.mount_options("train.h5", "features")   # where the rows are, their type
    with blockfs.Mount("train.h5", seed=1, **options) as m:         # no copy of the data
        ...                                                          # blockfs.torch.Loader(m, ...) yields typed rows

An uncompressed, contiguous HDF5 dataset is one run of bytes inside the .h5 file, so blockfs can
mount the file itself given where the run starts (offset), how long a row is (record_size) and
how many rows there are (records). Each record is one row (the dataset's first axis); dtype and
shape say its type, so the mount's info.json has them and readers get typed arrays. A chunked,
compressed, virtual or external dataset is not one run of bytes: mount_options raises
NotInPlaceError, and to_npy converts it once, a slice of rows at a time, to a .npy that blockfs
mounts in place.

From the shell (the flags of `blockfs mount`):

    blockfs mount train.h5 /mnt/train $(python3 -m blockfs.hdf5 flags train.h5 features)
    python3 -m blockfs.hdf5 to-npy train.h5 features features.npy [--chunk-mib 64]

Needs h5py (pip install h5py; Debian: python3-h5py), imported on first use.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, List, Optional, Sequence, Tuple, TypedDict, Union

import numpy as np

from .options import flag

PathLike = Union[str, "os.PathLike[str]"]


class NotInPlaceError(ValueError):
    """The dataset is not one run of bytes in its file (chunked, compressed, virtual or in
    external files), so blockfs cannot serve it in place: convert it once with to_npy."""


class _Where(TypedDict):
    record_size: int
    offset: int
    records: int


class MountOptions(_Where, total=False):
    """blockfs.Mount's keyword options for an HDF5 dataset in place: blockfs mount's
    --record-size, --offset and --records, and --dtype and --shape when numpy can name the
    rows' type (not for compound types)."""

    dtype: str
    shape: str


def _h5py() -> Any:
    try:
        import h5py
    except ImportError as e:
        raise ModuleNotFoundError("blockfs.hdf5 needs h5py: pip install h5py (Debian: apt-get install python3-h5py)",
                                  name="h5py") from e
    return h5py


def _dataset(h5py: Any, f: Any, path: PathLike, name: str) -> Any:
    """f[name], a dataset with rows of a fixed size, or ValueError saying what it is instead."""
    if name not in f:
        found: List[str] = []
        f.visititems(lambda n, obj: found.append(n) if isinstance(obj, h5py.Dataset) else None)
        more = f", ... ({len(found)} in all)" if len(found) > 10 else ""
        raise ValueError(f"{os.fspath(path)} has no dataset {name!r} (it has: {', '.join(found[:10]) or 'none'}{more})")
    ds = f[name]
    if not isinstance(ds, h5py.Dataset):
        raise ValueError(f"{name!r} in {os.fspath(path)} is a group, not a dataset")
    if not ds.shape or ds.shape[0] == 0:
        raise ValueError(f"{name!r} in {os.fspath(path)} has no rows (shape {ds.shape})")
    if ds.dtype.hasobject or h5py.check_vlen_dtype(ds.dtype) is not None:
        raise ValueError(f"{name!r} in {os.fspath(path)} holds variable-length values ({ds.dtype}): its rows are not fixed-size records")
    return ds


def _rows(ds: Any) -> Tuple[np.dtype[Any], Tuple[int, ...], int]:
    """The element type of ds, the shape of one row and its size in bytes. An HDF5 array type's
    dimensions belong to the row."""
    dtype, shape = ds.dtype, tuple(int(d) for d in ds.shape[1:])
    if dtype.subdtype is not None:
        dtype, sub = dtype.subdtype
        shape += tuple(sub)
    return dtype, shape, dtype.itemsize * int(np.prod(shape, dtype=np.int64))


def mount_options(path: PathLike, dataset: str) -> MountOptions:
    """blockfs.Mount's keyword options that serve an HDF5 dataset in place, a record per row.

    Parameters
    ----------
    path : str or os.PathLike
        The .h5 file (what blockfs.Mount then mounts).
    dataset : str
        The dataset's name in the file, e.g. ``"features"`` or ``"train/x"``.

    Returns
    -------
    MountOptions
        ``record_size``, ``offset`` and ``records``, and ``dtype`` (a numpy type string such as
        ``"<f4"``) and ``shape`` (``"3,32,32"``; absent for rows of one element) when numpy can
        name the type: ``blockfs.Mount(path, **mount_options(path, dataset))``.

    Raises
    ------
    NotInPlaceError
        The dataset is chunked, compressed, virtual or in external files (convert it with
        to_npy); a ValueError.
    ValueError
        No such dataset, a group, no rows, variable-length values, or never written.
    ModuleNotFoundError
        h5py is not installed.
    """
    h5py = _h5py()
    with h5py.File(path, "r") as f:
        ds = _dataset(h5py, f, path, dataset)
        where = f"{dataset!r} in {os.fspath(path)}"
        how = ("virtual (its rows live in other datasets)" if ds.is_virtual else
               "stored in external files" if ds.external else
               "compressed" if ds.compression else
               "chunked" if ds.chunks is not None else "")
        if how:
            raise NotInPlaceError(f"{where} is {how}: it is not one run of bytes in the file, so it cannot be served in place; "
                                  f"convert it once: python3 -m blockfs.hdf5 to-npy {os.fspath(path)} {dataset} OUT.npy")
        dtype, shape, record = _rows(ds)
        if record == 0:
            raise ValueError(f"{where} has empty rows (shape {ds.shape})")
        offset = ds.id.get_offset()
        if offset is None:
            raise ValueError(f"{where} has no storage in the file yet (never written)")
        options: MountOptions = {"record_size": record, "offset": int(offset), "records": int(ds.shape[0])}
        if dtype.fields is None and dtype.kind in "biufcSV":
            options["dtype"] = dtype.str
            if shape:
                options["shape"] = ",".join(str(d) for d in shape)
        return options


def to_npy(path: PathLike, dataset: str, out: PathLike, chunk_mib: int = 64) -> str:
    """Copies an HDF5 dataset to a .npy file that blockfs mounts in place, chunk_mib of rows at a
    time (memory stays about chunk_mib MiB whatever the dataset's size). The file appears at out
    only once it is complete.

    Parameters
    ----------
    path : str or os.PathLike
        The .h5 file.
    dataset : str
        The dataset's name in the file.
    out : str or os.PathLike
        The .npy file to write (replaced if it exists).
    chunk_mib : int
        MiB of rows read and written at a time.

    Returns
    -------
    str
        out.

    Raises
    ------
    ValueError
        No such dataset, a group, variable-length values, or chunk_mib < 1.
    ModuleNotFoundError
        h5py is not installed.
    """
    if chunk_mib < 1:
        raise ValueError(f"chunk_mib is {chunk_mib}: it must be at least 1")
    h5py = _h5py()
    out = os.fspath(out)
    tmp = f"{out}.{os.getpid()}.tmp"
    with h5py.File(path, "r") as f:
        ds = _dataset(h5py, f, path, dataset)
        dtype, shape, record = _rows(ds)
        rows = int(ds.shape[0])
        step = max(1, (chunk_mib << 20) // max(1, record))
        try:
            arr = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=(rows,) + shape)  # type: ignore[no-untyped-call]
            for i in range(0, rows, step):
                arr[i:i + step] = ds[i:i + step]
            arr.flush()
            del arr
            os.replace(tmp, out)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """python3 -m blockfs.hdf5 flags FILE DATASET | to-npy FILE DATASET OUT [--chunk-mib N]."""
    p = argparse.ArgumentParser(prog="python3 -m blockfs.hdf5", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    fl = sub.add_parser("flags", help="print the blockfs mount flags that serve DATASET in place")
    fl.add_argument("file")
    fl.add_argument("dataset")
    cv = sub.add_parser("to-npy", help="convert DATASET to a .npy file with bounded memory")
    cv.add_argument("file")
    cv.add_argument("dataset")
    cv.add_argument("out")
    cv.add_argument("--chunk-mib", type=int, default=64)
    a = p.parse_args(argv)
    try:
        if a.cmd == "flags":
            options = mount_options(a.file, a.dataset)
            print(" ".join(f"{flag(k)} {v}" for k, v in options.items()))
            what = "a compound type"
            if "dtype" in options:
                shape = tuple(int(d) for d in options["shape"].split(",")) if "shape" in options else ()
                what = f"{np.dtype(options['dtype']).name} {shape}"
            print(f"{a.dataset}: {options['records']} rows of {what}, {options['record_size']} bytes each, at byte "
                  f"{options['offset']} of {a.file}", file=sys.stderr)
        else:
            to_npy(a.file, a.dataset, a.out, a.chunk_mib)
    except (ValueError, OSError, ModuleNotFoundError) as e:
        print(f"blockfs.hdf5: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
