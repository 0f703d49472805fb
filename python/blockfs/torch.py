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
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional, Sequence, Tuple

import torch
from torch.utils.data import DataLoader, Sampler

from ._nodes import Nodes, check_world, node_batches, node_keys
from ._files import Field, fields_of, is_fields, is_mixture, load_labels, mount_path, near_hint, read_info, records_of
from ._types import MountPath

from ._batches import IDS_KEY, Batch, DecodeError, Key, _Batches, _torch_holds
from ._device import check_device, on_device
from ._readahead import PREFETCH, _as_tensors, _ReadAhead

DecodeError.__module__ = __name__  # its public name: blockfs.torch.DecodeError


STATE_FORMAT = "blockfs-loader"
STATE_VERSION = 1

# What a saved position must agree on with the mount it resumes on (info.json's keys). A
# mixture's "fingerprint" is the mixture's; its sources' facts (SOURCE_FINGERPRINT_KEYS) and its
# "epoch_records" are compared too, so that a refusal names what changed.
FINGERPRINT_KEYS = ("fingerprint", "records", "record_size", "blocks", "seed", "shuffle", "mix", "order_version",
                    "window", "stride", "segments", "in_place_offset")
SOURCE_FINGERPRINT_KEYS = FINGERPRINT_KEYS + ("rule", "value", "records_per_epoch")



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
        # Not the loader itself: the loader holds the DataLoader that holds this, and a cycle
        # would keep a loader dropped without close() (its read-ahead thread, its batches and
        # its files) until the cycle collector runs.
        self._loader = weakref.ref(loader)

    @property
    def loader(self) -> Loader:
        loader = self._loader()
        if loader is None:
            raise RuntimeError("the blockfs Loader of this DataLoader is gone")
        return loader

    def __iter__(self) -> Iterator[Key]:
        return self.loader._keys()  # a generator over the values of now

    def __len__(self) -> int:
        return self.loader.__len__()


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


def _same_order_version(saved: Dict[str, Any], facts: Dict[str, Any]) -> Dict[str, Any]:
    """saved, with its order_version taken as the mount's where the mount's order is also that
    version's (info.json's order.versions: versions 1 and 2 give the same order wherever no
    window is large). A state saved before order versions existed was taken in version 1."""
    here = facts.get("order_version")
    versions = (facts.get("order") or {}).get("versions") or [here]
    if here is None:
        return saved
    if saved.get("order_version", 1) in versions:
        return dict(saved, order_version=here)
    return dict(saved, order_version=saved.get("order_version", 1))


def _version_hint(saved: Dict[str, Any], here: Dict[str, Any]) -> str:
    """How to resume a state refused for its order version (its own, or a mixture source's):
    mount in that version. Empty when the versions agree."""
    def sources(fp: Dict[str, Any]) -> List[Any]:
        s = fp.get("sources")
        return s if isinstance(s, list) else []
    for s, h in [(saved, here)] + list(zip(sources(saved), sources(here))):
        if isinstance(s, dict) and isinstance(h, dict) and s.get("order_version", 1) != h.get("order_version", 1):
            v = s.get("order_version", 1)
            return (f" (the state is of order version {v}: mount with --order-version {v},"
                    f" blockfs.Mount(..., order_version={v}), to resume in its order)")
    return ""


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
    n = int(v)
    if not lo <= n <= hi:
        raise ValueError(f"loader state {key} {n} is out of range ({lo} to {hi})")
    return n


