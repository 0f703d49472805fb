"""Mount a dataset from Python: one mount per node, shared by every local process using it."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import subprocess
import time
import warnings
from typing import Any, Dict, Iterator, List, Optional, Set, Union, cast

from ._nodes import node_options
from ._binary import binary
from ._files import mount_path, read_info, tree_of
from ._mountinfo import mountinfo
from .options import flag, flags, schema_of
from ._types import Info, MountPath
from ._userfile import read_bounded


class OrderWarning(UserWarning):
    """The mount's epoch order is far from a uniform shuffle (blockfs mount's warning line)."""


class MountError(RuntimeError):
    """blockfs could not mount, or could not unmount: the message is blockfs's own line."""


def runtime_dir() -> str:
    """Where Mount keeps its lock files and default mountpoints: $BLOCKFS_RUNTIME_DIR, else
    $XDG_RUNTIME_DIR/blockfs where the session has one, else /tmp/blockfs-UID. It is made 0700
    and must be a directory, not a symlink, owned by this user and private: in a shared /tmp
    another user could make it first, and root's Mount would then write through their symlinks
    or wait on their locks. Anything else raises MountError saying what to do."""
    d = os.environ.get("BLOCKFS_RUNTIME_DIR")
    if not d:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        d = os.path.join(xdg, "blockfs") if xdg and not _unsafe(xdg) else os.path.join("/tmp", f"blockfs-{os.getuid()}")
    try:
        with _room(d):
            os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    why = _unsafe(d)
    if why:
        raise MountError(f"{d} cannot hold blockfs.Mount's lock files: {why}; remove it (another user may have made it) "
                         f"or set BLOCKFS_RUNTIME_DIR to a directory of yours that only you can write (mode 0700)")
    return d


# Why a directory cannot take a new file or a write: its filesystem's state, not blockfs's.
_NO_ROOM = {errno.ENOSPC: "its filesystem is full (ENOSPC: no space left on device)",
            errno.EDQUOT: "your disk quota there is used up (EDQUOT)",
            errno.EROFS: "its filesystem is read-only (EROFS)"}


@contextlib.contextmanager
def _room(d: str, what: str = "blockfs.Mount's lock files",
          fix: str = "set BLOCKFS_RUNTIME_DIR to a private directory of yours elsewhere (mode 0700)") -> Iterator[None]:
    """Turns an OSError of a full or read-only filesystem, met writing what in directory d,
    into a MountError naming d, the cause and what to do (fix); other errors pass."""
    try:
        yield
    except OSError as e:
        why = _NO_ROOM.get(e.errno or 0)
        if why is None:
            raise
        raise MountError(f"cannot write {what} in {d}: {why}; free space there, or {fix}") from e


def _unsafe(d: str) -> str:
    """Why directory d is not a private directory of this user, or "" when it is."""
    try:
        st = os.lstat(d)
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISLNK(st.st_mode):
        return "it is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.getuid():
        return f"it belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return f"its mode {stat.S_IMODE(st.st_mode):04o} lets others in"
    return ""


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


# The largest mixture file blockfs mounts (mount/location.go's maxMixtureFile).
MAX_MIXTURE_FILE = 4 << 20


def _mixture_digest(data: str) -> Optional[str]:
    """The digest of a mixture file's content (data a .json file), else None: a mixture edited
    in place (another weight) is another mount, not the one a running job made of the old one.
    Also None for what the mount itself refuses, with its reason: a FIFO or device (opened
    without waiting on it), a file larger than MAX_MIXTURE_FILE."""
    if not data.endswith(".json"):
        return None
    try:
        body = read_bounded(data, MAX_MIXTURE_FILE)
    except (OSError, ValueError):
        return None
    return hashlib.sha256(body).hexdigest()[:16]


# The options Mount gives the binary itself (a keyword may not set them).
_OWN = ("daemon", "users_lock", "remove_mountpoint")


def check_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """Mount's keyword options checked against the options schema of the binary it runs
    (blockfs.options), their values as their flags take them; unchecked where the binary
    publishes no schema (one older than `blockfs options`) or there is no binary yet (open
    says so). Raises TypeError for a keyword that is no option and for a value of the wrong
    kind, ValueError for a value out of range, each naming the option."""
    if not options:
        return options
    try:
        b = binary()
    except FileNotFoundError:
        return options
    schema = schema_of(b)
    return options if schema is None else schema.check(options, reserved=_OWN)


