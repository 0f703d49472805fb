"""Pack a dataset in parts on many workers: ``blockfs pack --part I/N`` for each part, then
one ``blockfs pack --merge``.

    >>> from distributed import Client
    >>> client = Client("tcp://scheduler:8786")
    >>> blockfs.pack_parallel("/shared/raw/train-*.npy", "s3://data/train", parts=64, client=client,
    ...                       endpoint="http://minio:9000", seed=7)
    PackResult(out='s3://data/train', parts=64, records=..., seconds=...)

Each part is one task on a Dask distributed client's workers (``client.map``, ``pure=False``)
that runs the blockfs binary in a subprocess; without a client, the parts run as local
processes (concurrent.futures). The parts need no coordination: part I packs a deterministic
share of the inputs into OUT/parts/. When all have finished, a part that failed is run again
(``retries=``) or reported, with every failed part named with its own message; then the merge
writes OUT's manifest over the parts' blocks (no copy), and the dataset appears whole.

Dask is optional: this module never imports it (a client is anything with Dask's Client.map).
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Protocol, Sequence, Tuple, Union

from ._binary import binary as _default_binary
from .options import flag

# An input of pack: a file, a quoted glob ('shards/*.npy') or @LISTFILE.
Input = Union[str, "os.PathLike[str]"]

# The keywords pack_parallel gives the binary itself (a pack option may not set them).
_OWN = ("part", "merge", "clean", "help")

# The options that say how to reach OUT: the merge and `blockfs info` take them too.
_STORE = re.compile(r"endpoint$|s3_")

_KEY = re.compile(r"[a-z][a-z0-9_]*")


class Client(Protocol):
    """What pack_parallel uses of a Dask distributed Client: map, whose futures have result()."""

    def map(self, func: Callable[..., Any], *iterables: Any, **kwargs: Any) -> Any:
        """Submits func over iterables (distributed.Client.map)."""


@dataclass(frozen=True)
class PackResult:
    """What pack_parallel made.

    Attributes
    ----------
    out : str
        The dataset (a directory, or an s3:// prefix).
    parts : int
        How many parts it was packed in.
    records : int
        The dataset's records (samples, for a dataset with fields).
    seconds : float
        The whole job's wall time: the parts, any re-runs, and the merge.
    part_seconds : tuple of float
        Each part's own time, in part order (its last run's).
    runs : tuple of int
        How many times each part ran (1 unless retries= re-ran it).
    """

    out: str
    parts: int
    records: int
    seconds: float
    part_seconds: Tuple[float, ...] = ()
    runs: Tuple[int, ...] = ()


class PackError(RuntimeError):
    """A part, or the merge, failed. ``failures`` maps each failed part (numbered as
    ``--part`` numbers it, from 0) to the one line its command wrote last on stderr; it is
    empty when the merge failed (the message says why)."""

    def __init__(self, message: str, failures: Optional[Mapping[int, str]] = None) -> None:
        super().__init__(message)
        self.failures: Dict[int, str] = dict(failures or {})


class Run(NamedTuple):
    """One run of the binary, as a worker reports it: its exit status, the last line of its
    stderr (or why it did not run), its stdout and how long it took."""

    returncode: int
    line: str
    stdout: str
    seconds: float


def run_blockfs(args: Sequence[str], binary: Optional[str] = None) -> Run:
    """Runs ``binary ARGS`` (binary: blockfs.binary() on the machine this runs on, when None),
    and reports it; never raises, so that one failed part leaves the others to finish. This
    is what a part's task runs on a worker."""
    start = time.monotonic()
    try:
        exe = binary or _default_binary()
        p = subprocess.run([exe, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    except (OSError, subprocess.SubprocessError) as e:
        return Run(-1, f"{type(e).__name__}: {e}", "", time.monotonic() - start)
    return Run(p.returncode, _last_line(p.stderr, p.returncode), p.stdout, time.monotonic() - start)


def _last_line(stderr: str, code: int) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if lines:
        return lines[-1].strip()
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def pack_flags(**options: Any) -> List[str]:
    """pack's flags of keyword options, in the order given: record_size=4096 is
    ``--record-size=4096``, True a bare flag (no_shuffle=True: ``--no-shuffle``), False and
    None leave it out, a list or tuple repeats it (include=["*.png", "*.jpg"]), a path is its
    str. Raises TypeError for a keyword that is not a flag's name or one pack_parallel sets
    itself (part, merge), and for a value of another kind."""
    out: List[str] = []
    for key, v in options.items():
        if not _KEY.fullmatch(key):
            raise TypeError(f"blockfs.pack_parallel(): {key!r} is not the keyword of a pack option (record_size=, seed=, ...)")
        if key in _OWN:
            raise TypeError(f"blockfs.pack_parallel() sets {key}= itself: leave it out")
        for one in (v if isinstance(v, (list, tuple)) else [v]):
            if one is None or one is False:
                continue
            if one is True:
                out.append(flag(key))
            elif isinstance(one, (str, int, float, os.PathLike)):
                out.append(f"{flag(key)}={os.fspath(one) if isinstance(one, os.PathLike) else one}")
            else:
                raise TypeError(f"blockfs.pack_parallel(): {key}= takes a str, number, bool or path, not {type(one).__name__}")
    return out


def _where(x: Input) -> str:
    """An input or OUT as the workers are given it: a URL as it is, a local path made
    absolute (relative to this process's working directory), @LISTFILE's file too."""
    s = os.fspath(x)
    if "://" in s:
        return s
    if s.startswith("@"):
        return "@" + os.path.abspath(s[1:])
    return os.path.abspath(s)


def part_args(inputs: Sequence[str], out: str, part: int, parts: int, options: Sequence[str]) -> List[str]:
    """The arguments of part (from 0) of parts: ``pack --part I/N --quiet FLAGS INPUT... OUT``."""
    return ["pack", f"{flag('part')}={part}/{parts}", flag("quiet"), *options, *inputs, out]


# Runs every args given (one part's each) and returns their runs, in the same order.
Runner = Callable[[Sequence[Sequence[str]]], List[Run]]


def _dask_runner(client: Client, binary: Optional[str]) -> Runner:
    def run_all(argvs: Sequence[Sequence[str]]) -> List[Run]:
        token = uuid.uuid4().hex[:8]
        keys = [f"blockfs-pack-{_part_of(a)}-{token}" for a in argvs]
        futures = client.map(run_blockfs, list(argvs), binary=binary, key=keys, pure=False)
        runs = []
        for f in futures:  # each waits for its own; none raises but a lost worker's
            try:
                runs.append(f.result())
            except Exception as e:  # noqa: BLE001 (any failure of Dask's is this part's)
                runs.append(Run(-1, f"{type(e).__name__}: {e}", "", 0.0))
        return runs

    return run_all


def _local_runner(workers: Optional[int], binary: Optional[str]) -> Runner:
    def run_all(argvs: Sequence[Sequence[str]]) -> List[Run]:
        # Threads that each wait for a blockfs process: the parts run as local processes.
        n = max(1, min(len(argvs), workers or os.cpu_count() or 1))
        with concurrent.futures.ThreadPoolExecutor(max_workers=n, thread_name_prefix="blockfs-pack") as pool:
            return list(pool.map(lambda a: run_blockfs(a, binary), argvs))

    return run_all


def _part_of(args: Sequence[str]) -> str:
    """The part's "I-of-N" of a part's args (for a task's key), "merge" for the merge's."""
    for a in args:
        if a.startswith(flag("part") + "="):
            return "part-" + a.split("=", 1)[1].replace("/", "-of-")
    return "merge"


def pack_parallel(inputs: Union[Input, Sequence[Input]], out: Input, parts: int, client: Optional[Client] = None, *,
                  binary: Optional[str] = None, retries: int = 0, workers: Optional[int] = None,
                  **pack_options: Any) -> PackResult:
    """Packs inputs into the dataset out in parts, on a Dask client's workers or local
    processes, then merges them.

    Parameters
    ----------
    inputs : str, path, or a sequence of them
        pack's inputs, in order (a record's id is its index in this order): files, quoted
        globs ("shards/*.npy") or @LISTFILE. Paths are made absolute (relative to this
        process's directory), the list file's too, but not the paths inside it: the workers
        read those relative to their own directory.
    out : str or path
        The dataset: a directory, or s3://BUCKET/PREFIX (give endpoint=, and the AWS
        credentials in the workers' environment).
    parts : int
        How many parts (one task each); part I is ``blockfs pack --part I/parts``.
    client : distributed.Client, optional
        Runs one task per part on its workers (which must see the inputs and out); None runs
        the parts as local processes, ``workers`` at a time (default: the CPU count).
    binary : str, optional
        The blockfs executable on the workers (default: blockfs.binary() on each).
    retries : int
        How many more times a failed part is run, after all the others have finished.
    **pack_options
        pack's flags as keywords: record_size=4096, seed=7, no_shuffle=True, block_size="4MiB",
        endpoint="http://minio:9000", include=["*.png"] (see pack_flags).

    Returns
    -------
    PackResult
        The dataset, its parts and records, and the time taken.

    Raises
    ------
    PackError
        When a part still fails after its retries (every failed part named, with the line
        its command wrote on stderr), or the merge fails.
    TypeError, ValueError
        For a keyword that is not a pack option, or parts < 1 or retries < 0.
    """
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ValueError(f"blockfs.pack_parallel(): parts={parts!r}: give a number of parts, 1 or more")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"blockfs.pack_parallel(): retries={retries!r}: give 0 or more")
    srcs = [_where(x) for x in ([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs)]
    if not srcs:
        raise ValueError("blockfs.pack_parallel(): no inputs")
    dst = _where(out)
    options = pack_flags(**pack_options)
    store = pack_flags(**{k: v for k, v in pack_options.items() if _STORE.match(k)})
    run_all = _dask_runner(client, binary) if client is not None else _local_runner(workers, binary)

    start = time.monotonic()
    runs = _run_parts(run_all, [part_args(srcs, dst, i, parts, options) for i in range(parts)], retries, dst)
    records = _merge(run_all, dst, store)
    return PackResult(dst, parts, records, time.monotonic() - start, tuple(r.seconds for r, _ in runs),
                      tuple(n for _, n in runs))


def _run_parts(run_all: Runner, argvs: List[List[str]], retries: int, out: str) -> List[Tuple[Run, int]]:
    """Runs every part, then the failed ones again up to retries times; each part's last run
    and how many times it ran. Raises PackError naming every part that failed its last run."""
    last: Dict[int, Run] = {}
    count = [0] * len(argvs)
    todo = list(range(len(argvs)))
    for _ in range(retries + 1):
        for i, r in zip(todo, run_all([argvs[i] for i in todo])):
            last[i] = r
            count[i] += 1
        todo = [i for i in todo if last[i].returncode != 0]
        if not todo:
            return [(last[i], count[i]) for i in range(len(argvs))]
    n = len(argvs)
    failures = {i: last[i].line for i in todo}
    ran = f" (each ran {retries + 1} times)" if retries else ""
    lines = "\n".join(f"  part {i}/{n}: {line}" for i, line in failures.items())
    raise PackError(f"blockfs.pack_parallel: {len(todo)} of {n} parts failed packing into {out}{ran}; "
                    f"no dataset was made (re-run them with retries=, or alone with blockfs pack --part I/{n}):\n{lines}",
                    failures)


_RECORDS = re.compile(r"^records:\s+(\d+)", re.MULTILINE)


def _merge(run_all: Runner, out: str, store: List[str]) -> int:
    """Merges the parts of out (where they ran, by the same runner), and returns the
    dataset's records as `blockfs info` reads them."""
    merged, = run_all([["pack", flag("merge"), *store, out]])
    if merged.returncode != 0:
        raise PackError(f"blockfs.pack_parallel: the merge of {out} failed: {merged.line}")
    info, = run_all([["info", *store, out]])
    m = _RECORDS.search(info.stdout)
    if info.returncode != 0 or m is None:
        raise PackError(f"blockfs.pack_parallel: {out} was merged, but blockfs info cannot read it: {info.line}")
    return int(m.group(1))


__all__ = ["PackError", "PackResult", "Run", "pack_flags", "pack_parallel", "part_args", "run_blockfs"]
