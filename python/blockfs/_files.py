"""The files of a mounted blockfs tree: info.json, epoch and shard paths, orders and labels.

A client knows one name of the tree, INFO (.blockfs/info.json); the mount publishes the others
there under "tree" (printf patterns for epochs and shard folders, the sidecars' suffixes, the
meta folder and its files, and the rule that cuts shards), and this module builds every path from
them. A mount by a binary older than "tree" has LEGACY_TREE's names.

A mixture's mount (several datasets in one epoch, docs/SHUFFLE.md) also has a ".source"
sidecar, each record's source index (tree "source", info.json's "source_dtype"), and its epochs
may differ in length (info.json's "epoch_records_vary"): epoch_records gives an epoch's.

A dataset with fields (info.json's "kind": "fields", docs/FORMAT.md "Datasets with fields") has
no bare epoch file: each epoch is its ids sidecar and, per field NAME, a file of the field's
values (tree "field", ".%s") and, for values of varying length, their offsets (tree
"field_offsets", ".%s.offsets"). fields and field_path describe and name them.
"""
from __future__ import annotations

import errno as errno_mod
import io
import json
import os
import warnings
import dataclasses
import difflib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from ._types import HasPath, Info, MountPath, ShardSpec
from ._userfile import open_regular, read_bounded

# The names of a tree whose info.json has no "tree" (a mount by a binary older than it).
LEGACY_TREE: Mapping[str, str] = MappingProxyType({
    "epoch": "epoch-%04d",
    "shard_dir": "shard-%d-of-%d",
    "ids": ".ids",
    "offsets": ".offsets",
    "meta_dir": ".blockfs",
    "info": "info.json",
    "stats": "stats.json",
    "names": "names.txt",
    "shard_rule": "floor",
})

# How a client finds the rest of the tree: the one name not read from the mount (every
# binary's, "tree" or not).
INFO = os.path.join(LEGACY_TREE["meta_dir"], LEGACY_TREE["info"])


def _floor_shard(n: int, r: int, w: int) -> Tuple[int, int]:
    per = n // w
    return r * per, (r + 1) * per


# Shard rules this package knows: shard r of w of an epoch of n records is positions [start, end).
SHARD_RULES: Mapping[str, Callable[[int, int, int], Tuple[int, int]]] = MappingProxyType({"floor": _floor_shard})


def _shard_cut(rule: str) -> Callable[[int, int, int], Tuple[int, int]]:
    """The function of shard rule, or a ValueError for a rule this package does not know."""
    cut = SHARD_RULES.get(rule)
    if cut is None:
        known = ", ".join(sorted(SHARD_RULES))
        raise ValueError(f"shard rule {rule!r} is unknown to this blockfs package (it knows {known}): "
                         "upgrade the Python package to the mount's version")
    return cut


