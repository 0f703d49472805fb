#!/usr/bin/env python3
"""Checks of folder packs through real mounts, run by test/folders_test.go
(TestPackFolderAsPeopleHaveIt):

  folder_checks.py ALL PNG

ALL is a mount of an image folder packed with the defaults (its README.txt files packed), PNG
one of the same folder packed with --include '*.png'. For each: the records read through
blockfs.torch.Loader with decode_ids (decode(records, ids)) are written back into a folder
under their names, and labels_from_names must agree with torchvision's ImageFolder rule on that
folder (python/tests/support.py; the real ImageFolder too where torchvision is installed).
Then a decode receiving ids reads each PNG's size from its bytes and finds it in the record's
name, and a decode that fails on ALL's README.txt files raises DecodeError naming them. Prints
"ok ..." or exits non-zero with what failed.
"""
import os
import shutil
import struct
import sys
import tempfile
import unittest
import warnings

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
sys.path.insert(0, os.path.join(here, "..", "..", "python", "tests"))

import blockfs  # noqa: E402
import blockfs.torch  # noqa: E402
from support import check_image_folder_labels, torchvision_image_folder, write_names  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def png_size(b):
    """(width, height) from a PNG's IHDR chunk; ValueError for anything else."""
    if b[:8] != PNG or b[12:16] != b"IHDR":
        raise ValueError(f"not a PNG: {b[:12]!r}")
    return struct.unpack(">II", b[16:24])


def pairs(records, ids):
    return [(int(i), bytes(r)) for r, i in zip(records, ids)]


def read_back(mount):
    """The names of the mount's records and a folder holding each record under its name, read
    through the Loader with decode_ids."""
    names = blockfs.record_names(mount)
    got = {}
    for ids, batch in blockfs.torch.Loader(mount, 3, num_workers=1, decode_ids=True, decode=pairs):
        assert [i for i, _ in batch] == ids.tolist(), "decode got the batch's ids"
        got.update(batch)
    assert sorted(got) == list(range(len(names))), sorted(got)
    root = write_names(tempfile.mkdtemp(prefix="blockfs-folder-"), names, lambda n: got[names.index(n)])
    return names, root


def main(all_mount, png_mount):
    tc = unittest.TestCase()
    seen = []
    real = set()
    for mount in (all_mount, png_mount):
        names, root = read_back(mount)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                labels, classes = blockfs.labels_from_names(mount)
            check_image_folder_labels(tc, names, labels, classes, root)
            real.add(torchvision_image_folder(root) is not None)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        top = [n for n in names if "/" not in n]
        tc.assertEqual(len(caught), 1 if top else 0)
        for n in top:
            tc.assertIn(n, str(caught[0].message))
        seen.append(f"{len(names)} records, classes {classes}, top-level {top}")

    names = blockfs.record_names(png_mount)

    def sizes(records, ids):
        return [(int(i), png_size(bytes(r))) for r, i in zip(records, ids)]

    n = 0
    for ids, batch in blockfs.torch.Loader(png_mount, 4, num_workers=2, decode_ids=True, decode=sizes):
        for i, (w, h) in batch:
            tc.assertTrue(names[i].endswith(f"-{w}x{h}.png"), (names[i], w, h))
            n += 1
    tc.assertEqual(n, len(names))

    with tc.assertRaises(blockfs.torch.DecodeError) as cm:
        for _ in blockfs.torch.Loader(all_mount, 64, decode=lambda recs: [png_size(bytes(r)) for r in recs]):
            pass
    tc.assertEqual(sorted(cm.exception.names), ["README.txt", "cat/README.txt"])
    all_names = blockfs.record_names(all_mount)
    for name in cm.exception.names:
        tc.assertIn(f"id {all_names.index(name)} ({name})", str(cm.exception))
    tc.assertIn("ValueError: not a PNG", str(cm.exception))
    tc.assertEqual(len(real), 1)
    rule = "torchvision's ImageFolder" if real.pop() else "ImageFolder's rule (no torchvision)"
    print(f"ok: {'; '.join(seen)}; labels as {rule}; decode(records, ids) sized {n} PNGs; "
          f"DecodeError named {cm.exception.names}")


if __name__ == "__main__":
    main(*sys.argv[1:])
