"""Mount a dataset from Python: one mount per node, shared by every local process using it."""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from typing import Any, Dict, List, Optional, Union

from ._files import mount_path, read_info
from ._types import Info, MountPath


class MountError(RuntimeError):
    """blockfs could not mount, or could not unmount: the message is blockfs's own line."""


from ._binary import binary  # noqa: E402  (its lookup order is _binary.py's)


def runtime_dir() -> str:
    """Where Mount keeps its lock files and default mountpoints: $BLOCKFS_RUNTIME_DIR, else
    /tmp/blockfs-UID (created 0700)."""
    d = os.environ.get("BLOCKFS_RUNTIME_DIR") or os.path.join("/tmp", f"blockfs-{os.getuid()}")
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _flags(options: Dict[str, Any]) -> List[str]:
    """Command-line flags from keyword options: cache_size="1GiB" is --cache-size=1GiB, a True
    value is a bare flag, False and None leave the flag out."""
    out = []
    for k in sorted(options):
        v = options[k]
        flag = "--" + k.replace("_", "-")
        if v is None or v is False:
            continue
        out.append(flag if v is True else f"{flag}={v}")
    return out


def is_mounted(path: Union[str, "os.PathLike[str]"]) -> bool:
    """Whether path is a mountpoint (of anything), also a stale one: os.path.ismount, and a
    FUSE mount whose daemon has died, which answers stat with ENOTCONN (ismount calls that no
    mountpoint)."""
    real = os.path.realpath(path)
    if _stale(real):
        return True
    return os.path.ismount(real)


def _stale(path: str) -> bool:
    """Whether the mount at path has lost its daemon (its root answers ENOTCONN)."""
    try:
        os.lstat(path)
    except OSError as e:
        return e.errno == errno.ENOTCONN
    return False


