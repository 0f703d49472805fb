"""Datasets and checks shared by the package's tests, and what they run: every test module
imports this one before blockfs.

The tests run with plain unittest given a built binary (make build):

    cd python/tests && python3 -m unittest              # or: python3 -m unittest test_mount
    python3 -m unittest discover -s python/tests        # from the checkout's root

blockfs is the installed package where one is importable (make test's TestPythonPackage runs
them against a venv it installed python/ into), else this checkout's python/blockfs (put in
$PYTHONPATH too, for the Python processes the tests start). The binary
is $BLOCKFS_BIN, else the checkout's bin/blockfs, else the package's own (blockfs.binary()); it
is put in $BLOCKFS_BIN for the tests and the processes they start. Tests that pack or mount
(needs_mount) skip where there is no binary or no /dev/fuse, naming what is missing; with
BLOCKFS_REQUIRE_FUSE=1 (CI) that is an error instead, raised by each such test, so no test can
pass by skipping."""
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from typing import Any

import numpy as np

TESTS = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(TESTS))  # the repository (python/tests is two levels down)

if importlib.util.find_spec("blockfs") is None:
    # This checkout's package, for the tests and the Python processes they start.
    sys.path.insert(0, os.path.dirname(TESTS))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(TESTS), os.environ.get("PYTHONPATH")) if p)

import blockfs  # noqa: E402
import blockfs._binary  # noqa: E402


def _find_binary():
    """The blockfs binary the tests run, and "" with why there is none."""
    b = os.environ.get("BLOCKFS_BIN")
    if b:
        return (b, "") if os.access(b, os.X_OK) else ("", f"BLOCKFS_BIN={b} is not an executable file")
    built = os.path.join(CHECKOUT, "bin", "blockfs")
    if os.access(built, os.X_OK):
        return built, ""
    try:
        return blockfs._binary.binary(), ""
    except FileNotFoundError as e:
        return "", f"no blockfs binary ({e}); run make build, or set BLOCKFS_BIN"


BINARY, _why = _find_binary()
if BINARY:
    os.environ["BLOCKFS_BIN"] = BINARY
elif not _why:
    _why = "no blockfs binary"
if BINARY and not os.path.exists("/dev/fuse"):
    _why = "no /dev/fuse: the tests that mount need FUSE (modprobe fuse; in a container, --device /dev/fuse)"
REQUIRED = os.environ.get("BLOCKFS_REQUIRE_FUSE") == "1"


def needs_mount(obj: Any) -> Any:
    """Marks a test case (a class or a method) that packs or mounts: without a binary or FUSE it
    skips, saying why; under BLOCKFS_REQUIRE_FUSE=1 it fails instead, so no test passes by
    skipping. Only such tests need a binary: a script that imports this module for its helpers
    runs without one."""
    if not _why:
        return obj
    if not REQUIRED:
        return unittest.skip(_why)(obj)
    msg = f"python/tests: {_why} (BLOCKFS_REQUIRE_FUSE=1: the tests that mount may not skip)"

    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError(msg)

    if isinstance(obj, type):
        obj.setUpClass = classmethod(fail)  # type: ignore[attr-defined]
        return obj
    return functools.wraps(obj)(fail)

COLS = 8  # float32 values per record: record i holds i*COLS .. i*COLS+7


@needs_mount
class Scratch(unittest.TestCase):
    """A test case with a scratch directory and a fixed-size dataset of n records."""

    n = 5000

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="blockfs-py-")
        cls.data = pack_npy(cls.tmp, "ds", cls.n)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_records(self, ids, x):
        """Each record is the one its id names."""
        ids = np.asarray(ids)
        want = ids[:, None].astype(np.float64) * COLS + np.arange(COLS)
        np.testing.assert_array_equal(np.asarray(x, dtype=np.float64), want)


def pack_npy(tmp, name, n, *flags):
    src = os.path.join(tmp, name + ".npy")
    np.save(src, np.arange(n * COLS, dtype=np.float32).reshape(n, COLS))
    dst = os.path.join(tmp, name)
    run("pack", "--quiet", "--block-size", "4KiB", *flags, src, dst)  # 128 records a block
    return dst


def run(*args):
    p = subprocess.run([blockfs.binary()] + list(args), capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("blockfs %s: %s" % (" ".join(args), p.stderr))
    return p.stdout


def daemon_pid(mountpoint):
    """The pid of the blockfs daemon serving mountpoint."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"mount" in args and os.fsencode(mountpoint) in args:
            return int(pid)
    return None


# torchvision.datasets.folder.IMG_EXTENSIONS
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def image_folder(root, extensions=IMG_EXTENSIONS):
    """torchvision's ImageFolder rule, written out from its find_classes and make_dataset (not
    imported: torchvision is seldom installed): (class_to_idx, samples), samples the
    (path relative to root, target) of every file it takes, in its order. The classes are the
    sorted names of root's folders; a class's files are those below its folder, at any depth,
    whose extension is an image's; files at the top level are in no class; a class without
    such a file is an error (FileNotFoundError), as ImageFolder's default allow_empty=False."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    if not classes:
        raise FileNotFoundError(f"no class folder in {root}")
    class_to_idx = {c: i for i, c in enumerate(classes)}
    samples = []
    for c in sorted(class_to_idx):
        for here, _, files in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for f in sorted(files):
                if f.lower().endswith(extensions):
                    samples.append((os.path.relpath(os.path.join(here, f), root).replace(os.sep, "/"), class_to_idx[c]))
    empty = set(classes) - {classes[t] for _, t in samples}
    if empty:
        raise FileNotFoundError(f"no valid file in the class folders {sorted(empty)}")
    return class_to_idx, samples


def torchvision_image_folder(root):
    """The real ImageFolder's (class_to_idx, samples) of root as image_folder returns them, or
    None when torchvision is not installed."""
    try:
        from torchvision.datasets import ImageFolder
    except ImportError:
        return None
    ds = ImageFolder(root, loader=lambda p: p)
    return ds.class_to_idx, [(os.path.relpath(p, root).replace(os.sep, "/"), t) for p, t in ds.samples]


def check_image_folder_labels(test, names, labels, classes, root):
    """labels and classes (labels_from_names of names) agree with ImageFolder on root, a folder
    holding the packed files: the same class_to_idx, the same target for every file
    ImageFolder takes, -1 for the files at the top level and the class folder's label for the
    others (files ImageFolder leaves out for their extension). Compared with torchvision's own
    ImageFolder too, where it is installed."""
    class_to_idx, samples = image_folder(root)
    real = torchvision_image_folder(root)
    if real is not None:
        test.assertEqual(real, (class_to_idx, samples), "the rule written out is torchvision's")
    test.assertEqual({c: i for i, c in enumerate(classes)}, class_to_idx)
    test.assertNotIn("", classes)
    id_of = {n: i for i, n in enumerate(names)}
    for rel, target in samples:
        test.assertEqual(labels[id_of[rel]], target, rel)
    taken = {rel for rel, _ in samples}
    for i, n in enumerate(names):
        if n not in taken:
            want = class_to_idx[n.split("/")[0]] if "/" in n else -1
            test.assertEqual(labels[i], want, n)


def write_names(root, names, content):
    """A folder holding files of these relative names, content(name) in each."""
    for n in names:
        p = os.path.join(root, *n.split("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(content(n))
    return root


def roundtrip(state):
    """A state as it comes back from a checkpoint file."""
    return json.loads(json.dumps(state))
