"""The read-ahead thread of a Loader with num_workers=0: the next batches made while the
trainer computes on this one, and at an epoch's end the next epoch's first ones."""
from __future__ import annotations

import atexit
import queue
import threading
import weakref
from typing import Any, Callable, List, Optional

import torch

from ._batches import Batch, Key, _Batches, _pinned, _tensor, _tensors

# Batches a Loader with num_workers=0 reads ahead of the trainer.
PREFETCH = 2

# How long the interpreter's exit waits for a read-ahead thread to finish the batch it makes.
EXIT_WAIT = 10.0

_running: "weakref.WeakSet[_ReadAhead]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """Stops every read-ahead thread before the interpreter exits: a trainer that ends while
    one is making the next epoch's first batches (it goes on past the epoch's end) would
    otherwise have it inside torch as torch's own state is torn down, and the process abort
    ("terminate called without an active exception", seen with 16 processes on 16 cores)."""
    live = list(_running)
    for r in live:
        r.stop(wait=False)
    for r in live:
        r._thread.join(EXIT_WAIT)


def _as_tensors(batch: Batch, fields: bool, pin: bool) -> Any:
    """What the loader yields for a batch as made (its last item, the position, left out):
    arrays as tensors, pinned with pin."""
    if fields:
        fout = _tensors(batch[0])
        return _pinned(fout) if pin else fout
    out = tuple(_tensor(x) for x in batch[:-1])
    if pin:
        out = tuple(x.pin_memory() if isinstance(x, torch.Tensor) else x for x in out)
    return out


class _ReadAhead:
    """Makes the batches of keys on a thread, ahead of the trainer by at most `ahead` batches,
    so that a batch is read while the last one is computed on (a read, on the shared-memory
    path or a file, releases the GIL). Iterating yields (tensors, ..., the batch's last item);
    an error making a batch is raised where that batch would have been. Once an epoch's batches
    are made it goes on into the next epoch's (then(epoch) gives its keys from its start, None
    to stop), again at most `ahead` batches ahead, so that an epoch's first batch is not read
    with the accelerator idle: each iteration of the object yields one epoch's batches (epoch
    is the one it yields next). stop ends the thread (at the latest once the batch it is
    making is made) and waits for it."""

    _END = object()

    def __init__(self, batches: _Batches, keys: List[Key], ahead: int, pin: bool, epoch: int,
                 then: Callable[[int], Optional[List[Key]]]) -> None:
        self._q: queue.Queue[Any] = queue.Queue(maxsize=ahead)
        self._stopped = threading.Event()
        self.epoch = epoch
        self.more = False  # whether the thread goes on into the next epoch
        fields = batches.fields is not None

        def run() -> None:
            try:
                part: Optional[List[Key]] = keys
                e = epoch
                while part is not None:
                    for key in part:
                        if self._stopped.is_set():
                            return
                        b = batches[key]
                        self._put((_as_tensors(b, fields, pin), b[-1]))
                    e += 1
                    part = then(e)
                    self.more = part is not None  # known before the epoch's end is seen
                    self._put(self._END)
            except BaseException as e:  # raised in the trainer's thread, where the batch was due
                self._put(e)

        self._thread = threading.Thread(target=run, name="blockfs-readahead", daemon=True)
        self._thread.start()
        _running.add(self)

    def _put(self, item: Any) -> None:
        """Queues item once there is room, unless stop comes first."""
        while not self._stopped.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def __iter__(self) -> _ReadAhead:
        return self

    def __next__(self) -> Batch:
        item = self._q.get()
        if item is self._END:
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        return item  # type: ignore[no-any-return]

    def stop(self, wait: bool = True) -> None:
        self._stopped.set()
        if wait:
            self._thread.join()
