"""blockfs from Python.

    blockfs.Mount(data, mountpoint=None, **options)   mount for a with block (shared per node)
    blockfs.options.schema_of(blockfs.binary())       the options Mount takes (blockfs options --json)
    blockfs.attach(path)                               an existing mount
    blockfs.order(path, epoch, shard=None)             an epoch's record ids (numpy uint64)
    blockfs.record_sources(path, epoch, shard=None)    a mixture's epoch: each record's source
    blockfs.epoch_records(path, epoch)                 an epoch's record count
    blockfs.load_labels(file), blockfs.labels_from_names(mount)
    blockfs.record_names(mount)                        the source name of each record id (folders)
    blockfs.fields(path), blockfs.field_path(path, epoch, field, shard=None, offsets=False)
                                                       a dataset with fields: its fields, their files
    blockfs.torch.Loader(path, batch_size, ...)        PyTorch batches with exact resume
    blockfs.hdf5.mount_options(file, dataset)          Mount options for an HDF5 dataset in place
    blockfs.pack_parallel(inputs, out, parts, client=None, **pack_options)
                                                       pack in parts on Dask workers (or local
                                                       processes), then merge (blockfs.parallel)

blockfs.torch needs torch and blockfs.hdf5 h5py (import them by name); pack_parallel's client is
a Dask distributed Client (no module here imports Dask); the rest needs numpy only.
"""
from ._files import (Field, epoch_path, epoch_records, field_path, fields, labels_from_names, load_labels, order,
                     read_info, record_names, record_sources, shard_range)
from ._binary import binary
from ._mount import Mount, MountError, OrderWarning, attach
from .parallel import PackError, PackResult, pack_parallel
from ._shm import ShmUnavailable

__version__ = "0.1.0"  # the package's version, read by pyproject.toml's build
__all__ = ["Field", "Mount", "MountError", "OrderWarning", "PackError", "PackResult", "attach", "binary", "epoch_path",
           "epoch_records", "field_path", "fields", "labels_from_names", "load_labels", "order", "pack_parallel", "read_info",
           "record_names", "record_sources", "shard_range", "ShmUnavailable"]
