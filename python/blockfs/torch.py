"""PyTorch batches from a blockfs mount, with exact resume at any worker count or world size.

    loader = blockfs.torch.Loader(mount, batch_size=256)   # num_workers: see Loader
    for epoch in range(loader.epoch, epochs):
        loader.set_epoch(epoch)
        for ids, x in loader:        # (ids, records[, labels]) as tensors; a mixture's: (ids, source, records)
            ...
        checkpoint["loader"] = loader.state_dict()

    for batch in blockfs.torch.Loader(mount, 256, fields=["jpg", "cls"]):   # a dataset with fields
        batch["ids"], batch["jpg"], batch["cls"]                            # a dict per batch

The order is the mount's: global step s of an epoch covers positions [s*B*W, (s+1)*B*W) of the
epoch file (B the batch size, W the world size) and rank r takes the B positions from
s*B*W + r*B; a last, short step is split evenly between the ranks (or dropped, with
drop_last). The epoch and the position live in this process: a sampler hands the workers batch
keys (epoch, first and end position) and a worker turns a key into a batch with one read of the
records and one of their ids, so what a rank sees never depends on num_workers or
persistent_workers, and the position counts batches as they are delivered, not as workers
prefetch them. A mixture's epochs may differ in length (a fractional repeat): each epoch's own
record count is read from the mount. A dataset with fields has one order for all its fields: a
worker reads each field asked for with one read of the batch's range of its file (and one of its
offsets), and the fields not asked for are not read at all.
"""
from __future__ import annotations

import numbers
import os
import time
from fractions import Fraction
import weakref
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ._nodes import Nodes, check_world, node_batches, node_keys
from ._files import Field, Tree, fields_of, is_fields, is_mixture, load_labels, mount_path, names_of, read_info, records_of
from ._types import Info, MountPath

# A batch key: (epoch, start, end, after), see batch_keys.
Key = Tuple[int, int, int, int]

# What a worker returns for a key: (ids[, source], records[, labels], after); for a dataset
# with fields, (the batch's dict, or decode's result, after).
Batch = Tuple[Any, ...]

# Records as a worker reads them: an array of fixed-size records, or one array per record; for
# a dataset with fields, the batch's dict of ids and fields.
Records = Union[npt.NDArray[Any], List[npt.NDArray[np.uint8]], Dict[str, Any]]

# A worker returns a batch's records as a tensor (in shared memory) from this size on, and as
# an array (copied through its pipe, faster for smaller batches) below it.
SHM_BYTES = 4 << 20

STATE_FORMAT = "blockfs-loader"
STATE_VERSION = 1

# What a saved position must agree on with the mount it resumes on (info.json's keys). A
# mixture's "fingerprint" is the mixture's; its sources' facts (SOURCE_FINGERPRINT_KEYS) and its
# "epoch_records" are compared too, so that a refusal names what changed.
FINGERPRINT_KEYS = ("fingerprint", "records", "record_size", "blocks", "seed", "shuffle", "mix", "window", "stride",
                    "segments", "in_place_offset")
SOURCE_FINGERPRINT_KEYS = FINGERPRINT_KEYS + ("rule", "value", "records_per_epoch")

# Files a worker keeps open: those of two epochs (data, ids, offsets, source), or more for a
# dataset with fields (two epochs of the files of the fields read).
OPEN_FILES = 8

# The key of the record ids in a batch of a dataset with fields (pack refuses a field of this
# name: its file would be the ids sidecar).
IDS_KEY = "ids"


class DecodeError(RuntimeError):
    """A Loader's decode raised on a batch. The message names the records it failed on (their
    ids and, for a dataset packed from a folder, their source names), the epoch and positions
    of the batch, and decode's own error, which is chained as __cause__ (in the worker's
    traceback that torch prints, with num_workers > 0). ids and names hold the failing records'
    ids and names (names None without a names file), and sources, in a mixture, their sources
    (else None); torch re-raises an error from a worker from its message alone, so there they
    are only in the message."""

    def __init__(self, message: str, ids: Sequence[int] = (), names: Optional[Sequence[str]] = None,
                 sources: Optional[Sequence[int]] = None) -> None:
        super().__init__(message)
        self.ids = [int(i) for i in ids]
        self.names = None if names is None else list(names)
        self.sources = None if sources is None else [int(s) for s in sources]


# At most this many failing records are named in a DecodeError's message.
DECODE_ERROR_NAMES = 5


def _dist_defaults(rank: Optional[int], world_size: Optional[int]) -> Tuple[int, int]:
    if rank is not None and world_size is not None:
        return int(rank), int(world_size)
    r, w = 0, 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        r, w = torch.distributed.get_rank(), torch.distributed.get_world_size()
    elif "WORLD_SIZE" in os.environ:
        r, w = int(os.environ.get("RANK", "0")), int(os.environ["WORLD_SIZE"])
    return (r if rank is None else int(rank)), (w if world_size is None else int(world_size))