def is_mounted(path: Union[str, "os.PathLike[str]"]) -> bool:
    """Whether path is a mountpoint (of anything), also a stale one or one whose daemon does
    not answer: whether /proc/self/mountinfo lists it. Only the parent's symlinks are resolved
    before it asks; path itself is looked at (is it a symlink?) only once it is not listed, as a
    stat of a mount whose daemon is stopped or hung waits for it."""
    points = _mountpoints()
    if points is None:  # no /proc: os.path.ismount, and a FUSE mount whose daemon has died
        real = os.path.realpath(path)
        return _stale(real) or os.path.ismount(real)
    p = os.path.abspath(os.fspath(path))
    for _ in range(40):  # as many links as the kernel follows
        p = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
        if p in points:
            return True
        if not os.path.islink(p):
            return False
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    return False


def _mountpoints() -> Optional[Set[str]]:
    """The mount points /proc/self/mountinfo lists, or None where it cannot be read."""
    entries = mountinfo()
    return None if entries is None else {e[0] for e in entries}


def _stale(path: str) -> bool:
    """Whether the mount at path has lost its daemon (its root answers ENOTCONN)."""
    try:
        os.lstat(path)
    except OSError as e:
        return e.errno == errno.ENOTCONN
    return False


# LOCK_WAIT bounds the wait for the setup lock: another process holds it while it mounts (the
# daemon may take up to a minute to say it is ready) or unmounts.
LOCK_WAIT = 120.0


