"""The files of a mounted blockfs tree: info.json, epoch and shard paths, orders and labels."""
import json
import os

import numpy as np

META = ".blockfs"


def mount_path(path):
    """The mountpoint of path: a str or os.PathLike, or anything with a .path (a Mount)."""
    return os.fspath(getattr(path, "path", path))


def read_info(path):
    """The mount's .blockfs/info.json as a dict. Raises ValueError when path is not a mount."""
    p = os.path.join(mount_path(path), META, "info.json")
    try:
        with open(p) as f:
            return json.load(f)
    except FileNotFoundError:
        raise ValueError("%s is not a blockfs mount (it has no %s/info.json)" % (mount_path(path), META)) from None


def parse_shard(shard):
    """(r, w) from a tuple (r, w) or a string "r/w"; requires 0 <= r < w."""
    if isinstance(shard, str):
        r, sep, w = shard.partition("/")
        if not sep:
            raise ValueError("shard %r is not R/W" % shard)
        shard = (r, w)
    try:
        r, w = (int(x) for x in shard)
    except (TypeError, ValueError):
        raise ValueError("shard %r is not (R, W) or \"R/W\"" % (shard,)) from None
    if not 0 <= r < w:
        raise ValueError("shard %d of %d: need 0 <= R < W" % (r, w))
    return r, w


def epoch_path(path, epoch, shard=None, suffix=""):
    """The path of epoch's file in the mount (suffix ".ids" or ".offsets" for its sidecars), or
    of shard (r, w)'s file: shard-R-of-W/epoch-NNNN."""
    epoch = int(epoch)
    if epoch < 0:
        raise ValueError("epoch %d is negative" % epoch)
    name = "epoch-%04d%s" % (epoch, suffix)
    if shard is None:
        return os.path.join(mount_path(path), name)
    r, w = parse_shard(shard)
    return os.path.join(mount_path(path), "shard-%d-of-%d" % (r, w), name)


def shard_range(n, r, w):
    """Positions [start, end) of shard r of w of an epoch of n records: floor(n / w) of them
    from r times that (the remainder belongs to no shard), as the mount cuts its shard files."""
    per = n // w
    return r * per, (r + 1) * per


def order(path, epoch, shard=None):
    """The record ids of an epoch (or of shard (r, w) of it) of a mount, in order: a numpy
    uint64 array, read from its epoch-NNNN.ids file. Record ids are source indexes (the row of
    the packed input; for windows, the first row of the window)."""
    info = read_info(path)
    n = info["records"]
    if shard is not None:
        start, end = shard_range(n, *parse_shard(shard))
        n = end - start
    p = epoch_path(path, epoch, shard, ".ids")
    with open(p, "rb", buffering=0) as f:
        ids = np.empty(n, dtype="<u8")
        got = f.readinto(memoryview(ids).cast("B"))
        while got < 8 * n:
            k = f.readinto(memoryview(ids).cast("B")[got:])
            if not k:
                raise OSError("%s: %d bytes, expected %d" % (p, got, 8 * n))
            got += k
    return ids.astype(np.uint64, copy=False)


def load_labels(labels):
    """A label array indexed by record id, from an array, a .npy file, or a text file of one
    integer per line (line i the label of record i, as pack's names make with
    labels_from_names)."""
    if isinstance(labels, np.ndarray):
        return labels
    if isinstance(labels, (list, tuple)) or hasattr(labels, "__array__"):
        return np.asarray(labels)
    p = os.fspath(labels)
    with open(p, "rb") as f:
        npy = f.read(6) == b"\x93NUMPY"
    if npy:
        return np.load(p, mmap_mode="r")
    return np.loadtxt(p, dtype=np.int64, ndmin=1)


def labels_from_names(names):
    """Labels of a dataset packed from a folder tree, where a record's class is its parent
    folder (as torchvision's ImageFolder has it): returns (labels, classes), labels an int64
    array indexed by record id and classes the sorted folder names, labels[i] indexing them.
    names is a mount (its .blockfs/names.txt), a names file (blockfs info --names > names.txt),
    or a list of names in record id order."""
    if isinstance(names, (str, os.PathLike)) or hasattr(names, "path"):
        p = mount_path(names)
        if os.path.isdir(p):
            p = os.path.join(p, META, "names.txt")
            if not os.path.exists(p):
                raise ValueError("%s has no record names: pack the dataset from a folder (--format files)" % mount_path(names))
        with open(p, encoding="utf-8", newline="\n") as f:
            names = f.read().split("\n")
        if names and names[-1] == "":
            names.pop()
    dirs = [os.path.dirname(n) for n in names]
    classes = sorted(set(dirs))
    index = {c: i for i, c in enumerate(classes)}
    return np.fromiter((index[d] for d in dirs), dtype=np.int64, count=len(dirs)), classes