def _epoch(value: Any) -> int:
    """value as an epoch number: a whole number from 0 (an int, a numpy integer); 1.5 or "1"
    is a TypeError, -1 a ValueError, rather than another epoch than meant."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"epoch {value!r}: an epoch is a whole number (0, 1, ...)")
    if value < 0:
        raise ValueError(f"epoch {value}: epochs count from 0")
    return int(value)


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
    as many workers as spare cores (docs/USAGE.md, bench/workers_bench.py). With num_workers=0
    a thread of this process reads the next batches while the trainer computes on this one
    (prefetch_factor of them, default 2; reads release the GIL), so a step whose data takes as
    long to read as the step to compute is not slowed by half; at an epoch's end it goes on
    into the next epoch's first batches (dropped if another epoch or position comes next).

    device (e.g. "cuda", "cuda:1"): every tensor of a batch is yielded on that device. On a
    CUDA device the batches are pinned (pin_memory is implied) and copied on a stream of the
    loader's own, the next batch's copy issued before this batch is yielded, so the copy runs
    while the trainer computes (the trainer's stream waits for a batch's copy before using it);
    the saved position counts a batch once it is yielded. Without device a batch is in host
    memory and its copy, x.to("cuda"), is on the trainer's stream, before the step.

    shm: how batches are read. Where the mount offers its shared-memory path (docs/SHM.md; the
    default of blockfs mount), the daemon copies each batch from its cache straight into a
    buffer of this process, and the batch's tensor is that buffer: no FUSE request and no copy
    here. The buffers are reused batch after batch (kept by the process for every loader of
    the mount); a batch kept by the trainer keeps its part of them, and more are made as
    needed. None (the default) uses the path where the mount offers it and reads the files
    otherwise, saying so once (RuntimeWarning); True requires it (blockfs.ShmUnavailable says
    why not); False, or BLOCKFS_SHM=0 in the environment, reads the files. The bytes are the
    files' either way; a failed read raises OSError with the daemon's reason.

    On a node-aware mount (blockfs.Mount(..., nodes=N), docs/USAGE.md "Many nodes") each node
    reads its own epoch file, and the loader's position is in the whole epoch: a step takes
    batch_size x world_size of its positions, of which this node's are a run of its own epoch
    cut among its local_world_size ranks (default $LOCAL_WORLD_SIZE, else world_size / N;
    local rank = rank mod local_world_size). While every canonical part has records left, every
    rank gets batch_size records a step; past that (the last records of the larger parts) a
    rank's batches may be smaller or absent. A state saved at N nodes resumes at any node count
    that divides the parts, each record of the epoch once. With drop_last the epoch ends where
    the first part runs out, so every rank gets batch_size every step (DDP needs as much).

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
                 local_world_size: Optional[int] = None, shm: Optional[bool] = None, device: Any = None) -> None:
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
            records = self.info.get("dataset_records", self.info["records"])  # a node's mount: the whole data's
            if len(labels) < records and "window" not in self.info:
                raise ValueError(f"labels has {len(labels)} entries; the dataset has {records} records")
        self.epoch, self.position = _epoch(epoch), 0
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
        elif prefetch_factor is not None and int(prefetch_factor) < 1:
            raise ValueError(f"prefetch_factor {prefetch_factor!r}: need at least 1")
        self.device = check_device(device)
        # In this process (workers send arrays, not tensors); a CUDA device's copies need it.
        self.pin_memory = bool(pin_memory) or (self.device is not None and self.device.type == "cuda")
        if decode_ids and decode is None:
            raise ValueError("decode_ids=True needs a decode function (it is called as decode(records, ids))")
        self._batches = _Batches(self.path, self.info, labels, decode, bool(decode_ids), self.fields,
                                 None if shm is None else bool(shm))
        # With num_workers=0 a thread of this process reads this many batches ahead of the
        # trainer (prefetch_factor's meaning for a worker).
        self._ahead = max(1, int(prefetch_factor)) if prefetch_factor is not None else PREFETCH
        self._loader_options: Dict[str, Any] = dict(num_workers=num_workers, timeout=timeout,
                                                    worker_init_fn=worker_init_fn, **kw)
        self._loader: Optional[DataLoader[Batch]] = None
        self._running: weakref.WeakSet[Generator[Any, None, None]] = weakref.WeakSet()
        self._carried: Optional[_ReadAhead] = None  # the last epoch's thread, in the next epoch
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
                which = ", ".join(repr(n) + near_hint(n, list(by_name)) for n in unknown)
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
        e = self.epoch if epoch is None else _epoch(epoch)
        if self._nodes is not None:
            return self._nodes.total  # positions of the whole epoch, every node's
        n = self._lengths.get(e)
        if n is None:
            n = records_of(self.info, self.path, e)
            if len(self._lengths) >= 4:
                self._lengths.clear()
            self._lengths[e] = n
        return n

    def _keys(self, epoch: Optional[int] = None, position: Optional[int] = None) -> Iterator[Key]:
        """This rank's batch keys of epoch (default the loader's) from position (default the
        loader's)."""
        e = self.epoch if epoch is None else epoch
        p = self.position if position is None else position
        if self._nodes is not None:
            return node_keys(e, self._nodes, p, self.batch_size, self.local_rank, self.local_world_size,
                             self.world_size, self.drop_last)
        return batch_keys(e, self.epoch_records(e), p, self.batch_size, self.rank, self.world_size, self.drop_last)

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

    def _batches_read(self) -> Iterator[Batch]:
        """The batches of the rest of the epoch as made: by the workers, or, with
        num_workers=0, by a thread of this process that reads ahead of the trainer."""
        if self.num_workers > 0:
            return iter(self._data_loader())
        carried, self._carried = self._carried, None
        if carried is not None:
            if carried.epoch == self.epoch and self.position == 0:
                return carried
            carried.stop()  # another epoch or position was chosen: its batches are not these
        me = weakref.ref(self)  # the thread does not keep the loader alive

        def then(epoch: int) -> Optional[List[Key]]:
            loader = me()
            return None if loader is None else loader._next_keys(epoch)
        return _ReadAhead(self._batches, list(self._keys()), self._ahead, self.pin_memory, self.epoch, then)

    def _next_keys(self, epoch: int) -> Optional[List[Key]]:
        """The keys of epoch from its start, which the read-ahead thread goes on to once the
        epoch before it is read; None where they cannot be known (it then stops there: the
        next iteration starts a thread of its own, which says why)."""
        try:
            return list(self._keys(epoch, 0))
        except Exception:
            return None

    def _iterate(self) -> Generator[Any, None, None]:
        epoch = self.epoch
        start, before = time.perf_counter(), self._reads["seconds"]
        batches = self._batches_read()
        done = False
        try:
            yield from self._deliver(batches, epoch, start, before)
            done = True
        finally:
            if isinstance(batches, _ReadAhead):
                if done and batches.more:
                    # The epoch ended: its thread is reading the next epoch's first batches,
                    # which the next iteration takes if it is of that epoch from its start.
                    batches.epoch = epoch + 1
                    if self._carried is not None:  # another iteration's, ended before
                        self._carried.stop(wait=False)
                    self._carried = batches
                else:
                    batches.stop()

    def _deliver(self, batches: Iterator[Batch], epoch: int, start: float, before: float) -> Generator[Any, None, None]:
        made: Iterator[Tuple[Any, Any]] = self._made(batches)
        if self.device is not None:
            made = on_device(made, self.device)
        for out, (position, read_s, busy_s) in made:
            if self.epoch != epoch:
                raise RuntimeError("set_epoch or load_state_dict was called during an iteration")
            self.position = position  # as the trainer gets the batch: a state saved now resumes after it
            r = self._reads
            r["batches"] += 1
            r["read_seconds"] += read_s
            r["batch_seconds"] += busy_s
            r["seconds"] = before + time.perf_counter() - start
            yield out
        self.epoch, self.position = epoch + 1, 0

    def _made(self, batches: Iterator[Batch]) -> Iterator[Tuple[Any, Any]]:
        """(the batch's tensors, its accounting) for each batch."""
        if isinstance(batches, _ReadAhead):
            return ((b[0], b[-1]) for b in batches)  # made into tensors (and pinned) by the thread
        return ((_as_tensors(b, self.fields is not None, self.pin_memory), b[-1]) for b in batches)

    def close(self) -> None:
        """Stops persistent workers now (they otherwise stop when the loader is collected): the
        loader ends its iterations in progress and lets go of its DataLoader, whose iterator torch
        shuts down, workers and all, when it is collected; a later iteration starts a new one.
        It also closes the files it read with num_workers=0, so the mount can go."""
        for it in list(self._running):
            it.close()
        if self._carried is not None:
            self._carried.stop()
            self._carried = None
        self._loader = None
        self._batches.close_files()

    def __del__(self) -> None:
        carried = getattr(self, "_carried", None)
        if carried is not None:  # its thread would wait with its batches for an iteration to come
            carried.stop(wait=False)

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_epoch(self, epoch: int) -> None:
        """Selects epoch to iterate next, from its start (or, if the loader is already in that
        epoch, from where it is: a resumed position is kept)."""
        if _epoch(epoch) != self.epoch:
            self.epoch, self.position = _epoch(epoch), 0

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
        saved = dict(_same_order_version(saved, self.info))
        if isinstance(saved.get("sources"), list) and is_mixture(self.info):
            saved["sources"] = [_same_order_version(s, f) if isinstance(s, dict) else s
                                for s, f in zip(saved["sources"], self.info["sources"])] + saved["sources"][len(self.info["sources"]):]
        diff = [f"{k} {saved.get(k)!r} in the state, {here.get(k)!r} in this mount"
                for k in sorted(set(saved) | set(here)) if saved.get(k) != here.get(k)]
        if diff:
            raise ValueError("the loader state is from other data or options: " + "; ".join(diff) + _version_hint(saved, here))
        epoch = _state_int(state, "epoch", 0, 2**64 - 1)
        position = _state_int(state, "position", 0, self.epoch_records(epoch))
        self.epoch, self.position = epoch, position