class _Lock:
    """An exclusive flock on a lock file, held while in a with block: the setup lock, which
    users hold to mount, attach or leave, and the daemon to end an unused mount. The holder may
    unlink the file: a waiter that then gets the lock of the unlinked file tries again on a
    new one. The wait is bounded by LOCK_WAIT."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> _Lock:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            with _room(os.path.dirname(self.path)):
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            while True:
                try:
                    fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        os.close(self.fd)
                        raise MountError(f"another process has held {self.path} for over {LOCK_WAIT:g} s (a Mount that "
                                         f"hangs while mounting or unmounting?); stop it, or remove the file if no process uses it") from None
                    time.sleep(0.02)
            try:
                if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                    return self
            except FileNotFoundError:
                pass
            os.close(self.fd)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


# This process's holds on users locks: lock path -> [pid, fd, count]. A POSIX lock belongs to
# the process and is dropped when any descriptor of its file closes, so every Mount of one
# mountpoint in a process shares one descriptor and one lock. A forked child (a DataLoader
# worker) inherits the table but not the lock: entries of another pid are not its own.
_holds: Dict[str, List[int]] = {}


def _held(lock: str) -> Optional[List[int]]:
    h = _holds.get(lock)
    return h if h is not None and h[0] == os.getpid() else None


class Mount:
    """A blockfs mount for the life of a with block (or from open() to close()).

        with blockfs.Mount("/data/train", seed=1, cache_size="4GiB") as m:
            m.path   # the mountpoint
            m.info   # its .blockfs/info.json

    data is a dataset directory, a file served in place (with record_size=... or window=...),
    an s3:// or https:// URL, or a mixture's JSON file (several datasets in one epoch, docs/SHUFFLE.md;
    each source's own options are in that file, and keyword options are the whole mount's).
    Keyword options are blockfs mount's flags with '_' for '-' (`blockfs options` lists
    them), checked when Mount is called against the schema the binary publishes: a keyword
    that is no option raises TypeError naming the closest one and listing them all, a value
    of the wrong kind TypeError, and one the option does not take (a negative size, a choice
    not offered) ValueError, each naming the option. It runs `blockfs mount --daemon` (see
    binary()) and unmounts on exit, also after an exception.

    Without a mountpoint, the mountpoint is a directory under /tmp/blockfs-UID named after
    data and the options, so every process of a node that asks for the same mount (the local
    ranks of a torchrun job) gets the same one: the first mounts, the others attach, and the
    mount stays until the last of them leaves.

    Each process using the mount holds a POSIX lock on a lock file beside it, and the daemon
    (started with --users-lock) unmounts itself, removes the lock files and the mountpoint it
    was given, and exits within a second of the last lock going, however its holders ended:
    close(), SIGTERM, kill -9. A forked DataLoader worker does not inherit the lock, so workers
    left behind by a killed trainer do not keep the mount. Mount installs no signal handler:
    SIGTERM keeps its meaning for the trainer (and for torchrun or Lightning, which set their
    own).

    nodes=N (or "auto": Slurm's $SLURM_NNODES, or torchrun's $WORLD_SIZE / $LOCAL_WORLD_SIZE)
    mounts node-aware (docs/USAGE.md, "Many nodes"): this node serves only its canonical parts
    of the data, the same every epoch; node= defaults to torchrun's $GROUP_RANK, $NODE_RANK or
    Slurm's $SLURM_NODEID, and parts= to the data's default.
    """

    def __init__(self, data: Union[str, "os.PathLike[str]"], mountpoint: Optional[Union[str, "os.PathLike[str]"]] = None,
                 **options: Any) -> None:
        self.data: str = str(data) if "://" in str(data) else os.path.abspath(os.fspath(data))
        self.options = dict(options)
        node_options(self.options)
        self.options = check_options(self.options)
        self._mixture = _mixture_digest(self.data)
        if mountpoint is None:
            parts: List[Any] = [self.data, flags(self.options)] + ([self._mixture] if self._mixture else [])
            mountpoint = os.path.join(runtime_dir(), "mnt-" + _digest(*parts))
            self._made_dir = True
        else:
            self._made_dir = False
        self.path = os.path.abspath(os.fspath(mountpoint))
        self.info: Optional[Info] = None
        self.owner = False  # whether this process mounted it
        self._open = False
        self._pid: Optional[int] = None
        self._attached = False
        self._lock = os.path.join(runtime_dir(), "lock-" + _digest(self.path))
        self._setup_lock = self._lock + ".setup"

    def __enter__(self) -> Mount:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"blockfs.Mount({self.data!r} at {self.path!r})"

    @property
    def log(self) -> Optional[str]:
        """The daemon's log file (info.json's "log": a file of its own in the user's private log
        directory, kept after the unmount), or None for a mount not open or a daemon of a
        blockfs that keeps none. Why a read failed is in stats()["last_errors"] too."""
        log = (self.info or {}).get("log")
        return log if isinstance(log, str) else None

    def stats(self) -> Dict[str, Any]:
        """The mount's counters now: its .blockfs/stats.json (docs/USAGE.md, "Is the trainer
        waiting for data?"): bytes and reads served, "read_wait_seconds" (the time reads waited
        for the disk or the object store: the data stall) and "stall" (that over the readers'
        time), the cache's and the source's counters, and "readers", one per open file (its
        pid, position, bytes, wait_seconds, stall). blockfs stats MOUNTPOINT shows the same live."""
        tree = tree_of(self)
        with open(os.path.join(self.path, tree.meta_dir, tree.stats), "rb") as f:
            return cast(Dict[str, Any], json.load(f))

    def _whom(self) -> Dict[str, Any]:
        """What the users lock file records of a mount: its data and flags (and a mixture
        file's content digest)."""
        whom: Dict[str, Any] = {"data": str(self.data), "flags": flags(self.options)}
        if self._mixture:
            whom["mixture"] = self._mixture
        return whom

    def open(self) -> Mount:
        """Mounts data, or attaches to the mount another local process made of it."""
        if (self._open and self._pid == os.getpid()) or self._attached:
            return self
        with _Lock(self._setup_lock):
            # Under the lock: a daemon ending an unused mount removes the mountpoint under it.
            parent = os.path.dirname(self.path)
            with (_room(parent, "the mountpoint") if self._made_dir else
                  _room(parent, f"the mountpoint {os.path.basename(self.path)}", "give a mountpoint elsewhere")):
                if not is_mounted(self.path):  # (makedirs would stat a mount that may not answer)
                    os.makedirs(self.path, exist_ok=True)
            h = _held(self._lock)
            if h is not None:  # this process already uses the mount
                self._check_same(h[1])
                h[2] += 1
                self.info = read_info(self.path)
                self._open, self._pid = True, os.getpid()
                return self
            try:
                with _room(os.path.dirname(self._lock)):
                    users = os.open(self._lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            except (OSError, MountError):
                self._forget(None)  # (a symlink planted there: nothing is written through it)
                raise
            try:
                if is_mounted(self.path):
                    if self._in_use(users):
                        self._check_same(users)
                    else:
                        # Nobody holds it: left by a daemon that has not noticed yet, or by one
                        # killed with its users (start afresh), or mounted by hand (not ours).
                        if not os.fstat(users).st_size and not _stale(self.path):
                            raise MountError(f"{self.path} is already mounted, not by blockfs.Mount: unmount it (blockfs unmount {self.path}) or use blockfs.attach")
                        self._unmount()
                if not is_mounted(self.path):
                    self._mount()
                    self.owner = True
                    with _room(os.path.dirname(self._lock)):
                        os.ftruncate(users, 0)
                        os.pwrite(users, json.dumps(self._whom()).encode(), 0)
                fcntl.lockf(users, fcntl.LOCK_SH)
                self.info = read_info(self.path)
            except BaseException:
                fcntl.lockf(users, fcntl.LOCK_UN)
                if not self._in_use(users):
                    if self.owner and is_mounted(self.path):
                        self._unmount()
                    self._forget(users)
                os.close(users)
                raise
            _holds[self._lock] = [os.getpid(), users, 1]
            self._open, self._pid = True, os.getpid()
        return self

    def close(self) -> None:
        """Stops using the mount; the last local process to stop unmounts it."""
        if not self._open or self._pid != os.getpid():
            return  # not open, or a forked child (a DataLoader worker) of the process that is
        self._open = False
        with _Lock(self._setup_lock):
            h = _held(self._lock)
            if h is None:
                return
            h[2] -= 1
            if h[2] > 0:
                return  # another Mount of this process still uses it
            del _holds[self._lock]
            users = h[1]
            try:
                fcntl.lockf(users, fcntl.LOCK_UN)
                if not self._in_use(users):
                    if is_mounted(self.path):
                        self._unmount()
                    self._forget(users)
            finally:
                os.close(users)

    def _check_same(self, users: int) -> None:
        """Refuses to attach to a mount at this mountpoint made with other data or options."""
        try:
            whom = json.loads(os.pread(users, 1 << 16, 0) or b"null")
        except ValueError:
            whom = None
        if whom is not None and whom != self._whom():
            edited = " (the mixture file has changed since)" if whom.get("data") == self.data and whom.get("mixture") != self._mixture else ""
            raise MountError(f"{self.path} is in use by a blockfs.Mount of {whom.get('data')}{edited} with flags {' '.join(whom.get('flags') or []) or '(none)'}; "
                             f"use the same data and options, or another mountpoint")

    def _forget(self, users: Optional[int]) -> None:
        """Removes what the last user leaves: the lock files and a default mountpoint (call
        with the setup lock held and the mount gone). users is the users lock's descriptor,
        None when it could not be opened (a symlink there is removed, not followed)."""
        if users is not None:
            os.ftruncate(users, 0)
        for p in (self._lock, self._setup_lock) + ((self.path,) if self._made_dir else ()):
            try:
                (os.rmdir if p == self.path else os.unlink)(p)
            except OSError:
                pass

    @staticmethod
    def _in_use(fd: int) -> bool:
        """Whether any process holds a lock on the users lock file (call with the setup lock
        held and no lock of this process's own on it)."""
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EAGAIN):
                return True
            raise
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False

    def _mount(self) -> None:
        daemon = [flag("users_lock"), self._lock] + ([flag("remove_mountpoint")] if self._made_dir else [])
        cmd = [binary(), "mount", flag("daemon")] + daemon + flags(self.options) + [str(self.data), self.path]
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if p.returncode != 0:
            lines = (p.stderr or p.stdout).strip().splitlines() or [f"exit status {p.returncode}"]
            raise MountError(lines[-1])
        for line in p.stderr.splitlines():
            if line.startswith("blockfs: warning: "):
                # An order far from uniform (info.json's "order" says more).
                warnings.warn(line[len("blockfs: warning: "):], OrderWarning, stacklevel=4)

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
    m = Mount((info.get("mixture") or {}).get("file") or info.get("in_place") or info.get("dataset") or p, p)
    m.info, m._attached = info, True
    return m
