"""The tree's names as a mount publishes them in info.json's "tree": paths, orders, names and the
Loader's files follow them, a mount without "tree" has today's names, and a shard rule this
package does not know is refused. No mount needed: a folder with a .blockfs/info.json and the
files it names is enough."""
import json
import os
import shutil
import tempfile
import unittest

import numpy as np

import support  # noqa: F401 (first: it finds the blockfs package and binary)

import blockfs
import blockfs.torch
from blockfs._files import LEGACY_TREE, Tree
from blockfs._mount import is_mounted

RENAMED = {"epoch": "e%06d", "shard_dir": "part-%d-%d", "ids": ".idx", "offsets": ".off", "meta_dir": ".meta",
           "info": "info.json", "stats": "stats.json", "names": "labels.txt", "shard_rule": "floor"}
N = 10  # records of the fake tree: 4 float32s each, record i holding i*4 .. i*4+3


class TreeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="blockfs-tree-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fake(self, tree=None, **info):
        """A folder laid out as a mount with tree's names (today's without one) holding epoch 0
        of N records in reverse order."""
        names = dict(tree or LEGACY_TREE)
        info = dict({"records": N, "kind": "fixed", "record_size": 16, "dtype": "<f4", "shape": [4]}, **info)
        if tree is not None:
            info["tree"] = tree
        os.makedirs(os.path.join(self.tmp, ".blockfs"))
        with open(os.path.join(self.tmp, ".blockfs", "info.json"), "w") as f:
            json.dump(info, f)
        ids = np.arange(N, dtype="<u8")[::-1]
        epoch = os.path.join(self.tmp, names["epoch"] % 0)
        (np.arange(N * 4, dtype="<f4").reshape(N, 4)[ids]).tofile(epoch)
        ids.tofile(epoch + names["ids"])
        shard = os.path.join(self.tmp, names["shard_dir"] % (1, 3))
        os.makedirs(shard)
        ids[3:6].tofile(os.path.join(shard, names["epoch"] % 0 + names["ids"]))
        os.makedirs(os.path.join(self.tmp, names["meta_dir"]), exist_ok=True)
        with open(os.path.join(self.tmp, names["meta_dir"], names["names"]), "w") as f:
            f.write("".join(f"{'cat' if i % 2 else 'dog'}/{i}.jpg\n" for i in range(N)))
        return self.tmp

    def test_published_names(self):
        p = self.fake(RENAMED)
        self.assertEqual(blockfs.epoch_path(p, 3), os.path.join(p, "e000003"))
        self.assertEqual(blockfs.epoch_path(p, 3, "1/3", ".idx"), os.path.join(p, "part-1-3", "e000003.idx"))
        np.testing.assert_array_equal(blockfs.order(p, 0), np.arange(N)[::-1])
        np.testing.assert_array_equal(blockfs.order(p, 0, shard=(1, 3)), np.arange(N)[::-1][3:6])
        labels, classes = blockfs.labels_from_names(p)
        self.assertEqual((labels.tolist(), classes), ([1, 0] * (N // 2), ["cat", "dog"]))
        for workers in (0, 1):
            with self.subTest(workers=workers), blockfs.torch.Loader(p, 4, num_workers=workers) as loader:
                got = [(ids.numpy(), x.numpy()) for ids, x in loader]
                np.testing.assert_array_equal(np.concatenate([ids for ids, _ in got]), np.arange(N)[::-1])
                for ids, x in got:
                    np.testing.assert_array_equal(x, ids[:, None] * 4 + np.arange(4))

    def test_without_tree_todays_names(self):
        p = self.fake()
        self.assertEqual(blockfs.epoch_path(p, 3), os.path.join(p, "epoch-0003"))
        self.assertEqual(blockfs.epoch_path(p, 3, (1, 3), ".ids"), os.path.join(p, "shard-1-of-3", "epoch-0003.ids"))
        np.testing.assert_array_equal(blockfs.order(p, 0, shard="1/3"), np.arange(N)[::-1][3:6])
        self.assertEqual(blockfs.shard_range(N, 1, 3), (3, 6))

    def test_unknown_shard_rule_refused(self):
        p = self.fake(dict(RENAMED, shard_rule="balanced"))
        for call in (lambda: blockfs.order(p, 0, shard="1/3"), lambda: blockfs.epoch_path(p, 0, (1, 3)),
                     lambda: blockfs.shard_range(N, 1, 3, rule="balanced")):
            with self.assertRaisesRegex(ValueError, "shard rule 'balanced' is unknown"):
                call()
        # Whole epochs do not depend on the rule.
        np.testing.assert_array_equal(blockfs.order(p, 0), np.arange(N)[::-1])

    def test_bad_tree_refused(self):
        with self.assertRaisesRegex(ValueError, "no name for ids"):
            Tree.from_info({"tree": {k: v for k, v in RENAMED.items() if k != "ids"}})
        with self.assertRaisesRegex(ValueError, "shard_dir 'part-%d' is not a pattern of 2"):
            Tree.from_info({"tree": dict(RENAMED, shard_dir="part-%d")})
        with self.assertRaisesRegex(ValueError, "not an object of names"):
            Tree.from_info({"tree": "epoch-%04d"})

    def test_mount_info_read_once(self):
        # A Mount's info (read when it opened) names its tree; the folder's info.json is not read.
        p = self.fake(RENAMED)

        class Held:
            path = p
            info = {"records": N, "tree": dict(RENAMED, epoch="x%d")}

        self.assertEqual(blockfs.epoch_path(Held(), 2), os.path.join(p, "x2"))
        self.assertEqual(blockfs.epoch_path(p, 2), os.path.join(p, "e000002"))

    def test_is_mounted(self):
        self.assertTrue(is_mounted("/"))
        self.assertFalse(is_mounted(self.tmp))
        self.assertFalse(is_mounted(os.path.join(self.tmp, "missing")))


if __name__ == "__main__":
    unittest.main()