@dataclass(frozen=True)
class Tree:
    """The names of a mount's tree, from its info.json's "tree" (see tree_of).

    epoch and shard_dir are printf patterns of one (the epoch) and two numbers (R and W); ids
    and offsets are the sidecars' suffixes; names is the file of record names in meta_dir.
    shard_rule names how shard files cut an epoch (see shard_range). source is the suffix of
    the sidecar of each record's source index, which only a mixture's mount has (else None).
    field and field_offsets are printf patterns of a field's name, the suffixes of its values'
    file and of their offsets, which a mount of a dataset with fields has (else None; see
    field_suffix). info and stats are the files in meta_dir of the mount's facts and of its
    live counters (LEGACY_TREE's names where info.json does not name them).
    """

    epoch: str
    shard_dir: str
    ids: str
    offsets: str
    meta_dir: str
    names: str
    shard_rule: str
    source: Optional[str] = None
    field: Optional[str] = None
    field_offsets: Optional[str] = None
    info: str = LEGACY_TREE["info"]
    stats: str = LEGACY_TREE["stats"]

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> Tree:
        """The tree of a mount with info (its info.json); LEGACY_TREE if it has no "tree".
        Raises ValueError for a tree that lacks a name or whose patterns do not take their
        numbers."""
        names = info.get("tree")
        if names is None:
            names = LEGACY_TREE
        if not isinstance(names, Mapping):
            raise ValueError(f"info.json's tree is {names!r}, not an object of names")
        keys = [f.name for f in dataclasses.fields(cls)]
        optional = {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
        missing = [k for k in keys if k not in optional and not isinstance(names.get(k), str)]
        if missing:
            raise ValueError(f"info.json's tree has no name for {', '.join(missing)}")
        bad = [k for k in optional if names.get(k) is not None and not isinstance(names[k], str)]
        if bad:
            raise ValueError(f"info.json's tree: {', '.join(sorted(bad))} is not a name")
        given: Dict[str, Any] = {k: names[k] for k in keys if names.get(k) is not None}
        tree = cls(**given)
        for key, numbers in (("epoch", (0,)), ("shard_dir", (0, 1))):
            pattern = getattr(tree, key)
            try:
                pattern % numbers
            except (TypeError, ValueError):
                raise ValueError(f"info.json's tree: {key} {pattern!r} is not a pattern of {len(numbers)} number(s)") from None
        for key in ("field", "field_offsets"):
            pattern = getattr(tree, key)
            try:
                if pattern is not None:
                    pattern % ("x",)
            except (TypeError, ValueError):
                raise ValueError(f"info.json's tree: {key} {pattern!r} is not a pattern of a field's name") from None
        return tree

    def epoch_file(self, root: str, epoch: int, shard: Optional[ShardSpec] = None, suffix: str = "") -> str:
        """The path under root of epoch's file (suffix: the ids, offsets or source suffix for
        its sidecars), or of shard (r, w)'s file of it. Raises ValueError for a negative epoch, a
        bad shard, or a shard of a rule this package does not know."""
        epoch = int(epoch)
        if epoch < 0:
            raise ValueError(f"epoch {epoch} is negative")
        name = self.epoch % (epoch,) + suffix
        if shard is None:
            return os.path.join(root, name)
        r, w = parse_shard(shard)
        _shard_cut(self.shard_rule)
        return os.path.join(root, self.shard_dir % (r, w), name)

    def shard_range(self, n: int, r: int, w: int) -> Tuple[int, int]:
        """Positions [start, end) of shard r of w of an epoch of n records, by this tree's rule."""
        return _shard_cut(self.shard_rule)(n, r, w)

    def field_suffix(self, name: str, offsets: bool = False) -> str:
        """The suffix of the epoch file of field name's values (epoch-NNNN.NAME), or with offsets
        of their offsets sidecar (epoch-NNNN.NAME.offsets): the tree's field (field_offsets)
        pattern of the name; "." + name (and the offsets suffix) for a tree without one."""
        pattern = self.field_offsets if offsets else self.field
        if pattern is not None:
            return pattern % (name,)
        return "." + name + (self.offsets if offsets else "")


@dataclass(frozen=True)
class Field:
    """A field of a dataset with fields, as its mount's info.json describes it ("fields").

    Attributes
    ----------
    name : str
        The field's name (a WebDataset member's extension, a Parquet column).
    kind : str
        "fixed" (every value record_size bytes) or "variable" (values of any length, with an
        offsets sidecar).
    dtype : numpy.dtype
        The values' element type; uint8 for opaque bytes (info.json's dtype "").
    opaque : bool
        Whether the values are opaque bytes (no dtype in info.json): an image, a JSON text.
    shape : tuple of int
        The shape of a fixed value in elements of dtype ((record_size,) for opaque bytes); ()
        for a variable field, whose values are 1-D runs of elements.
    record_size : int or None
        Bytes per value of a fixed field; None for a variable one.
    file : str
        The suffix of the field's epoch file (epoch-NNNN + file): the field's "file" in
        info.json, else the tree's field pattern of its name (Tree.field_suffix).
    offsets : str or None
        The suffix of its offsets sidecar (uint64 little-endian, records + 1, from the start
        of the field's file), named as file is; None for a fixed field.
    """

    name: str
    kind: str
    dtype: np.dtype[Any]
    opaque: bool
    shape: Tuple[int, ...]
    record_size: Optional[int]
    file: str
    offsets: Optional[str]

    @property
    def fixed(self) -> bool:
        """Whether every value has record_size bytes."""
        return self.kind == "fixed"


def is_fields(info: Mapping[str, Any]) -> bool:
    """Whether info (a mount's info.json) is a dataset with fields' (no bare epoch file)."""
    return info.get("kind") == "fields"


def _field(entry: Any, tree: Tree) -> Field:
    """The Field an entry of info.json's "fields" describes; ValueError, naming the field and what
    is wrong, for an entry a reader cannot read by."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise ValueError(f"info.json's fields: {entry!r} is not a field with a name")
    name, kind = entry["name"], entry.get("kind")
    where = f"info.json's field {name!r}"
    if kind not in ("fixed", "variable"):
        raise ValueError(f"{where}: kind {kind!r} is neither fixed nor variable")
    dt = entry.get("dtype") or ""
    try:
        dtype = np.dtype(dt) if dt else np.dtype(np.uint8)
    except TypeError:
        raise ValueError(f"{where}: dtype {dt!r} is not a numpy dtype") from None
    if dtype.itemsize == 0 or dtype.hasobject:
        raise ValueError(f"{where}: dtype {dt!r} has no fixed element size")
    shape_in = entry.get("shape") or []
    if not isinstance(shape_in, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape_in):
        raise ValueError(f"{where}: shape {shape_in!r} is not a list of sizes")
    file = entry.get("file") or tree.field_suffix(name)
    if not isinstance(file, str):
        raise ValueError(f"{where}: file {file!r} is not a suffix")
    if kind == "variable":
        offsets = entry.get("offsets") or tree.field_suffix(name, offsets=True)
        if not isinstance(offsets, str):
            raise ValueError(f"{where}: offsets {offsets!r} is not a suffix")
        return Field(name, kind, dtype, not dt, (), None, file, offsets)
    size = entry.get("record_size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"{where}: a fixed field needs a record_size, not {size!r}")
    if not dt:
        return Field(name, kind, dtype, True, (size,), size, file, None)
    shape = tuple(shape_in)
    want = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if want != size:
        raise ValueError(f"{where}: record_size {size} is not that of a value of dtype {dt} and shape {list(shape)} "
                         f"({want} bytes)")
    return Field(name, kind, dtype, False, shape, size, file, None)


def fields_of(info: Mapping[str, Any]) -> List[Field]:
    """The fields of a mount with info (its info.json), in the dataset's order; [] for a dataset
    without fields. Raises ValueError for a "fields" a reader cannot read by."""
    if not is_fields(info):
        return []
    entries = info.get("fields")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"info.json says kind \"fields\" but its fields are {entries!r}")
    tree = Tree.from_info(info)
    out = [_field(e, tree) for e in entries]
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        raise ValueError(f"info.json's fields name a field twice: {names}")
    return out


def field_of(info: Mapping[str, Any], name: str) -> Field:
    """Field name of a mount with info; ValueError naming the fields there are when it has no
    such field (or none at all)."""
    have = fields_of(info)
    for f in have:
        if f.name == name:
            return f
    if not have:
        raise ValueError(f"field {name!r}: the dataset has no fields (its records are {info.get('kind')!r})")
    raise ValueError(f"no field {name!r}{near_hint(name, [f.name for f in have])}; the dataset's fields are "
                     f"{', '.join(f.name for f in have)}")


def near_hint(name: str, names: Sequence[str]) -> str:
    """" (did you mean 'label'?)" for the one of names nearest to a mistyped name, else ""."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


def mount_path(path: MountPath) -> str:
    """The mountpoint of path: a str or os.PathLike, or anything with a .path (a Mount)."""
    return os.fspath(path.path if isinstance(path, HasPath) else path)


# The largest info.json read (the daemon bounds none): 2 KiB a dataset, 1.7 KiB more a source of
# a mixture (at most 4096, shuffle.MaxSources, each with up to three 4 KiB paths: 55 MiB), 1 KiB
# more a field (each needs 4 MiB of cache: 64 MiB of fields is 256 GiB of cache).
MAX_INFO_FILE = 64 << 20


def read_info(path: MountPath) -> Info:
    """The mount's .blockfs/info.json as a dict. Raises ValueError when path is not a mount: it
    has no info.json, or one that is not a regular file (a FIFO is not waited on) or that holds
    more than MAX_INFO_FILE bytes."""
    p = os.path.join(mount_path(path), INFO)
    try:
        body = read_bounded(p, MAX_INFO_FILE)
    except FileNotFoundError:
        raise ValueError(f"{mount_path(path)} is not a blockfs mount (it has no {INFO})") from None
    except ValueError as e:
        raise ValueError(f"{mount_path(path)} is not a blockfs mount: {e}") from None
    info: Info = json.loads(body)
    return info


def _info_of(path: MountPath) -> Info:
    """The info of path: what a Mount already holds, else read from the mount."""
    info = getattr(path, "info", None)
    if isinstance(info, dict):
        return info
    return read_info(path)


def tree_of(path: MountPath) -> Tree:
    """The names of the tree mounted at path (a mountpoint, or a Mount: its info is read once
    per Mount)."""
    return Tree.from_info(_info_of(path))


def parse_shard(shard: ShardSpec) -> Tuple[int, int]:
    """(r, w) from a tuple (r, w) or a string "r/w"; requires 0 <= r < w."""
    if isinstance(shard, str):
        rs, sep, ws = shard.partition("/")
        if not sep:
            raise ValueError(f"shard {shard!r} is not R/W")
        shard = (rs, ws)
    try:
        r, w = (int(x) for x in shard)
    except (TypeError, ValueError):
        raise ValueError(f"shard {shard!r} is not (R, W) or \"R/W\"") from None
    if not 0 <= r < w:
        raise ValueError(f"shard {r} of {w}: need 0 <= R < W")
    return r, w


def epoch_path(path: MountPath, epoch: int, shard: Optional[ShardSpec] = None, suffix: str = "") -> str:
    """The path of epoch's file in the mount (suffix ".ids", ".offsets" or, in a mixture,
    ".source": the tree's ids, offsets and source, for its sidecars), or of shard (r, w)'s
    file: shard-R-of-W/epoch-NNNN, in the names the mount publishes. A dataset with fields has
    no bare epoch file (suffix ""): field_path names its fields' files."""
    return tree_of(path).epoch_file(mount_path(path), epoch, shard, suffix)


def fields(path: MountPath) -> List[Field]:
    """The fields of the dataset mounted at path (a mountpoint or a Mount), in the dataset's
    order, from its info.json; [] for a dataset whose records have no fields."""
    return fields_of(_info_of(path))


def field_path(path: MountPath, epoch: int, field: str, shard: Optional[ShardSpec] = None,
               offsets: bool = False) -> str:
    """The path of field's file of epoch in the mount of a dataset with fields (epoch-NNNN.NAME:
    the field's values in the epoch's order), or, with offsets, of its offsets sidecar
    (epoch-NNNN.NAME.offsets: uint64 little-endian, records + 1, relative to the start of the
    values' file; variable fields only); of shard (r, w)'s files with shard. Raises ValueError
    for a field the dataset does not have (naming those it has), and for the offsets of a fixed
    field."""
    info = _info_of(path)
    f = field_of(info, field)
    if offsets and f.offsets is None:
        raise ValueError(f"field {field!r} is fixed-size ({f.record_size} bytes a value): it has no offsets file")
    suffix = f.offsets if offsets else f.file
    assert suffix is not None
    return Tree.from_info(info).epoch_file(mount_path(path), epoch, shard, suffix)


def shard_range(n: int, r: int, w: int, rule: str = LEGACY_TREE["shard_rule"]) -> Tuple[int, int]:
    """Positions [start, end) of shard r of w of an epoch of n records, as the mount cuts its
    shard files. The rule is the mount's tree's shard_rule; "floor" (the only one so far) gives
    each shard floor(n / w) positions from r times that (the remainder belongs to no shard).
    Raises ValueError for a rule this package does not know."""
    return _shard_cut(rule)(n, r, w)


def is_mixture(info: Mapping[str, Any]) -> bool:
    """Whether info (a mount's info.json) is a mixture's: several datasets in one epoch."""
    return info.get("sources") is not None


def records_of(info: Mapping[str, Any], root: str, epoch: int) -> int:
    """The records of epoch of the mount at root with info: info.json's "records" (epoch 0's),
    or, where "epoch_records_vary" (a mixture with a fractional repeat), the size of the
    epoch's ids file over 8."""
    if not info.get("epoch_records_vary"):
        return int(info["records"])
    tree = Tree.from_info(info)
    return os.stat(tree.epoch_file(root, epoch, None, tree.ids)).st_size // 8


def epoch_records(path: MountPath, epoch: int) -> int:
    """The number of records of epoch of a mount. It is info.json's "records" for every epoch,
    except in a mixture with a fractional repeat ("epoch_records_vary"), whose epochs differ
    by a record or so (docs/SHUFFLE.md, "Records per epoch")."""
    return records_of(_info_of(path), mount_path(path), epoch)


def _read_sidecar(path: MountPath, epoch: int, shard: Optional[ShardSpec], suffix: str,
                  dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """epoch's (or shard's) sidecar of suffix, one item of dtype per record, read whole; in the
    dtype's native byte order."""
    info = _info_of(path)
    tree = Tree.from_info(info)
    n = records_of(info, mount_path(path), epoch)
    if shard is not None:
        start, end = tree.shard_range(n, *parse_shard(shard))
        n = end - start
    p = tree.epoch_file(mount_path(path), epoch, shard, suffix)
    size = n * dtype.itemsize
    with open_regular(p) as f:  # not waited on when a folder that is no mount holds a FIFO there
        out = np.empty(n, dtype=dtype)
        buf = out.data.cast("B")
        got = 0
        while got < size:
            try:
                k = f.readinto(buf[got:])
            except OSError as e:
                raise explain(e, mount_path(path), p) from e
            if not k:
                raise OSError(f"{p}: {got} bytes, expected {size}")
            got += k
    return out.astype(dtype.newbyteorder("="), copy=False)


# stats.json is read whole to explain a failed read; a larger one is not read.
MAX_STATS_BYTES = 64 << 20


def explain(err: OSError, root: str, file: str) -> OSError:
    """err, a failed read of file (a path under the mount at root), with the daemon's reason
    where it has one: an EIO says only "Input/output error", while the mount's stats.json
    keeps the reason of its last failed reads ("last_errors"). err itself where there is none."""
    if err.errno != errno_mod.EIO:
        return err
    rel = os.path.relpath(file, root)
    try:
        tree = tree_of(root)
        stats = json.loads(read_bounded(os.path.join(root, tree.meta_dir, tree.stats), MAX_STATS_BYTES))
        last = [e for e in stats.get("last_errors") or [] if isinstance(e, dict) and e.get("file") == rel]
    except (OSError, ValueError, AttributeError):
        return err
    if not last:
        return err
    e = last[-1]
    return OSError(errno_mod.EIO, f"{os.strerror(errno_mod.EIO)}: {file}: the mount's latest failed read of this file "
                                  f"(at {e.get('offset')}, {e.get('count')} so far): {e.get('reason')} (its stats.json, last_errors)")


def order(path: MountPath, epoch: int, shard: Optional[ShardSpec] = None) -> npt.NDArray[np.uint64]:
    """The record ids of an epoch (or of shard (r, w) of it) of a mount, in order: a numpy
    uint64 array, read from its epoch-NNNN.ids file. Record ids are source indexes (the row of
    the packed input; for windows, the first row of the window); in a mixture, each record's
    id in its own dataset (record_sources says which)."""
    return _read_sidecar(path, epoch, shard, tree_of(path).ids, np.dtype("<u8"))


def record_sources(path: MountPath, epoch: int, shard: Optional[ShardSpec] = None) -> npt.NDArray[np.uint16]:
    """The source of each record of an epoch (or of shard (r, w) of it) of a mixture's mount, in
    order: a numpy array (uint16, info.json's "source_dtype") of indexes into info.json's
    "sources", read from its epoch-NNNN.source file. Raises ValueError for a mount of one
    dataset."""
    info = _info_of(path)
    tree = Tree.from_info(info)
    if tree.source is None or not is_mixture(info):
        raise ValueError(f"{mount_path(path)} is a mount of one dataset, not of a mixture: its records have no sources")
    return _read_sidecar(path, epoch, shard, tree.source, np.dtype(info.get("source_dtype", "<u2")))


def load_labels(labels: Union[npt.ArrayLike, str, os.PathLike[str]]) -> np.ndarray[Any, Any]:
    """A label array indexed by record id, from an array, a .npy file (mapped), or a text file of
    one integer per line (line i the label of record i, as pack's names make with
    labels_from_names). Raises ValueError for a path not a regular file (a FIFO is not waited on)."""
    if isinstance(labels, np.ndarray):
        return labels
    if not isinstance(labels, (str, os.PathLike)):
        return np.asarray(labels)
    p = os.fspath(labels)
    with open_regular(p) as f:
        npy = f.read(6) == b"\x93NUMPY"
    # numpy is given the path just found regular: it maps a .npy by path only, and decompresses
    # a text file by its name's .gz, .bz2 or .xz.
    if npy:
        loaded: np.ndarray[Any, Any] = np.load(p, mmap_mode="r")
        return loaded
    return np.loadtxt(p, dtype=np.int64, ndmin=1)


def labels_from_names(names: Union[MountPath, Sequence[str]]) -> Tuple[npt.NDArray[np.int64], List[str]]:
    """Labels of a dataset packed from a folder tree, by torchvision's ImageFolder rule: a
    record's class is the top-level folder it is in (at any depth below it), and the classes
    are those folders' names, sorted; ``{c: i for i, c in enumerate(classes)}`` is ImageFolder's
    ``class_to_idx`` for a folder of the packed files.

    Returns (labels, classes): labels an int64 array indexed by record id, labels[i] indexing
    classes. A file at the top level is in no class, as ImageFolder leaves it out: its label is
    -1, and a UserWarning names such files (pack with ``--include '*/**'`` to leave them out,
    or ``--exclude NAME``). A folder holding no packed file is no class (ImageFolder refuses
    one). ImageFolder also leaves out files whose extension is not an image's (a README.txt
    in a class folder); pack with ``--include '*.png'`` (or your extension) to do the same.

    names is a mount (its .blockfs/names.txt), a names file (blockfs info --names > names.txt),
    or a list of names in record id order ('/'-separated paths relative to the folder packed).
    """
    if isinstance(names, (str, os.PathLike, HasPath)):
        names = _read_names(names)
    tops = [n.split("/", 1)[0] if "/" in n else None for n in names]
    classes = sorted({t for t in tops if t is not None})
    index: Dict[str, int] = {c: i for i, c in enumerate(classes)}
    labels = np.fromiter((-1 if t is None else index[t] for t in tops), dtype=np.int64, count=len(tops))
    loose = [n for n, t in zip(names, tops) if t is None]
    if loose:
        shown = ", ".join(loose[:3]) + (f" and {len(loose) - 3} more" if len(loose) > 3 else "")
        warnings.warn(f"{len(loose)} record(s) are files at the top level, in no class folder ({shown}): their label "
                      "is -1 (ImageFolder leaves them out); pack with --include '*/**' to leave them out too",
                      UserWarning, stacklevel=2)
    return labels, classes


def record_names(path: MountPath) -> List[str]:
    """The source name of every record of a dataset packed from a folder, in record id order
    (names[i] names the record whose id is i; the paths relative to the folder packed). path is
    a mount (its .blockfs/names.txt, named by info.json's "tree") or a names file (blockfs info
    --names > names.txt). Raises ValueError for a mount of a dataset that has no names."""
    return _read_names(path)


def names_of(path: MountPath, ids: Sequence[int]) -> Optional[List[str]]:
    """The source names of the records ids of a mount, read line by line from its names file
    (without holding the whole file); None when the dataset has no names (or no regular file of
    them). For error messages."""
    tree = tree_of(path)
    p = os.path.join(mount_path(path), tree.meta_dir, tree.names)
    want = {int(i) for i in ids}
    found: Dict[int, str] = {}
    try:
        with io.TextIOWrapper(open_regular(p), encoding="utf-8", errors="replace", newline="\n") as f:
            for i, line in enumerate(f):
                if i in want:
                    found[i] = line[:-1] if line.endswith("\n") else line
                    if len(found) == len(want):
                        break
    except (FileNotFoundError, ValueError):  # ValueError: not a regular file
        return None
    return [found.get(int(i), "?") for i in ids]


def _read_names(source: MountPath) -> List[str]:
    """The record names of a mount (the names file in its meta folder) or of a names file: a
    regular file (ValueError otherwise; a FIFO is not waited on), of any size."""
    p = mount_path(source)
    if os.path.isdir(p):
        tree = tree_of(source)
        p = os.path.join(p, tree.meta_dir, tree.names)
        if not os.path.exists(p):
            raise ValueError(f"{mount_path(source)} has no record names: pack the dataset from a folder (--format files)")
    with open_regular(p) as f:
        names = f.read().decode("utf-8").split("\n")
    if names and names[-1] == "":
        names.pop()
    return names