def batch_keys(epoch: int, records: int, position: int, batch_size: int, rank: int, world_size: int,
               drop_last: bool) -> Iterator[Key]:
    """The batch keys (epoch, start, end, after) of rank's batches of an epoch of records, from
    global position on: the rank's records are positions [start, end) and after is the global
    position once every rank has taken its batch of that step."""
    step = batch_size * world_size
    pos = position
    while pos < records:
        if pos + step <= records:
            start = pos + rank * batch_size
            end = start + batch_size
        elif drop_last:
            return
        else:
            rest = records - pos
            start, end = pos + rank * rest // world_size, pos + (rank + 1) * rest // world_size
        pos = min(pos + step, records)
        if end > start:
            yield epoch, start, end, pos


class _Keys(Sampler[Key]):
    """Hands out the batch keys of the loader's epoch from its position, as they are when an
    iteration starts (in the main process, also with persistent workers)."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[Key]:
        return self.loader._keys()  # a generator over the values of now

    def __len__(self) -> int:
        return self.loader.__len__()


class _Batches(Dataset[Batch]):
    """Turns a batch key into a batch: a pure function of the key, run in the workers."""

    def __init__(self, path: str, info: Info, labels: Optional[npt.NDArray[Any]],
                 decode: Optional[Callable[..., Any]], decode_ids: bool, fields: Optional[Sequence[Field]] = None) -> None:
        self.path, self.labels, self.decode, self.decode_ids = path, labels, decode, decode_ids
        self.tree = Tree.from_info(info)
        self._fds: Dict[Tuple[int, str], int] = {}
        self._pid: Optional[int] = None
        self.open_files = OPEN_FILES
        # A dataset with fields: the fields to read, in the order asked; None for records.
        self.fields = None if fields is None else list(fields)
        if self.fields is not None:
            self.mixture = False
            per_epoch = 1 + sum(1 if f.fixed else 2 for f in self.fields)
            self.open_files = max(OPEN_FILES, 2 * per_epoch)
            return
        self.mixture = is_mixture(info)
        if self.mixture:
            if self.tree.source is None:
                raise ValueError(f"{path}: info.json's tree names no source sidecar for the mixture's records")
            self.source_dtype = np.dtype(info.get("source_dtype", "<u2"))
        self.fixed = info["kind"] == "fixed"
        if self.fixed:
            self.record_size = info["record_size"]
            self.dtype = np.dtype(info["dtype"]) if info.get("dtype") else np.dtype(np.uint8)
            shape = info.get("shape") if info.get("dtype") else None
            self.shape = tuple(shape) if shape is not None else (self.record_size // self.dtype.itemsize,)

    def __getitem__(self, key: Key) -> Batch:
        """The batch of key, its last item (the position after it) carried with the seconds its
        reads of the mount took and the seconds the whole batch took (Loader.read_stats)."""
        self._read_s = 0.0
        t0 = time.perf_counter()
        out = self._batch(key)
        busy = time.perf_counter() - t0
        return tuple(out[:-1]) + ((out[-1], self._read_s, busy),)

    def _batch(self, key: Key) -> Batch:
        if self.fields is not None:
            return self._field_batch(key)
        epoch, start, end, after = key
        ids = self._ids(epoch, start, end)
        source: Optional[npt.NDArray[np.int64]] = None
        if self.mixture:
            assert self.tree.source is not None
            size = self.source_dtype.itemsize
            source = self._read(epoch, self.tree.source, size * start, size * (end - start)).view(self.source_dtype).astype(np.int64)
        if self.fixed:
            rs = self.record_size
            data = self._read(epoch, "", rs * start, rs * (end - start))
            records: Any = data.view(self.dtype).reshape((end - start,) + self.shape)
        else:
            offs = self._read(epoch, self.tree.offsets, 8 * start, 8 * (end - start + 1)).view("<u8")
            base = int(offs[0])
            data = self._read(epoch, "", base, int(offs[-1]) - base)
            rel = (offs - base).tolist()
            records = [data[rel[i]:rel[i + 1]] for i in range(end - start)]
        if self.decode is not None:
            records = self._decode(records, ids, source, key)
        # Arrays, not tensors: a worker sends arrays of a batch through its pipe faster than
        # tensors through shared memory (a file and a descriptor passed per tensor); the
        # loader makes them tensors in the main process without a copy.
        if isinstance(records, np.ndarray) and records.nbytes >= SHM_BYTES:
            records = _tensor(records)  # large: shared memory beats copying through the pipe
        out: List[Any] = [ids] + ([] if source is None else [source]) + [records]
        if self.labels is not None:
            out.append(np.asarray(self.labels[ids]))
        out.append(after)
        return tuple(out)

    def _ids(self, epoch: int, start: int, end: int) -> npt.NDArray[np.int64]:
        """The ids of positions [start, end) of epoch, in one read of its ids sidecar."""
        return self._read(epoch, self.tree.ids, 8 * start, 8 * (end - start)).view("<u8").astype(np.int64)

    def _field_batch(self, key: Key) -> Batch:
        """The batch of key of a dataset with fields: a dict of the ids and each field asked
        for (or decode's result on it), and the position after it."""
        assert self.fields is not None
        epoch, start, end, after = key
        ids = self._ids(epoch, start, end)
        batch: Dict[str, Any] = {IDS_KEY: ids}
        for f in self.fields:
            batch[f.name] = self._values(epoch, f, start, end)
        out: Any = batch
        if self.decode is not None:
            out = self._decode(batch, ids, None, key)
        return _share(out), after

    def _values(self, epoch: int, f: Field, start: int, end: int) -> Any:
        """Field f's values at positions [start, end) of epoch, read with one read of their
        bytes (and, for a variable field, one of their offsets): a fixed field's as an array
        shaped (n, *f.shape) of its dtype; a variable field's as a list of n 1-D arrays (uint8
        for opaque bytes), views of the one buffer read."""
        n = end - start
        if f.fixed:
            assert f.record_size is not None
            rs = f.record_size
            return self._read(epoch, f.file, rs * start, rs * n).view(f.dtype).reshape((n,) + f.shape)
        assert f.offsets is not None
        offs = self._read(epoch, f.offsets, 8 * start, 8 * (n + 1)).view("<u8")
        base = int(offs[0])
        data = self._read(epoch, f.file, base, int(offs[-1]) - base)
        rel = (offs - base).tolist()
        values = [data[rel[i]:rel[i + 1]] for i in range(n)]
        if f.dtype == np.uint8:
            return values
        size = f.dtype.itemsize
        for i in range(n):
            if (rel[i + 1] - rel[i]) % size:
                raise OSError(f"{self._path(epoch, f.file)}: the value at position {start + i} has {rel[i + 1] - rel[i]} "
                              f"bytes, not a whole number of {f.dtype} elements of {size} bytes (field {f.name!r})")
        # Each value starts at a multiple of the element size in a fresh buffer: aligned views.
        return [v.view(f.dtype) for v in values]

    def _call_decode(self, records: Records, ids: npt.NDArray[np.int64], source: Optional[npt.NDArray[np.int64]]) -> Any:
        """decode(records); with decode_ids, decode(records, ids), or decode(records, ids,
        source) for a mixture (the arrays read-only: the batch's are these). For a dataset with
        fields, records is the batch's dict, and decode gets a copy of it (a decode that
        replaces its items leaves the batch as read, to find the records it fails on)."""
        assert self.decode is not None
        if isinstance(records, dict):
            return self.decode(dict(records))
        if not self.decode_ids:
            return self.decode(records)
        args = [ids] if source is None else [ids, source]
        views = []
        for a in args:
            v = a.view()
            v.flags.writeable = False
            views.append(v)
        return self.decode(records, *views)

    def _decode(self, records: Records, ids: npt.NDArray[np.int64], source: Optional[npt.NDArray[np.int64]],
                key: Key) -> Any:
        """decode's result on a batch (see _call_decode); a DecodeError naming the records it
        fails on if it raises."""
        try:
            return self._call_decode(records, ids, source)
        except Exception as e:
            raise self._decode_error(records, ids, source, key, e) from e

    def _decode_error(self, records: Records, ids: npt.NDArray[np.int64], source: Optional[npt.NDArray[np.int64]],
                      key: Key, err: Exception) -> DecodeError:
        """The DecodeError for decode's err on a batch: which records fail is found by decoding
        each one alone (only now that it failed), so the message names them, not the batch. In a
        mixture a record is named by its source and id (names come from one dataset's names
        file, so there are none)."""
        bad: List[int] = []
        if len(ids) > 1:
            for i in range(len(ids)):
                try:
                    self._call_decode(_rows(records, i), ids[i:i + 1], None if source is None else source[i:i + 1])
                except Exception:
                    bad.append(i)
        rows = bad if bad else list(range(len(ids)))
        which = [int(ids[i]) for i in rows]
        names: Optional[List[str]] = None
        if source is None:
            try:
                names = names_of(self.path, which)
            except (OSError, ValueError):
                names = None
        of = [f" of source {int(source[i])}" if source is not None else "" for i in rows]
        shown = [f"id {i}{of[k]}" + (f" ({names[k]})" if names else "") for k, i in enumerate(which[:DECODE_ERROR_NAMES])]
        more = f" and {len(which) - DECODE_ERROR_NAMES} more" if len(which) > DECODE_ERROR_NAMES else ""
        epoch, start, end, _ = key
        batch = f"epoch {epoch}, positions [{start}, {end})"
        listed = ", ".join(shown) + more
        if bad or len(ids) == 1:
            what = f"decode failed on {len(which)} record{'s' if len(which) > 1 else ''}: {listed}, in the batch of {batch}"
        else:
            what = f"decode failed on the batch of {batch} ({listed}), though each of its records decodes alone"
        sources = None if source is None else [int(source[i]) for i in rows]
        return DecodeError(f"{what}: {type(err).__name__}: {err}", which, names, sources)

    def _read(self, epoch: int, suffix: str, off: int, n: int) -> npt.NDArray[np.uint8]:
        """n bytes of epoch's file (or sidecar) from off, in one read."""
        buf = np.empty(n, dtype=np.uint8)
        if n == 0:
            return buf
        fd = self._fd(epoch, suffix)
        view, got = buf.data, 0
        t0 = time.perf_counter()
        while got < n:
            k = os.preadv(fd, [view[got:]], off + got)
            if k == 0:
                raise OSError(f"{self._path(epoch, suffix)}: short read at {off} ({got} of {n} bytes)")
            got += k
        self._read_s = getattr(self, "_read_s", 0.0) + time.perf_counter() - t0
        return buf

    def _path(self, epoch: int, suffix: str) -> str:
        return self.tree.epoch_file(self.path, epoch, None, suffix)

    def _fd(self, epoch: int, suffix: str) -> int:
        if self._pid != os.getpid():  # a forked worker opens its own
            self._fds, self._pid = {}, os.getpid()
        key = (epoch, suffix)
        fd = self._fds.get(key)
        if fd is None:
            if len(self._fds) >= self.open_files:  # files of the last two epochs
                for k in [k for k in self._fds if k[0] != epoch]:
                    os.close(self._fds.pop(k))
            fd = self._fds[key] = os.open(self._path(epoch, suffix), os.O_RDONLY | os.O_CLOEXEC)
            if suffix:
                # A sidecar is read a batch's values at a time; the kernel's readahead would
                # ask for thousands of records' values at once, which on a node-aware mount
                # are in the id files of every block of every part the node reads. The
                # daemon's own readahead knows the order.
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        return fd

    def close_files(self) -> None:
        """Closes the files this process opened (the main process's, with num_workers=0)."""
        if self._pid == os.getpid():
            for fd in self._fds.values():
                os.close(fd)
        self._fds = {}

    def __getstate__(self) -> Dict[str, Any]:
        s = dict(self.__dict__)
        s["_fds"], s["_pid"] = {}, None
        return s


def _rows(records: Any, i: int) -> Any:
    """Row i of a batch's records (an array or a list), or of each item of a dataset with fields'
    dict, as a batch of one."""
    if isinstance(records, dict):
        return {k: v[i:i + 1] for k, v in records.items()}
    return records[i:i + 1]


def _share(x: Any) -> Any:
    """A worker's field batch (a dict, or decode's result) to send to the loader: its large
    arrays (SHM_BYTES and more) as tensors, which go through shared memory instead of the pipe."""
    if isinstance(x, dict):
        return {k: _share(v) for k, v in x.items()}
    if isinstance(x, np.ndarray) and x.nbytes >= SHM_BYTES:
        return _tensor(x)
    return x


def _tensors(x: Any) -> Any:
    """A field batch as the loader yields it: arrays as tensors (as _tensor makes them), also in a
    dict, a list or a tuple."""
    if isinstance(x, dict):
        return {k: _tensors(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_tensors(v) for v in x)
    return _tensor(x)


def _pinned(x: Any) -> Any:
    """x with its tensors in pinned memory (also in a dict, a list or a tuple)."""
    if isinstance(x, torch.Tensor):
        return x.pin_memory()
    if isinstance(x, dict):
        return {k: _pinned(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_pinned(v) for v in x)
    return x


def _torch_holds(dtype: np.dtype[Any]) -> bool:
    """Whether a field's elements of dtype become a tensor (as _tensor makes them): torch has no
    tensor of strings, of datetimes or, before 2.3, of uint64."""
    try:
        _tensor(np.zeros(1, dtype=dtype))
    except (TypeError, ValueError):
        return False
    return True


def _tensor(x: Any) -> Any:
    """x as a tensor, if it is an array; numpy types torch lacks are widened (uint16 to
    int32, uint32 to int64), and byte order made native."""
    if isinstance(x, list):
        return [_tensor(v) for v in x]
    if not isinstance(x, np.ndarray):
        return x
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    wider = {np.dtype(np.uint16): np.int32, np.dtype(np.uint32): np.int64}.get(x.dtype)
    if wider is not None:
        x = x.astype(wider)
    if not x.flags.writeable:
        x = np.array(x)
    return torch.from_numpy(x)


def _source_fingerprint(source: Dict[str, Any]) -> Dict[str, Any]:
    """What a saved state must agree on with one source of a mixture (info.json's "sources"
    entry): its SOURCE_FINGERPRINT_KEYS, the rule's value as an exact fraction ("0.70" and
    "0.7" are one weight)."""
    fp = {k: source[k] for k in SOURCE_FINGERPRINT_KEYS if k in source}
    try:
        fp["value"] = str(Fraction(str(fp["value"])))
    except (KeyError, ValueError, ZeroDivisionError):
        pass  # compared as written
    return fp


def _as_is(batch: Any) -> Any:
    return batch


def _state_int(state: Dict[str, Any], key: str, lo: int, hi: int) -> int:
    """state[key] as an int in [lo, hi], or ValueError saying what is wrong: a missing key, a
    bool, a float or a string (a position that is not a whole record count is no position)."""
    if key not in state:
        raise ValueError(f"loader state has no {key!r}")
    v = state[key]
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ValueError(f"loader state {key} {v!r} is not an integer ({type(v).__name__})")
    v = int(v)
    if not lo <= v <= hi:
        raise ValueError(f"loader state {key} {v} is out of range ({lo} to {hi})")
    return v


class Loader:
    """Batches (ids, records[, labels]) of a mount's epochs for PyTorch training; (ids, source,
    records) of a mixture's; a dict {"ids": ids, field: values, ...} of a dataset with fields'.

    path is a mountpoint or a blockfs.Mount. ids is an int64 tensor of the records' source ids
    (their rows in the packed input). records is a tensor shaped (batch, *shape) of the
    dataset's dtype (from info.json; (batch, record size) of uint8 without a dtype), or, for
    variable-length records, a list of uint8 tensors. decode, if given, is called in the worker
    with each batch's records (a numpy array, or a list of arrays) and its result is returned
    instead (arrays become tensors); with decode_ids=True it is called as decode(records, ids),
    ids the batch's record ids (an int64 array; blockfs.record_names(mount)[id] names a record
    of a dataset packed from a folder). If decode raises, the loader raises DecodeError naming
    the records it fails on (ids, and names where the dataset has them). labels is an array
    indexed by record id (or a .npy or text file of one), joined per batch as a third tensor.

    A dataset with fields (packed from WebDataset tars, TFRecord files, Parquet or Arrow; its
    mount serves a file per field, docs/FORMAT.md) has batches that are dicts: "ids" (the
    int64 tensor of the samples' ids, as above) and one item per field of fields, in that
    order (fields=None: all the dataset's fields, in its order; blockfs.fields(mount) lists
    them). A fixed-size field's item is a tensor shaped (batch, *shape) of the field's dtype
    ((batch, record size) of uint8 for opaque bytes); a variable-length field's is a list of
    batch 1-D tensors, uint8 for opaque bytes (an image, a JSON text), else of the field's
    element dtype (a token list). A worker reads each field asked for with one read of the
    batch's part of its file (and one of its offsets), and never opens the other fields'
    files: asking for ["label"] reads labels only. decode, if given, is called with the
    batch's dict (numpy arrays, or lists of arrays; a copy of the dict, so it may replace its
    items) and its result is returned instead (arrays become tensors, also in a dict, list or
    tuple); a DecodeError names the samples it fails on. labels= and decode_ids= are refused:
    a label packed as a field is in the dict, as are the ids. fields= on a dataset without
    fields is refused, as is a name the dataset has no field of (the message lists its
    fields). A field of a dtype torch has no tensor of (uint64 before torch 2.3) needs decode.

    A mixture's mount (several datasets in one epoch, docs/SHUFFLE.md) has batches (ids,
    source, records): source is an int64 tensor of each record's source, its index in
    info.json's "sources", and ids are ids within that source. Its records are as above when
    every source's records are fixed-size and of the same size (with the mixture's dtype and
    shape where info.json gives one), else a list of uint8 tensors. decode_ids=True calls
    decode(records, ids, source). labels is refused (an id names a record only within its
    source): look a label up by (source, id), e.g. ``per_source[s][i]``, in decode or in the
    loop. A mixture's epochs can differ in length (a fractional repeat); each epoch's length is
    its own.

    rank and world_size default to torch.distributed's, else $RANK and $WORLD_SIZE, else 0 and
    1. The other arguments are DataLoader's. Keep num_workers=0 unless decode does real work
    (a millisecond or more a record): a batch is one read and one tensor, and a worker only adds
    a process hop and a copy (9x slower on 512 B records, 2 cores); with such a decode, about
    as many workers as spare cores (docs/USAGE.md, bench/workers_bench.py).

    On a node-aware mount (blockfs.Mount(..., nodes=N), docs/USAGE.md "Many nodes") each node
    reads its own epoch file, and the loader's position is in the whole epoch: a step takes
    batch_size x world_size of its positions, of which this node's are a run of its own epoch
    cut among its local_world_size ranks (default $LOCAL_WORLD_SIZE, else world_size / N;
    local rank = rank mod local_world_size). While every canonical part has records left, every
    rank gets batch_size records a step; past that (the last records of the larger parts) a
    rank's batches may be smaller or absent. A state saved at N nodes resumes at any node count
    that divides the parts, each record of the epoch once.

    The loader holds the epoch and the position in it (records of the epoch consumed by all
    ranks together). Iterating yields the rest of the epoch from the position; once an epoch is
    done, the loader moves to the next one at position 0. set_epoch(e) selects epoch e from
    position 0, unless e is already the loader's epoch (so a resumed run's set_epoch keeps its
    position). state_dict() and load_state_dict() save and restore the epoch and position.
    A dataset with fields has one order for all its fields, so the fields read are no part of
    the state: a state saved by a loader of fields=["label"] resumes one of ["image", "label"]
    at the same sample.
    """

    def __init__(self, path: MountPath, batch_size: int, num_workers: int = 0, persistent_workers: bool = False,
                 rank: Optional[int] = None, world_size: Optional[int] = None, epoch: int = 0, labels: Any = None,
                 decode: Optional[Callable[..., Any]] = None, drop_last: bool = False, pin_memory: bool = False,
                 prefetch_factor: Optional[int] = None, timeout: float = 0,
                 worker_init_fn: Optional[Callable[[int], None]] = None, multiprocessing_context: Any = None,
                 decode_ids: bool = False, fields: Optional[Sequence[str]] = None,
                 local_world_size: Optional[int] = None) -> None:
        self.path = mount_path(path)
        self.info = read_info(self.path)
        self.fields = self._choose_fields(fields, labels, decode, decode_ids)
        if int(batch_size) < 1:
            raise ValueError(f"batch_size {batch_size!r}: need at least 1")
        self.batch_size = int(batch_size)
        self.rank, self.world_size = _dist_defaults(rank, world_size)
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} of world size {self.world_size}: need 0 <= rank < world_size")
        self._nodes: Optional[Nodes] = None
        if "nodes" in self.info:
            self._nodes = Nodes(self.info["nodes"])
            lw = local_world_size if local_world_size is not None else os.environ.get("LOCAL_WORLD_SIZE")
            self.local_world_size = check_world(self._nodes, self.world_size, None if lw is None else int(lw))
            self.local_rank = self.rank % self.local_world_size
            if self.rank // self.local_world_size != self._nodes.node:
                raise ValueError(f"rank {self.rank} of {self.world_size} ({self.local_world_size} a node) is on node "
                                 f"{self.rank // self.local_world_size}, but this mount is node {self._nodes.node} of "
                                 f"{self._nodes.nodes}: mount each node with its own node= (torchrun's $GROUP_RANK)")
        self.drop_last = bool(drop_last)
        if labels is not None and is_mixture(self.info):
            raise ValueError("labels= is not for a mixture: a record id names a record only within its source, so one "
                             "array indexed by id cannot label them; look labels up by (source, id) in the batches "
                             "(ids, source, records), or in decode with decode_ids=True (decode(records, ids, source))")
        if labels is not None:
            labels = load_labels(labels)
            if len(labels) < self.info["records"] and "window" not in self.info:
                raise ValueError(f"labels has {len(labels)} entries; the dataset has {self.info['records']} records")
        self.epoch, self.position = int(epoch), 0
        self._lengths: Dict[int, int] = {}  # records of epochs whose length has been read
        self.num_workers = int(num_workers)
        self._reads: Dict[str, float] = {"batches": 0.0, "read_seconds": 0.0, "batch_seconds": 0.0, "seconds": 0.0}
        kw: Dict[str, Any] = {}
        if num_workers > 0:
            kw["persistent_workers"] = persistent_workers
            if prefetch_factor is not None:
                kw["prefetch_factor"] = prefetch_factor
            if multiprocessing_context is not None:
                kw["multiprocessing_context"] = multiprocessing_context
        self.pin_memory = bool(pin_memory)  # in this process: workers send arrays, not tensors
        if decode_ids and decode is None:
            raise ValueError("decode_ids=True needs a decode function (it is called as decode(records, ids))")
        self._batches = _Batches(self.path, self.info, labels, decode, bool(decode_ids), self.fields)
        self._loader_options: Dict[str, Any] = dict(num_workers=num_workers, timeout=timeout,
                                                    worker_init_fn=worker_init_fn, **kw)
        self._loader: Optional[DataLoader[Batch]] = None
        self._running: weakref.WeakSet[Generator[Any, None, None]] = weakref.WeakSet()
        self._data_loader()  # DataLoader checks its arguments now

    def _choose_fields(self, names: Optional[Sequence[str]], labels: Any, decode: Optional[Callable[..., Any]],
                       decode_ids: bool) -> Optional[List[Field]]:
        """The fields the loader reads, in the order of names (all the dataset's when names is
        None), or None for a dataset without fields; ValueError for names that are not the
        dataset's fields and for the options that are not for fields."""
        if not is_fields(self.info):
            if names is not None:
                raise ValueError(f"fields= is for a dataset with fields; {self.path} serves records of one kind "
                                 f"({self.info.get('kind')!r}), batched as (ids, records): leave fields= out")
            return None
        have = fields_of(self.info)
        listed = ", ".join(f.name for f in have)
        if labels is not None:
            raise ValueError(f"labels= is not for a dataset with fields (its fields: {listed}): a label packed as a field "
                             "comes in the batch's dict; join other per-record data by batch['ids'] in decode or the loop")
        if decode_ids:
            raise ValueError("decode_ids= is not for a dataset with fields: decode gets the batch's dict, ids included "
                             f"(batch[{IDS_KEY!r}])")
        if names is None:
            chosen = have
        else:
            if isinstance(names, (str, bytes)):
                raise ValueError(f"fields={names!r} is one name, not a list of names: fields=[{names!r}]")
            wanted = list(names)
            if not wanted:
                raise ValueError(f"fields= names no field; the dataset's fields are {listed} (fields=None reads them all)")
            by_name = {f.name: f for f in have}
            unknown = [n for n in wanted if n not in by_name]
            if unknown:
                which = ", ".join(repr(n) for n in unknown)
                raise ValueError(f"no field {which} in {self.path}; its fields are {listed}")
            twice = sorted({n for n in wanted if wanted.count(n) > 1})
            if twice:
                raise ValueError(f"fields= names {', '.join(repr(n) for n in twice)} more than once")
            chosen = [by_name[n] for n in wanted]
        for f in chosen:
            if f.name == IDS_KEY:
                raise ValueError(f"the dataset has a field named {IDS_KEY!r}, the key of the batch's record ids")
            if decode is None and not _torch_holds(f.dtype):
                raise ValueError(f"field {f.name!r} has elements of {f.dtype}, of which torch {torch.__version__} has no "
                                 "tensor: pass decode= (it gets numpy arrays) or leave the field out of fields=")
        return chosen

    def _data_loader(self) -> DataLoader[Batch]:
        """The DataLoader that runs the workers, made on first use and again after close().
        With persistent workers it keeps its iterator, and with it its workers, for its life."""
        if self._loader is None:
            self._loader = DataLoader(self._batches, batch_size=None, sampler=_Keys(self), collate_fn=_as_is,
                                      **self._loader_options)
        return self._loader

    def read_stats(self) -> Dict[str, float]:
        """Where the loader's time went, over its iterations so far: "batches" made,
        "read_seconds" its workers (or the main process, without workers) spent in reads of the
        mount, "batch_seconds" they spent making batches (reads, decode and the rest),
        "seconds" of wall time the loader has been iterating, "workers", and "read_fraction":
        read_seconds over seconds x workers, the share of the workers' time spent waiting on
        reads. The mount's own view, per open file, is Mount.stats() (and blockfs stats)."""
        r = dict(self._reads)
        workers = max(1, self.num_workers)
        r["workers"] = float(workers)
        r["read_fraction"] = r["read_seconds"] / (r["seconds"] * workers) if r["seconds"] > 0 else 0.0
        return r

    def epoch_records(self, epoch: Optional[int] = None) -> int:
        """The records of epoch (the loader's, by default): info.json's "records", except in a
        mixture whose epochs differ in length, where it is read from the mount (once an epoch)."""
        e = self.epoch if epoch is None else int(epoch)
        if self._nodes is not None:
            return self._nodes.total  # positions of the whole epoch, every node's
        n = self._lengths.get(e)
        if n is None:
            n = records_of(self.info, self.path, e)
            if len(self._lengths) >= 4:
                self._lengths.clear()
            self._lengths[e] = n
        return n

    def _keys(self) -> Iterator[Key]:
        if self._nodes is not None:
            return node_keys(self.epoch, self._nodes, self.position, self.batch_size, self.local_rank,
                             self.local_world_size, self.world_size, self.drop_last)
        return batch_keys(self.epoch, self.epoch_records(), self.position, self.batch_size, self.rank, self.world_size,
                          self.drop_last)

    def __len__(self) -> int:
        """Batches this rank has left in the current epoch."""
        if self._nodes is not None:
            return node_batches(self._nodes, self.position, self.batch_size, self.local_rank, self.local_world_size,
                                self.world_size, self.drop_last)
        n, step = self.epoch_records() - self.position, self.batch_size * self.world_size
        full = n // step
        if self.drop_last or n % step == 0:
            return int(full)
        rest = n - full * step
        return int(full + int((self.rank + 1) * rest // self.world_size > self.rank * rest // self.world_size))

    def __iter__(self) -> Iterator[Any]:
        it = self._iterate()
        self._running.add(it)
        return it

    def _iterate(self) -> Generator[Any, None, None]:
        epoch = self.epoch
        start, before = time.perf_counter(), self._reads["seconds"]
        for batch in self._data_loader():
            if self.epoch != epoch:
                raise RuntimeError("set_epoch or load_state_dict was called during an iteration")
            self.position, read_s, busy_s = batch[-1]
            r = self._reads
            r["batches"] += 1
            r["read_seconds"] += read_s
            r["batch_seconds"] += busy_s
            r["seconds"] = before + time.perf_counter() - start
            if self.fields is not None:
                fout = _tensors(batch[0])
                yield _pinned(fout) if self.pin_memory else fout
                continue
            out = tuple(_tensor(x) for x in batch[:-1])
            if self.pin_memory:
                out = tuple(x.pin_memory() if isinstance(x, torch.Tensor) else x for x in out)
            yield out
        self.epoch, self.position = epoch + 1, 0

    def close(self) -> None:
        """Stops persistent workers now (they otherwise stop when the loader is collected): the
        loader ends its iterations in progress and lets go of its DataLoader, whose iterator torch
        shuts down, workers and all, when it is collected; a later iteration starts a new one.
        It also closes the files it read with num_workers=0, so the mount can go."""
        for it in list(self._running):
            it.close()
        self._loader = None
        self._batches.close_files()

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_epoch(self, epoch: int) -> None:
        """Selects epoch to iterate next, from its start (or, if the loader is already in that
        epoch, from where it is: a resumed position is kept)."""
        if int(epoch) != self.epoch:
            self.epoch, self.position = int(epoch), 0

    def fingerprint(self) -> Dict[str, Any]:
        """What a saved state must agree on with this mount: the data and the order options;
        for a mixture, also each source's data, rule and order options and the mixture's
        epoch_records."""
        fp = {k: self.info[k] for k in FINGERPRINT_KEYS if k in self.info}
        if "nodes" in self.info:  # the same at every node count: the whole data, the parts
            fp["records"] = self.info["dataset_records"]
            fp["parts"] = self.info["nodes"]["parts"]
        if is_mixture(self.info):
            fp["sources"] = [_source_fingerprint(s) for s in self.info["sources"]]
            fp["epoch_records"] = (self.info.get("mixture") or {}).get("epoch_records")
        return fp

    def state_dict(self) -> Dict[str, Any]:
        """The loader's place, as small JSON-able data, the same on every rank. For a dataset
        with fields it holds no field names: every field is in the epoch's one order, and
        info.json's "fingerprint" covers all the fields' data."""
        return {"format": STATE_FORMAT, "version": STATE_VERSION, "fingerprint": self.fingerprint(),
                "epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes where state_dict was taken: the rest of that epoch, each record once, in
        order, whatever the batch size, worker count or world size now. Raises ValueError for a
        state of other data or options, naming what differs."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ValueError(f"not a blockfs loader state (no format {STATE_FORMAT!r})")
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"loader state version {state.get('version')!r}; this blockfs reads version {STATE_VERSION}")
        saved, here = state.get("fingerprint"), self.fingerprint()
        if not isinstance(saved, dict):
            raise ValueError(f"loader state fingerprint {saved!r} is not a dict of the mount's facts")
        diff = [f"{k} {saved.get(k)!r} in the state, {here.get(k)!r} in this mount"
                for k in sorted(set(saved) | set(here)) if saved.get(k) != here.get(k)]
        if diff:
            raise ValueError("the loader state is from other data or options: " + "; ".join(diff))
        epoch = _state_int(state, "epoch", 0, 2**64 - 1)
        position = _state_int(state, "position", 0, self.epoch_records(epoch))
        self.epoch, self.position = epoch, position