class _Lock:
    """An exclusive flock on a lock file, held while in a with block. The holder may unlink the
    file: a waiter that then gets the lock of the unlinked file tries again on a new one."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> _Lock:
        while True:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                    return self
            except FileNotFoundError:
                pass
            os.close(self.fd)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


class Mount:
    """A blockfs mount for the life of a with block (or from open() to close()).

        with blockfs.Mount("/data/train", seed=1, cache_size="4GiB") as m:
            m.path   # the mountpoint
            m.info   # its .blockfs/info.json

    data is a dataset directory, a file served in place (with record_size=... or window=...),
    or an s3:// URL. Keyword options are blockfs mount's flags with '_' for '-'. It runs
    `blockfs mount --daemon` (the binary from $BLOCKFS_BIN or PATH) and unmounts on exit, also
    after an exception.

    Without a mountpoint, the mountpoint is a directory under /tmp/blockfs-UID named after
    data and the options, so every process of a node that asks for the same mount (the local
    ranks of a torchrun job) gets the same one: the first mounts, the others attach, and the
    mount stays until the last of them leaves. Each user holds a shared lock on a file beside
    it; a process that dies releases its lock with it, so a crashed owner leaves nothing that
    blocks the next run: a mount that nobody holds is unmounted and mounted afresh.
    """

    def __init__(self, data: Union[str, "os.PathLike[str]"], mountpoint: Optional[Union[str, "os.PathLike[str]"]] = None,
                 **options: Any) -> None:
        self.data: str = str(data) if "://" in str(data) else os.path.abspath(os.fspath(data))
        self.options = dict(options)
        if mountpoint is None:
            mountpoint = os.path.join(runtime_dir(), "mnt-" + _digest(self.data, _flags(self.options)))
            self._made_dir = True
        else:
            self._made_dir = False
        self.path = os.path.abspath(os.fspath(mountpoint))
        self.info: Optional[Info] = None
        self.owner = False  # whether this process mounted it
        self._users: Optional[int] = None  # fd holding a shared lock while this process uses the mount
        self._pid: Optional[int] = None
        self._attached = False
        lock = os.path.join(runtime_dir(), "lock-" + _digest(self.path))
        self._setup_lock, self._users_lock = lock + ".setup", lock + ".users"

    def __enter__(self) -> Mount:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"blockfs.Mount({self.data!r} at {self.path!r})"

    def open(self) -> Mount:
        """Mounts data, or attaches to the mount another local process made of it."""
        if self._users is not None or self._attached:
            return self
        os.makedirs(self.path, exist_ok=True)
        with _Lock(self._setup_lock):
            users = os.open(self._users_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                if is_mounted(self.path) and not self._in_use(users):
                    # Nobody holds it: left by a process that died (start afresh), or mounted
                    # by hand (not ours to replace).
                    if not os.fstat(users).st_size and not _stale(self.path):
                        raise MountError(f"{self.path} is already mounted, not by blockfs.Mount: unmount it (blockfs unmount {self.path}) or use blockfs.attach")
                    self._unmount()
                if not is_mounted(self.path):
                    self._mount()
                    self.owner = True
                    os.ftruncate(users, 0)
                    os.pwrite(users, json.dumps({"data": str(self.data), "flags": _flags(self.options)}).encode(), 0)
                fcntl.flock(users, fcntl.LOCK_SH)
                self.info = read_info(self.path)
            except BaseException:
                if not self._in_use(users):
                    if self.owner:
                        self._unmount()
                    self._forget(users)
                os.close(users)
                raise
            self._users, self._pid = users, os.getpid()
        return self

    def close(self) -> None:
        """Stops using the mount; the last local process to stop unmounts it."""
        if self._users is None or self._pid != os.getpid():
            return  # not open, or a forked child (a DataLoader worker) of the process that is
        with _Lock(self._setup_lock):
            fcntl.flock(self._users, fcntl.LOCK_UN)
            try:
                if not self._in_use(self._users):
                    if is_mounted(self.path):
                        self._unmount()
                    self._forget(self._users)
            finally:
                os.close(self._users)
                self._users = None

    def _forget(self, users: int) -> None:
        """Removes what the last user leaves: the lock files and a default mountpoint (call
        with the setup lock held and the mount gone)."""
        os.ftruncate(users, 0)
        for p in (self._users_lock, self._setup_lock) + ((self.path,) if self._made_dir else ()):
            try:
                (os.rmdir if p == self.path else os.unlink)(p)
            except OSError:
                pass

    @staticmethod
    def _in_use(fd: int) -> bool:
        """Whether another process holds the users lock (call with the setup lock held)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    def _mount(self) -> None:
        cmd = [binary(), "mount", "--daemon"] + _flags(self.options) + [str(self.data), self.path]
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if p.returncode != 0:
            lines = (p.stderr or p.stdout).strip().splitlines() or [f"exit status {p.returncode}"]
            raise MountError(lines[-1])

    def _unmount(self) -> None:
        """Unmounts (also a stale mount of a killed daemon), and waits until it is gone."""
        b = binary()
        p = subprocess.run([b, "unmount", self.path], capture_output=True, text=True)
        if p.returncode != 0 and is_mounted(self.path):
            # Files still open (a reader that outlived its loader): detach now; the daemon
            # exits once they close.
            p = subprocess.run([b, "unmount", "--lazy", self.path], capture_output=True, text=True)
            if p.returncode != 0 and is_mounted(self.path):
                raise MountError((p.stderr or p.stdout).strip() or f"cannot unmount {self.path}")
        for _ in range(200):
            if not is_mounted(self.path):
                return
            time.sleep(0.01)


def attach(path: MountPath) -> Mount:
    """An existing mount at path, for reading (its .path and .info); closing it unmounts
    nothing."""
    p = os.path.abspath(mount_path(path))
    info = read_info(p)
    m = Mount(info.get("in_place") or info.get("dataset") or p, p)
    m.info, m._attached = info, True
    return m
