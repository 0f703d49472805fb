"""The files the package reads because a user named them or a folder holds them (a mount's
.blockfs/info.json, a names file, a labels file, a mixture file): none may hang or flood the
reader, whoever made them, as the binary's internal/userfile has it for its own.

Each is opened without waiting (O_NONBLOCK: a FIFO would wait for a writer; O_NOCTTY: a terminal
does not become the process's), checked with fstat on the descriptor opened (not on the path
before it) to be a regular file, and, where its caller states a bound, read no further than it.
Anyone who can write a folder that is not a mount can plant a FIFO or /dev/zero where one of
these is looked for.
"""
from __future__ import annotations

import io
import os
import stat

_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def kind_of(mode: int) -> str:
    """What a file of st_mode mode is, in words ("a named pipe (FIFO)")."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((words for test, words in _KINDS if test(mode)), "a special file")


def open_fd(path: str, flags: int = os.O_RDONLY) -> int:
    """A descriptor of path opened with flags (O_CLOEXEC added), without waiting on it. Raises
    ValueError, naming path and what it is, for anything but a regular file (a FIFO, a device,
    a socket, a directory); an OSError of the open as it is (FileNotFoundError, PermissionError,
    EINVAL for an O_DIRECT the filesystem refuses). The descriptor blocks as any does (O_NONBLOCK
    is cleared once it is known to be regular)."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{path} is {kind_of(mode)}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str) -> io.BufferedReader:
    """path opened for reading (binary, buffered), without waiting on it: open_fd's checks and
    errors."""
    raw = io.FileIO(open_fd(path), "rb")  # owns the descriptor from here
    try:
        return io.BufferedReader(raw)
    except BaseException:
        raw.close()
        raise


def read_bounded(path: str, limit: int) -> bytes:
    """The whole of the regular file at path, of at most limit bytes. Raises ValueError, naming
    path and what is wrong, for a file that is not regular (open_regular), that holds more than
    limit bytes, or that grows past limit while it is read."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise ValueError(f"{path} holds {size} bytes, more than the {_size(limit)} such a file may")
        body = f.read(limit + 1)  # one byte more tells a file that grew
    if len(body) > limit:
        raise ValueError(f"{path} grew past {_size(limit)} while it was read")
    return body


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n and not n % (1 << 20) else f"{n} bytes"
