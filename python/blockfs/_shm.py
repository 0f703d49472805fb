"""The shared-memory read path (docs/SHM.md): a process maps buffers of its own into the mount's
daemon over a Unix socket and asks for byte ranges of the mount's files; the daemon copies
them from its cache straight into those buffers. No FUSE request, no copy in this process: a
batch read this way is an array over the buffer, handed to the trainer as it is.

Channel is one process's connection. Its buffers are memfds (arenas) cut into regions, one a
read; a region is free again once every array over it is gone (a finalizer on the array's
base), so a trainer may keep a batch as long as it likes: the arena then grows, up to a bound,
and past it reads fall back to the file."""
from __future__ import annotations

import collections
import ctypes
import errno as errno_mod
import fcntl
import mmap
import os
import socket
import struct
import threading
import time
import warnings
import weakref
from typing import Any, Deque, Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

from ._mountinfo import blockfs_owner

MAGIC = 0x31534642  # "BFS1"
OP_MAP, OP_UNMAP, OP_READ, OP_HELLO = 1, 2, 3, 4
REQUEST = struct.Struct("<IIIIQQQ")  # magic, op, buffer, path length, a, b, c
REPLY = struct.Struct("<IIQ")  # magic, errno, n
MAX_PACKET = 4096

# Arenas: each holds ARENA_READS reads of the size asked for (and at least MIN_ARENA bytes);
# at most MAX_ARENAS for large reads at once, and MAX_ARENA_BYTES each (the daemon's bounds are
# larger). Each is touched whole when made (zeroed by the kernel, as a new array is), so they
# are made as reads need them, two reads at a time: a short run makes no more than it uses, and
# the first read waits for two reads' worth, not for all a run will hold at once (a batch in
# the trainer's hands, one being read and two read ahead). They last as long as the channel,
# reused read after read; an empty one goes only to make room for reads of a larger size.
ARENA_READS = 2
MIN_ARENA = 4 << 20
# Reads of at most SMALL_READ bytes (a batch's ids, offsets, a small field) come from arenas of
# their own, MIN_ARENA bytes each, at most MAX_SMALL_ARENAS, cut at SMALL_ALIGN: among a batch's
# large regions they would leave gaps no batch fits in.
SMALL_READ = 256 << 10
MAX_SMALL_ARENAS = 2
SMALL_ALIGN = 64
MAX_ARENAS = 6  # for large reads
MAX_ARENA_BYTES = 1 << 30
ALIGN = 4096

# How long a new connection waits for the daemon to take it and answer its hello (seconds).
HELLO_TIMEOUT = 30.0
# How long reads use the files after the daemon said it maps as many buffers as it may (seconds).
FULL_WAIT = 5.0

# The environment variable that turns the path off for every Loader of a process ("0").
ENV = "BLOCKFS_SHM"

_warned: set[str] = set()


class ShmUnavailable(OSError):
    """The mount offers no shared-memory path here (an older daemon, --no-shm, another network
    namespace, a daemon of another user): the reason, to say once before using the files."""


def warn_once(reason: str) -> None:
    """Says once per process, per reason, that reads go through the files."""
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"blockfs: reading through the mount's files, not shared memory: {reason}", RuntimeWarning,
                      stacklevel=3)


class _Lease:
    """The base of an array over a region of an arena: the region is free again when the last
    array over it (and so this) is gone."""

    __slots__ = ("__array_interface__", "__weakref__")

    def __init__(self, address: int, n: int) -> None:
        self.__array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (address, False), "version": 3}


