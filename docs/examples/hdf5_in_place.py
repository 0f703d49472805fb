#!/usr/bin/python3
"""Train from an HDF5 dataset with blockfs, served in place when it can be (blockfs.hdf5).

    python3 hdf5_in_place.py FILE.h5 DATASET [--npy OUT.npy] [--batch-size 256] [--seed 1]

An uncompressed, contiguous dataset is mounted as it is, with no copy:
blockfs.hdf5.mount_options says where its rows lie in the file and what type they are, so
blockfs.torch.Loader yields typed rows. A chunked or compressed dataset is not one run of bytes
in the file: it is converted once to a .npy (blockfs.hdf5.to_npy, a slice of rows at a time),
and that is mounted. The script reads one epoch and says what it read.

From the shell, the same in two commands:

    blockfs mount FILE.h5 /mnt/train $(python3 -m blockfs.hdf5 flags FILE.h5 DATASET)
    python3 -m blockfs.hdf5 to-npy FILE.h5 DATASET OUT.npy     # when flags says it cannot

Needs the blockfs package (make wheel; pip install dist/blockfs-*.whl), h5py and torch.
"""
import argparse
import os
import sys

import blockfs
import blockfs.hdf5
import blockfs.torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file")
    p.add_argument("dataset")
    p.add_argument("--npy", help="where to convert a dataset that cannot be served in place (default: beside FILE, named after DATASET)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    try:
        data, options = a.file, blockfs.hdf5.mount_options(a.file, a.dataset)
    except blockfs.hdf5.NotInPlaceError as e:
        data, options = a.npy or f"{os.path.splitext(a.file)[0]}.{a.dataset.replace('/', '.')}.npy", {}
        print(f"{e}\nconverting it to {data}", file=sys.stderr)
        blockfs.hdf5.to_npy(a.file, a.dataset, data)
    with blockfs.Mount(data, seed=a.seed, **options) as m:
        loader = blockfs.torch.Loader(m, batch_size=a.batch_size)
        rows = 0
        for ids, x in loader:  # ids: the rows' indices in the dataset, e.g. for f["labels"][ids]
            rows += len(ids)    # train on x here
        print(f"epoch 0: {rows} rows of {x.dtype} {tuple(x.shape[1:])} from {data}, in {len(loader)} batches")


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError, blockfs.MountError) as e:
        sys.exit(f"hdf5_in_place.py: {e}")
