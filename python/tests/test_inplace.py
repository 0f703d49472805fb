"""WebDataset shards served in place (docs/FORMAT.md "Shards in place") from Python: tars written
as webdataset's TarWriter writes them (streamed, PAX headers), mounted where they are with
blockfs.Mount(shards, index=DIR), which indexes them on its first mount; every value of an
epoch read through blockfs.torch.Loader's dicts over 2 workers is the input's, and the tree and
the order are those of a mount of the same shards packed."""
import json
import os
import shutil
import tempfile
import unittest

import numpy as np

from support import needs_mount, run
from fields_support import write_shard

import blockfs
import blockfs.torch


@needs_mount
class InPlaceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="blockfs-py-inplace-")
        rng = np.random.default_rng(11)
        cls.samples = []
        cls.src = os.path.join(cls.tmp, "shards")
        os.makedirs(cls.src)
        for s, count in enumerate((200, 150, 250)):
            part = []
            for k in range(count):
                i = len(cls.samples)
                fields = {"cls": b"%d" % (i % 10), "jpg": rng.bytes(int(rng.integers(1, 9000))),
                          "meta.json": json.dumps({"i": i}).encode()}
                part.append((f"{s}-{k:06d}", fields))
                cls.samples.append(fields)
            write_shard(os.path.join(cls.src, f"shard-{s:04d}.tar"), part)
        cls.index = os.path.join(cls.tmp, "index")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_loader_over_shards_in_place(self):
        with blockfs.Mount(self.src, index=self.index, seed=5) as m:
            self.assertTrue(os.path.exists(os.path.join(self.index, "blockfs-index.json")))
            self.assertEqual([f.name for f in blockfs.fields(m)], ["cls", "jpg", "meta.json"])
            seen = set()
            for batch in blockfs.torch.Loader(m, 64, num_workers=2, fields=["jpg", "cls"]):
                for i, jpg, cls in zip(batch["ids"].tolist(), batch["jpg"], batch["cls"]):
                    self.assertEqual(bytes(jpg.numpy()), self.samples[i]["jpg"], i)
                    self.assertEqual(bytes(cls.numpy()), self.samples[i]["cls"], i)
                    seen.add(i)
            self.assertEqual(len(seen), len(self.samples))
            order = blockfs.order(m, 1)
            self.assertEqual(sorted(order.tolist()), list(range(len(self.samples))))

    def test_index_then_mount_the_index(self):
        idx = os.path.join(self.tmp, "index2")
        out = run("index", self.src, idx)
        self.assertIn("600 samples of 3 webdataset shards", out)
        with blockfs.Mount(idx, seed=2) as m:
            ids = np.fromfile(blockfs.field_path(m, 0, "jpg").replace(".jpg", ".ids"), dtype="<u8")
            self.assertEqual(sorted(ids.tolist()), list(range(len(self.samples))))


if __name__ == "__main__":
    unittest.main()
