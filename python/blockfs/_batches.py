"""The worker's side of blockfs.torch.Loader: a batch key turned into a batch (_Batches), with
one read of the records and one of their ids (or of each field asked for), decode, and the
arrays turned into tensors."""
from __future__ import annotations

import errno as errno_mod
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import Dataset

from ._files import Field, Tree, explain, is_mixture, names_of
from ._shm import ENV as SHM_ENV, Channel, ShmUnavailable, channel, warn_once
from ._types import Info
from ._userfile import open_fd

# A batch key: (epoch, start, end, after), see blockfs.torch.batch_keys.
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

# Files a worker keeps open: those of two epochs (data, ids, offsets, source), or more for a
# dataset with fields (two epochs of the files of the fields read).
OPEN_FILES = 8

# Reads from the files (where the shared-memory path is not used) of at least this many bytes
# go through a descriptor opened with O_DIRECT: the daemon answers them straight into the
# batch's buffer, with no page cache to fill, copy out of and drop behind (on 2 cores a
# Loader's epoch of 37 MiB batches took 0.24-0.33 CPU seconds per GiB, trainer and daemon,
# against 0.70-0.84 buffered, at 3.3-4.8 GiB/s against 2.0-2.4). Smaller reads stay buffered,
# where the kernel's readahead serves the next ones from memory; a descriptor that cannot be
# opened with O_DIRECT (EINVAL) is buffered too.
DIRECT_READ = 1 << 20

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


class _Batches(Dataset[Batch]):
    """Turns a batch key into a batch: a pure function of the key, run in the workers."""

    def __init__(self, path: str, info: Info, labels: Optional[npt.NDArray[Any]],
                 decode: Optional[Callable[..., Any]], decode_ids: bool, fields: Optional[Sequence[Field]] = None,
                 shm: Optional[bool] = None) -> None:
        self.path, self.labels, self.decode, self.decode_ids = path, labels, decode, decode_ids
        self.info = info
        self.tree = Tree.from_info(info)
        self._fds: Dict[Tuple[int, str, bool], int] = {}
        self.direct_reads = 0  # reads of the files through O_DIRECT, in this process
        self.no_direct = False  # O_DIRECT refused a read here: buffered from then on
        self._pid: Optional[int] = None
        # The shared-memory path: None uses it where the mount offers it (else the files, said
        # once), True requires it, False reads the files. _ch is this process's channel.
        self.shm = shm
        self._ch: Optional[Channel] = None
        self._ch_pid: Optional[int] = None
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

    def channel(self) -> Optional[Channel]:
        """This process's shared-memory channel to the mount's daemon, made on first use; None
        where the path is off or the mount offers none (said once; ShmUnavailable instead
        when shm=True)."""
        if self._ch_pid == os.getpid():
            return self._ch
        self._ch, self._ch_pid = None, os.getpid()
        if self.shm is False or (self.shm is None and os.environ.get(SHM_ENV) == "0"):
            return None
        try:
            self._ch = channel(self.path, dict(self.info))
        except ShmUnavailable as e:
            if self.shm:
                raise
            warn_once(str(e))
        return self._ch

    def _read(self, epoch: int, suffix: str, off: int, n: int) -> npt.NDArray[np.uint8]:
        """n bytes of epoch's file (or sidecar) from off: an array over the shared-memory
        path's buffer where the mount offers one, else read from the file in one read."""
        if n == 0:
            return np.empty(0, dtype=np.uint8)
        t0 = time.perf_counter()
        ch = self.channel()
        if ch is not None:
            name = self.tree.epoch_file("", epoch, None, suffix)
            arr = ch.read(name, off, n)
            if arr is not None:
                if len(arr) < n:
                    raise OSError(f"{self._path(epoch, suffix)}: short read at {off} ({len(arr)} of {n} bytes)")
                self._read_s = getattr(self, "_read_s", 0.0) + time.perf_counter() - t0
                return arr
        buf = np.empty(n, dtype=np.uint8)
        fd, direct = self._fd(epoch, suffix, n >= DIRECT_READ)
        self.direct_reads += direct
        view, got = buf.data, 0
        while got < n:
            try:
                k = os.preadv(fd, [view[got:]], off + got)
            except OSError as e:
                if direct and e.errno == errno_mod.EINVAL:
                    # A file system that wants O_DIRECT's reads aligned (a blockfs mount does
                    # not): this process reads buffered from now on.
                    self.no_direct, direct = True, False
                    fd = self._fd(epoch, suffix)[0]
                    continue
                raise explain(e, self.path, self._path(epoch, suffix)) from e
            if k == 0:
                raise OSError(f"{self._path(epoch, suffix)}: short read at {off} ({got} of {n} bytes)")
            got += k
        self._read_s = getattr(self, "_read_s", 0.0) + time.perf_counter() - t0
        return buf

    def _path(self, epoch: int, suffix: str) -> str:
        return self.tree.epoch_file(self.path, epoch, None, suffix)

    def _fd(self, epoch: int, suffix: str, direct: bool = False) -> Tuple[int, bool]:
        """A descriptor of epoch's file (or sidecar) kept open, opened with O_DIRECT if direct
        and the mount takes it; and whether it was."""
        if self._pid != os.getpid():  # a forked worker opens its own
            self._fds, self._pid = {}, os.getpid()
        direct = direct and not self.no_direct and hasattr(os, "O_DIRECT")
        key = (epoch, suffix, direct)
        fd = self._fds.get(key)
        if fd is not None:
            return fd, direct
        if len(self._fds) >= 2 * self.open_files:  # files of the last two epochs, two ways each
            for k in [k for k in self._fds if k[0] != epoch]:
                os.close(self._fds.pop(k))
        flags = os.O_RDONLY | os.O_CLOEXEC
        if direct:
            try:
                fd = self._fds[key] = open_fd(self._path(epoch, suffix), flags | os.O_DIRECT)
                return fd, True
            except OSError as e:
                if e.errno != errno_mod.EINVAL:
                    raise
                self.no_direct = True
                return self._fd(epoch, suffix)[0], False
        fd = self._fds[key] = open_fd(self._path(epoch, suffix), flags)
        if suffix:
            # A sidecar is read a batch's values at a time; the kernel's readahead would
            # ask for thousands of records' values at once, which on a node-aware mount
            # are in the id files of every block of every part the node reads. The
            # daemon's own readahead knows the order.
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        return fd, False

    def close_files(self) -> None:
        """Closes the files this process opened (the main process's, with num_workers=0)."""
        if self._pid == os.getpid():
            for fd in self._fds.values():
                os.close(fd)
        self._fds = {}
        self._ch, self._ch_pid = None, None  # the process's, kept for the next reader

    def __getstate__(self) -> Dict[str, Any]:
        s = dict(self.__dict__)
        s["_fds"], s["_pid"], s["_ch"], s["_ch_pid"] = {}, None, None, None
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


def _map_tensors(x: Any, f: Callable[[torch.Tensor], Any]) -> Any:
    """x with f applied to each of its tensors (also in a dict, a list or a tuple)."""
    if isinstance(x, torch.Tensor):
        return f(x)
    if isinstance(x, dict):
        return {k: _map_tensors(v, f) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_map_tensors(v, f) for v in x)
    return x


def _pinned(x: Any) -> Any:
    """x with its tensors in pinned memory (also in a dict, a list or a tuple)."""
    return _map_tensors(x, lambda t: t.pin_memory())


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