class _Arena:
    """One memfd mapped here and in the daemon as buffer `id`, and its live regions, cut at
    multiples of align."""

    def __init__(self, sock: socket.socket, sock_lock: threading.Lock, bid: int, size: int,
                 align: int = ALIGN) -> None:
        self.id, self.size, self.align = bid, size, align
        fd = os.memfd_create(f"blockfs-shm-{bid}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            # Every page made now (posix_fallocate lets the trainer's thread run meanwhile; a
            # loop touching the pages would hold the GIL), then written as it is mapped
            # (_map_filled): this process's memory (its cgroup's), not the daemon's, which maps
            # only a buffer whose pages are all written.
            os.posix_fallocate(fd, 0, size)
            # F_SEAL_SEAL is the daemon's to add: it seals the buffer against future writers
            # once it has mapped it, so that no one can punch holes in it (docs/SHM.md).
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            self.mm, self.base = _map_filled(fd, size)
            with sock_lock:  # only now: reads into other arenas go on while this one is made
                _exchange(sock, _packet(OP_MAP, bid, size, 0, 0, b""), [fd])
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        self.live: Dict[int, int] = {}  # start -> end of each region in use

    def alloc(self, n: int) -> Optional[int]:
        """The start of a free region of n bytes (first fit), now in use; None if none is."""
        n = max(self.align, (n + self.align - 1) // self.align * self.align)
        prev = 0
        for s, e in sorted(self.live.items()):
            if s - prev >= n:
                break
            prev = e
        else:
            if self.size - prev < n:
                return None
        self.live[prev] = prev + n
        return prev


# madvise(2), called with the GIL let go (ctypes does for a CDLL's functions), and its
# MADV_POPULATE_WRITE (Linux 5.14); _populate_write is cleared once the kernel refuses it, and
# is False from the start in a Python whose C library ctypes cannot reach (a static build).
MADV_POPULATE_WRITE = 23
try:
    _madvise: Any = ctypes.CDLL(None, use_errno=True).madvise
    _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _madvise.restype = ctypes.c_int
except (OSError, AttributeError):
    _madvise = None
_populate_write = _madvise is not None


def _map_filled(fd: int, size: int) -> Tuple[mmap.mmap, int]:
    """The memfd fd's first size bytes (allocated already) mapped shared here with the page
    tables filled, and the mapping's address: reading a batch whose pages fault in one at a
    time takes several times as long. madvise(MADV_POPULATE_WRITE) fills them in one call
    (75 MiB on the 2-core machine: 38-39 ms with posix_fallocate's, against 49-50 with
    MAP_POPULATE); where the kernel refuses it, MAP_POPULATE, whose faults write (zero) each
    page as the daemon requires (docs/SHM.md), or on Python 3.9, which lacks it, a memset."""
    global _populate_write
    if _populate_write:
        mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
        base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        if _madvise(base, size, MADV_POPULATE_WRITE) == 0:
            return mm, base
        if ctypes.get_errno() == errno_mod.EINVAL:
            _populate_write = False
        mm.close()
    mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    if not hasattr(mmap, "MAP_POPULATE"):  # Python 3.9: the daemon maps only pages written
        ctypes.memset(base, 0, size)
    return mm, base


class Channel:
    """One process's shared-memory connection to the daemon of the mount at path, whose
    info.json is info. Raises ShmUnavailable when the mount offers none that this process can
    use. Safe for use from several threads (the Loader's reading thread and the trainer's)."""

    def __init__(self, path: str, info: Dict[str, Any]) -> None:
        addr = info.get("shm_socket")
        if not isinstance(addr, str) or not addr.startswith("@"):
            raise ShmUnavailable("the daemon offers none (mounted by an older blockfs, with the path off, or on a kernel "
                                 "before Linux 5.1, which cannot seal its buffers)")
        # The daemon to trust is the one whose FUSE mount is at path: a socket that info.json in a
        # plain folder names could be anyone's, and would be handed this process's buffers. Its
        # uid is the one that made the mount, as mountinfo gives it, or the one its files are
        # of, as this process's user namespace sees it (a trainer in a namespace of its own).
        made_by = blockfs_owner(path)
        if made_by is not None and made_by < 0:
            raise ShmUnavailable(f"{path} is no blockfs mount (/proc/self/mountinfo lists none there), so the "
                                 f"socket its info.json names is not trusted")
        owners = {os.stat(path).st_uid} | ({made_by} if made_by is not None else set())
        self.path = path
        self.pid = os.getpid()
        self.sock = _connect(addr)
        pid, uid, _ = struct.unpack("3i", self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid not in owners:
            self.sock.close()
            raise ShmUnavailable(f"the socket {addr} is served by uid {uid}, not by the mount's daemon "
                                 f"(uid {' or '.join(map(str, sorted(owners)))})")
        self.daemon_pid = pid
        try:
            _exchange(self.sock, _packet(OP_HELLO, 0, 0, 0, 0, b""), None)
        except socket.timeout as e:
            self.sock.close()
            raise ShmUnavailable(f"the daemon did not answer on {addr} within {HELLO_TIMEOUT:g} s") from e
        except OSError as e:
            self.sock.close()
            raise ShmUnavailable(f"the daemon refuses this process: {e.strerror}") from e
        self.sock.settimeout(None)  # a read may wait as long as the store takes (its own bounds)
        # Lock order: arenas, then sock. A region's finalizer may run inside either (at any
        # allocation, in any thread), so it takes neither: it queues the region in freed.
        self.arenas_lock = threading.Lock()
        self.sock_lock = threading.Lock()
        self.arenas: List[_Arena] = []  # for large reads
        self.small: List[_Arena] = []  # for reads of at most SMALL_READ bytes
        self.freed: Deque[Tuple[_Arena, int]] = collections.deque()
        self.next_id = 0
        self.fallbacks = 0  # reads that found no room in the arenas and used the file
        self.broken = False  # the connection failed: the daemon is gone
        self.refused = False  # the daemon refused a buffer: every read uses the files
        self.full_until = 0.0  # until then (time.monotonic()) reads use the files: the daemon was full

    def close(self) -> None:
        """Closes the connection; the daemon unmaps its side of the buffers. Arrays over them
        stay valid (the mappings here go with the last array over them)."""
        if self.pid == os.getpid():
            self.sock.close()

    def _region(self, n: int) -> Optional[Tuple[_Arena, int]]:
        if self.refused or time.monotonic() < self.full_until:
            return None
        try:
            return self._region_of(n)
        except DaemonGone:
            raise
        except OSError as e:
            if e.errno == errno_mod.ENOSPC:
                # The daemon maps as many buffers as it may (its clients' together): this read,
                # and the next for FULL_WAIT seconds, use the files; then a buffer is asked again.
                self.full_until = time.monotonic() + FULL_WAIT
                warn_once("the daemon maps as many clients' buffers as it may; reads use the files until it has room")
                return None
            # A daemon that refuses this process's buffers (one that cannot seal them, or a
            # protocol this client does not speak): the files serve the same bytes.
            self.refused = True
            warn_once(f"the daemon refused a buffer ({e.strerror or e})")
            return None

    def _region_of(self, n: int) -> Optional[Tuple[_Arena, int]]:
        with self.arenas_lock:
            while self.freed:
                done, start = self.freed.popleft()
                done.live.pop(start, None)
            if n <= SMALL_READ:
                return self._small_region(n)
            for a in self.arenas:
                found = a.alloc(n)
                if found is not None:
                    return a, found
            size = min(MAX_ARENA_BYTES, max(MIN_ARENA, ARENA_READS * n))
            if n > size:
                return None
            if len(self.arenas) >= MAX_ARENAS:
                # Room for a larger read: an arena no region is in use in goes.
                empty = [a for a in self.arenas if not a.live]
                if not empty:
                    return None
                a = min(empty, key=lambda a: a.size)
                self.arenas.remove(a)
                with self.sock_lock:
                    _exchange(self.sock, _packet(OP_UNMAP, a.id, 0, 0, 0, b""), None)
            size = (size + ALIGN - 1) // ALIGN * ALIGN
            a = _Arena(self.sock, self.sock_lock, self.next_id, size)
            self.next_id += 1
            self.arenas.append(a)
            first = a.alloc(n)
            assert first is not None
            return a, first

    def _small_region(self, n: int) -> Optional[Tuple[_Arena, int]]:
        """_region for a small read (arenas_lock held)."""
        for a in self.small:
            found = a.alloc(n)
            if found is not None:
                return a, found
        if len(self.small) >= MAX_SMALL_ARENAS:
            return None
        a = _Arena(self.sock, self.sock_lock, self.next_id, MIN_ARENA, SMALL_ALIGN)
        self.next_id += 1
        self.small.append(a)
        first = a.alloc(n)
        assert first is not None
        return a, first

    def read(self, name: str, off: int, n: int) -> Optional[npt.NDArray[np.uint8]]:
        """n bytes of the mount's file name (relative to the mount) from off, as a uint8 array
        over a region of an arena (fewer at the file's end); None when the arenas have no room
        (the caller reads the file). OSError with the daemon's reason when the read fails."""
        got = self._region(n)
        if got is None:
            self.fallbacks += 1
            return None
        a, at = got
        try:
            with self.sock_lock:
                k = _exchange(self.sock, _packet(OP_READ, a.id, at, off, n, os.fsencode(name)), None)
        except BaseException as e:
            self.freed.append((a, at))
            if isinstance(e, DaemonGone):
                self.broken = True
            raise
        lease = _Lease(a.base + at, k)
        weakref.finalize(lease, self.freed.append, (a, at))
        return np.asarray(lease)


_channels: Dict[Tuple[str, str], Channel] = {}
_channels_lock = threading.Lock()


def channel(path: str, info: Dict[str, Any]) -> Channel:
    """This process's channel to the daemon of the mount at path (info its info.json), shared
    by every reader of the mount in the process, so that its buffers serve epoch after epoch;
    a new one once the last failed (the daemon gone: remounted) or after a fork. Raises
    ShmUnavailable as Channel does."""
    key = (os.path.realpath(path), str(info.get("shm_socket")))
    with _channels_lock:
        ch = _channels.get(key)
        if ch is None or ch.pid != os.getpid() or ch.broken:
            ch = _channels[key] = Channel(path, info)
        return ch


def _forget_after_fork() -> None:
    """In a forked child: the parent's channels are the parent's (a child that kept their
    sockets open would keep the parent's connections, and its buffers in the daemon, alive
    after the parent died), and a lock a parent thread held at the fork would never be let go."""
    global _channels_lock
    for ch in _channels.values():
        try:
            ch.sock.close()
        except OSError:
            pass
    _channels.clear()
    _channels_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def _connect(addr: str) -> socket.socket:
    """A connection to the daemon's socket addr ("@name"), which waits for room in the
    daemon's queue of new connections at most HELLO_TIMEOUT and is left with that timeout.
    Raises ShmUnavailable."""
    deadline = time.monotonic() + HELLO_TIMEOUT
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        s.settimeout(HELLO_TIMEOUT)
        try:
            s.connect("\0" + addr[1:])
            return s
        except (BlockingIOError, socket.timeout) as e:  # the queue full (EAGAIN: not waited on)
            s.close()
            if isinstance(e, socket.timeout) or time.monotonic() > deadline:
                raise ShmUnavailable(f"the daemon's socket {addr} did not take the connection within "
                                     f"{HELLO_TIMEOUT:g} s") from e
            time.sleep(0.01)
        except OSError as e:
            s.close()
            raise ShmUnavailable(f"cannot reach the daemon's socket {addr} ({e.strerror or e}; "
                                 "another network namespace?)") from e


def _packet(op: int, bid: int, a: int, b: int, c: int, path: bytes) -> bytes:
    return REQUEST.pack(MAGIC, op, bid, len(path), a, b, c) + path


class DaemonGone(OSError):
    """The daemon closed the connection: it has exited (the mount is gone or going)."""


def _exchange(sock: socket.socket, pkt: bytes, fds: Optional[List[int]]) -> int:
    try:
        if fds:
            sock.sendmsg([pkt], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))])
        else:
            sock.send(pkt)
        rep = sock.recv(MAX_PACKET)
    except (BrokenPipeError, ConnectionResetError) as e:
        raise DaemonGone(errno_mod.EIO, "blockfs: the mount's daemon is gone (its shared-memory connection closed); "
                                     "remount, or see its log (info.json's \"log\")") from e
    if len(rep) < REPLY.size:
        raise DaemonGone(errno_mod.EIO, "blockfs: the mount's daemon is gone (its shared-memory connection closed); "
                                     "remount, or see its log (info.json's \"log\")")
    magic, err, n = REPLY.unpack_from(rep)
    if magic != MAGIC:
        raise OSError(errno_mod.EIO, f"blockfs: a reply of the shared-memory path with magic {magic:#x}")
    if err:
        raise OSError(err, f"{os.strerror(err)}: {rep[REPLY.size:].decode(errors='replace')}")
    return int(n)
