"""A Loader's device= : each batch's tensors copied to the accelerator on a stream of their
own, the next batch's copy issued before this batch is handed to the trainer, so that the copy
runs while the trainer computes instead of before its step."""
from __future__ import annotations

from typing import Any, Iterator, Optional, Tuple

import torch

from ._batches import _map_tensors


def check_device(device: Any) -> Optional[torch.device]:
    """device as a torch.device (None stays None); ValueError, in one line, for a device this
    process cannot use."""
    if device is None:
        return None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device={device!r} is not a torch device ({e})") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r}: torch sees no CUDA device in this process "
                             "(torch.cuda.is_available() is False); leave device unset to get batches in host memory")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r}: this process sees {torch.cuda.device_count()} CUDA devices")
    return dev


Made = Tuple[Any, Any]  # (the batch's tensors, the loader's accounting of it)
Pending = Tuple[Any, Any, Any]  # Made on the device, and the event of its copy


def on_device(made: Iterator[Made], dev: torch.device) -> Iterator[Made]:
    """made's batches with their tensors on dev. On a CUDA device the copies (non-blocking: the
    loader pins the batches) run on a stream of their own, one batch ahead: batch i+1's copy is
    issued before batch i is yielded. The stream the trainer computes on waits for a batch's copy
    before its first use, and the caching allocator keeps the batch's memory until that stream
    is done with it."""
    if dev.type != "cuda":
        for out, meta in made:
            yield _map_tensors(out, lambda t: t.to(dev)), meta
        return
    cuda: Any = torch.cuda  # its streams and events are unannotated in older torch
    stream = cuda.Stream(dev)

    def issue(item: Made) -> Pending:
        out, meta = item
        with cuda.stream(stream):
            moved = _map_tensors(out, lambda t: t.to(dev, non_blocking=True))
        done = cuda.Event()
        done.record(stream)
        return moved, meta, done

    def hand(p: Pending) -> Made:
        moved, meta, done = p
        current = cuda.current_stream(dev)
        current.wait_event(done)
        _map_tensors(moved, lambda t: t.record_stream(current))
        return moved, meta

    pending: Optional[Pending] = None
    for item in made:
        nxt = issue(item)
        if pending is not None:
            yield hand(pending)
        pending = nxt
    if pending is not None:
        yield hand(pending)
