"""Datasets with fields (docs/FORMAT.md "Datasets with fields") from Python: WebDataset tars
written as webdataset's TarWriter writes them and TFRecord files written here (length and
masked CRC32C framing), packed by the binary and mounted; every field of every sample checked
against the input through the field files (plain reads, also of a shard) and through
blockfs.torch.Loader's dicts over 2 workers; a reader of one field reads no other field's
bytes (stats.json's "sources"); a resume at another worker count and batch size; refusals.

Fixed-size fields come from Parquet and Arrow (TableTest, on test/testdata/parquet's files);
FixedFieldsTest also assembles a dataset of fixed fields by hand, as FORMAT.md lays one out (a
manifest and a dataset per field), for fields of every kind cut into many blocks, and
InfoTest checks the names read from info.json without a mount."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import torch

from support import needs_mount, pack_npy, roundtrip, run
from fields_support import assemble_fields, crc32c, read_file, stats_sources, tfrecord_bytes, values_of, write_shard

import blockfs
import blockfs.torch
from blockfs._files import LEGACY_TREE, Tree, fields_of


@needs_mount
class Tmp(unittest.TestCase):
    """A test case with a scratch directory."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="blockfs-py-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)


class WebDatasetTest(Tmp):
    """Three tar shards of samples with fields cls, jpg (random bytes, some empty) and
    meta.json, packed into blocks of 16 KiB (some 60 blocks)."""

    shards = (300, 250, 350)
    B = 50

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        rng = np.random.default_rng(3)
        cls.samples = []  # by id: the input's order, shard after shard
        src = os.path.join(cls.tmp, "wds")
        os.makedirs(src)
        for s, count in enumerate(cls.shards):
            part = []
            for k in range(count):
                i = len(cls.samples)
                size = 0 if i % 97 == 0 else int(rng.integers(1, 3000))
                fields = {"cls": b"%d" % (i % 10), "jpg": rng.bytes(size),
                          "meta.json": json.dumps({"i": i, "w": int(rng.integers(0, 1 << 20))}).encode()}
                part.append((f"{k:06d}", fields))  # keys repeat across shards: webdataset reads two samples
                cls.samples.append(fields)
            write_shard(os.path.join(src, f"shard-{s:04d}.tar"), part)
        cls.names = ["cls", "jpg", "meta.json"]  # first seen, and TarWriter writes sorted
        cls.data = os.path.join(cls.tmp, "wds-ds")
        run("pack", "--quiet", "--block-size", "16KiB", os.path.join(src, "*.tar"), cls.data)
        cls.mount = blockfs.Mount(cls.data, seed=5).open()
        cls.orders = [blockfs.order(cls.mount, e) for e in range(2)]

    @classmethod
    def tearDownClass(cls):
        cls.mount.close()
        super().tearDownClass()

    def check_batch(self, batch, names):
        """A batch's dict: "ids" then names, each value the input's."""
        self.assertEqual(list(batch), ["ids"] + list(names))
        ids = batch["ids"]
        self.assertIsInstance(ids, torch.Tensor)
        self.assertEqual(ids.dtype, torch.int64)
        for name in names:
            values = batch[name]
            self.assertIsInstance(values, list)
            self.assertEqual(len(values), len(ids))
            for i, v in zip(ids.tolist(), values):
                self.assertEqual(v.dtype, torch.uint8)
                self.assertEqual(bytes(v.numpy()), self.samples[i][name], (name, i))
        return ids.numpy()

    def test_tree_and_info(self):
        m = self.mount
        self.assertEqual(m.info["kind"], "fields")
        self.assertEqual(m.info["records"], len(self.samples))
        fs = blockfs.fields(m)
        self.assertEqual([f.name for f in fs], self.names)
        for f in fs:
            self.assertEqual((f.kind, f.opaque, f.dtype, f.record_size), ("variable", True, np.dtype(np.uint8), None))
            self.assertTrue(os.path.isfile(blockfs.field_path(m, 0, f.name)))
            self.assertTrue(os.path.isfile(blockfs.field_path(m, 0, f.name, offsets=True)))
        self.assertEqual(os.path.basename(blockfs.field_path(m, 3, "meta.json", "1/2", offsets=True)),
                         "epoch-0003.meta.json.offsets")
        self.assertFalse(os.path.exists(blockfs.epoch_path(m, 0)), "no bare epoch file")
        self.assertEqual(sorted(self.orders[0].tolist()), list(range(len(self.samples))))
        self.assertFalse((self.orders[0] == self.orders[1]).all())
        with self.assertRaisesRegex(ValueError, "no field 'png'; the dataset's fields are cls, jpg, meta.json"):
            blockfs.field_path(m, 0, "png")
        with self.assertRaisesRegex(ValueError, r"no field 'clss' \(did you mean 'cls'\?\); the dataset's fields are"):
            blockfs.field_path(m, 0, "clss")

    def test_plain_reads(self):
        # Any reader: the ids file and a field's files, with no blockfs code but the names.
        for epoch in (0, 1):
            for name in self.names:
                got = values_of(self.mount, epoch, name)
                self.assertEqual(got, [self.samples[i][name] for i in self.orders[epoch]], (epoch, name))
        ids = blockfs.order(self.mount, 1, "1/3")
        start, end = blockfs.shard_range(len(self.samples), 1, 3)
        np.testing.assert_array_equal(ids, self.orders[1][start:end])
        for name in self.names:
            self.assertEqual(values_of(self.mount, 1, name, "1/3"), [self.samples[i][name] for i in ids], name)

    def test_loader_two_workers(self):
        loader = blockfs.torch.Loader(self.mount, self.B, num_workers=2)  # fields=None: all of them
        for epoch in (0, 1):
            loader.set_epoch(epoch)
            got = [self.check_batch(b, self.names) for b in loader]
            self.assertEqual([len(g) for g in got], [self.B] * (len(self.samples) // self.B))
            np.testing.assert_array_equal(np.concatenate(got), self.orders[epoch])
        # The fields asked for, in the order asked.
        some = blockfs.torch.Loader(self.mount, 64, num_workers=2, fields=["meta.json", "cls"])
        got = [self.check_batch(b, ["meta.json", "cls"]) for b in some]
        np.testing.assert_array_equal(np.concatenate(got), self.orders[0])

    def test_decode_gets_the_dict(self):
        def decode(batch):
            return {"ids": batch["ids"], "cls": np.array([int(bytes(c)) for c in batch["cls"]]),
                    "i": [json.loads(bytes(j))["i"] for j in batch["meta.json"]]}

        loader = blockfs.torch.Loader(self.mount, 64, num_workers=1, fields=["cls", "meta.json"], decode=decode)
        n = 0
        for out in loader:
            ids = out["ids"].numpy()
            self.assertIsInstance(out["cls"], torch.Tensor)
            np.testing.assert_array_equal(out["cls"].numpy(), ids % 10)
            self.assertEqual(out["i"], ids.tolist())
            n += len(ids)
        self.assertEqual(n, len(self.samples))

        def fails(batch):
            bad = [int(i) for i, j in zip(batch["ids"], batch["meta.json"]) if json.loads(bytes(j))["i"] % 7 == 3]
            if bad:
                raise ValueError(f"bad {bad}")
            return batch

        first = self.orders[0][:64]
        want = sorted(int(i) for i in first if i % 7 == 3)
        with self.assertRaises(blockfs.torch.DecodeError) as cm:
            next(iter(blockfs.torch.Loader(self.mount, 64, fields=["meta.json"], decode=fails)))
        self.assertEqual(sorted(cm.exception.ids), want)
        self.assertIn(f"decode failed on {len(want)} records", str(cm.exception))

    def test_reads_only_the_fields_asked_for(self):
        with blockfs.Mount(self.data, seed=9) as m:  # a mount of its own: nothing read yet
            before = stats_sources(m)
            self.assertEqual(set(before), set(self.names))
            loader = blockfs.torch.Loader(m, self.B, num_workers=2, fields=["cls"])
            got = [self.check_batch(b, ["cls"]) for b in loader]
            np.testing.assert_array_equal(np.concatenate(got), blockfs.order(m, 0))
            after = stats_sources(m)
            for name in ("jpg", "meta.json"):
                self.assertEqual(after[name], before[name], f"reading cls read {name}")
            read = after["cls"] - before["cls"]
            size = {f["name"]: f["bytes"] for f in m.info["fields"]}["cls"]
            offsets = 8 * (len(self.samples) + m.info["blocks"])  # a block's offsets index: its records + 1
            self.assertGreater(read, 0)
            self.assertLessEqual(read, 1.1 * (size + offsets), "an epoch of cls reads cls's bytes once")

    def test_resume_other_workers_batch_size_and_fields(self):
        first = blockfs.torch.Loader(self.mount, self.B, num_workers=3, fields=["cls", "jpg"])
        first.set_epoch(1)
        head = []
        for b in first:
            head.append(self.check_batch(b, ["cls", "jpg"]))
            if len(head) == 6:
                break
        state = roundtrip(first.state_dict())
        self.assertEqual((state["epoch"], state["position"]), (1, 6 * self.B))
        self.assertEqual(state["fingerprint"]["fingerprint"], self.mount.info["fingerprint"])
        # The fields asked for are no part of the state: one order serves them all.
        second = blockfs.torch.Loader(self.mount, 37, num_workers=2, fields=["jpg", "meta.json"])
        second.load_state_dict(state)
        second.set_epoch(1)
        tail = [self.check_batch(b, ["jpg", "meta.json"]) for b in second]
        self.assertEqual([len(t) for t in tail[:-1]], [37] * (len(tail) - 1))
        np.testing.assert_array_equal(np.concatenate(head + tail), self.orders[1])
        self.assertEqual((second.epoch, second.position), (2, 0))

    def test_refusals(self):
        m = self.mount
        with self.assertRaisesRegex(ValueError, r"no field 'png', 'txt' in .*; its fields are cls, jpg, meta.json"):
            blockfs.torch.Loader(m, 8, fields=["cls", "png", "txt"])
        with self.assertRaisesRegex(ValueError, r"no field 'meta\.jsn' \(did you mean 'meta\.json'\?\) in .*; its fields are"):
            blockfs.torch.Loader(m, 8, fields=["meta.jsn"])
        with self.assertRaisesRegex(ValueError, r"fields='cls' is one name, not a list of names: fields=\['cls'\]"):
            blockfs.torch.Loader(m, 8, fields="cls")
        with self.assertRaisesRegex(ValueError, "fields= names no field; the dataset's fields are cls, jpg, meta.json"):
            blockfs.torch.Loader(m, 8, fields=[])
        with self.assertRaisesRegex(ValueError, "fields= names 'cls' more than once"):
            blockfs.torch.Loader(m, 8, fields=["cls", "jpg", "cls"])
        with self.assertRaisesRegex(ValueError, "labels= is not for a dataset with fields"):
            blockfs.torch.Loader(m, 8, labels=np.zeros(len(self.samples)))
        with self.assertRaisesRegex(ValueError, "decode_ids= is not for a dataset with fields"):
            blockfs.torch.Loader(m, 8, decode=lambda b: b, decode_ids=True)
        plain = pack_npy(self.tmp, "plain", 100)
        with blockfs.Mount(plain) as p:
            with self.assertRaisesRegex(ValueError, r"fields= is for a dataset with fields; .* serves records of one "
                                        r"kind \('fixed'\), batched as \(ids, records\): leave fields= out"):
                blockfs.torch.Loader(p, 8, fields=["x"])
            self.assertEqual(blockfs.fields(p), [])
            with self.assertRaisesRegex(ValueError, "field 'x': the dataset has no fields"):
                blockfs.field_path(p, 0, "x")


class TFRecordTest(Tmp):
    B = 40

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        rng = np.random.default_rng(4)
        cls.records = [b"" if i % 50 == 0 else rng.bytes(int(rng.integers(1, 600))) for i in range(500)]
        src = os.path.join(cls.tmp, "tf")
        os.makedirs(src)
        for k, (lo, hi) in enumerate(((0, 180), (180, 500))):
            with open(os.path.join(src, f"part-{k}.tfrecord"), "wb") as f:
                f.write(tfrecord_bytes(cls.records[lo:hi]))
        cls.src = src
        cls.data = os.path.join(cls.tmp, "tf-ds")
        run("pack", "--quiet", "--block-size", "8KiB", os.path.join(src, "*.tfrecord"), cls.data)

    def test_crc32c(self):
        self.assertEqual(crc32c(b"123456789"), 0xE3069283)  # the check value of CRC-32C

    def test_records(self):
        """One field keeps today's tree: a plain dataset of variable-length records, its
        epoch-NNNN cut by epoch-NNNN.offsets, and the Loader's (ids, records) batches."""
        self.assertTrue(os.path.exists(os.path.join(self.data, "blockfs.json")))
        self.assertFalse(os.path.exists(os.path.join(self.data, "blockfs-fields.json")))
        with blockfs.Mount(self.data, seed=2) as m:
            self.assertEqual(blockfs.fields(m), [])
            self.assertEqual(m.info["kind"], "variable")
            order = blockfs.order(m, 0)
            self.assertEqual(sorted(order.tolist()), list(range(len(self.records))))
            data = read_file(blockfs.epoch_path(m, 0))
            offs = np.frombuffer(read_file(blockfs.epoch_path(m, 0, suffix=".offsets")), "<u8").tolist()
            self.assertEqual([data[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)], [self.records[i] for i in order])
            loader = blockfs.torch.Loader(m, self.B, num_workers=2)
            seen = []
            for ids, records in loader:
                for i, r in zip(ids.tolist(), records):
                    self.assertEqual(bytes(r.numpy()), self.records[i])
                seen.extend(ids.tolist())
            self.assertEqual(seen, order.tolist())

    def test_bad_crcs_refused(self):
        good = tfrecord_bytes(self.records[:20])
        second = 12 + len(self.records[0]) + 4  # where record 1's frame starts
        self.assertGreater(len(self.records[1]), 0)
        for what, at in (("data", second + 12 + len(self.records[1]) // 2), ("length", second + 8)):
            bad = bytearray(good)
            bad[at] ^= 0x40
            path = os.path.join(self.tmp, f"bad-{what}.tfrecord")
            with open(path, "wb") as f:
                f.write(bytes(bad))
            dst = os.path.join(self.tmp, f"bad-{what}-ds")
            p = subprocess.run([blockfs.binary(), "pack", "--quiet", path, dst], capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0, what)
            self.assertIn("crc", p.stderr.lower(), what)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertFalse(os.path.exists(dst))
            self.assertEqual([e for e in os.listdir(self.tmp) if e.startswith(f".bad-{what}")], [], "nothing left behind")


class FixedFieldsTest(Tmp):
    records = 3000  # 6 blocks of 512 records

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        r = np.arange(cls.records)
        cls.label = (r * 7 % 10).astype("<i8")
        cls.vec = np.stack([r, -r - 0.5], axis=1).astype("<f4")
        cls.tag = np.frombuffer(b"".join(b"tag%05d" % i for i in r), dtype=np.uint8).reshape(-1, 8)
        cls.data = assemble_fields(os.path.join(cls.tmp, "fixed"), {
            "label": (cls.label, {"kind": "fixed", "record_size": 8, "dtype": "<i8", "shape": []}),
            "vec": (cls.vec, {"kind": "fixed", "record_size": 8, "dtype": "<f4", "shape": [2]}),
            "tag": (cls.tag, {"kind": "fixed", "record_size": 8}),  # opaque bytes: no dtype
        }, cls.records)
        cls.mount = blockfs.Mount(cls.data, seed=6).open()
        cls.order = blockfs.order(cls.mount, 0)

    @classmethod
    def tearDownClass(cls):
        cls.mount.close()
        super().tearDownClass()

    def check(self, batch):
        ids = batch["ids"].numpy()
        self.assertEqual((batch["label"].dtype, tuple(batch["label"].shape)), (torch.int64, (len(ids),)))
        self.assertEqual((batch["vec"].dtype, tuple(batch["vec"].shape)), (torch.float32, (len(ids), 2)))
        self.assertEqual((batch["tag"].dtype, tuple(batch["tag"].shape)), (torch.uint8, (len(ids), 8)))
        np.testing.assert_array_equal(batch["label"].numpy(), self.label[ids])
        np.testing.assert_array_equal(batch["vec"].numpy(), self.vec[ids])
        np.testing.assert_array_equal(batch["tag"].numpy(), self.tag[ids])
        return ids

    def test_fields(self):
        fs = {f.name: f for f in blockfs.fields(self.mount)}
        self.assertEqual(list(fs), ["label", "vec", "tag"])
        self.assertEqual((fs["label"].dtype, fs["label"].shape, fs["label"].opaque), (np.dtype("<i8"), (), False))
        self.assertEqual((fs["vec"].dtype, fs["vec"].shape), (np.dtype("<f4"), (2,)))
        self.assertEqual((fs["tag"].dtype, fs["tag"].shape, fs["tag"].opaque), (np.dtype(np.uint8), (8,), True))
        self.assertTrue(all(f.fixed and f.record_size == 8 and f.offsets is None for f in fs.values()))
        with self.assertRaisesRegex(ValueError, "field 'vec' is fixed-size .*: it has no offsets file"):
            blockfs.field_path(self.mount, 0, "vec", offsets=True)
        self.assertFalse(os.path.exists(blockfs.field_path(self.mount, 0, "vec") + ".offsets"))
        # Plain reads: the field files are the values back to back in the epoch's order.
        ids = self.order
        np.testing.assert_array_equal(np.fromfile(blockfs.field_path(self.mount, 0, "label"), "<i8"), self.label[ids])
        np.testing.assert_array_equal(np.fromfile(blockfs.field_path(self.mount, 0, "vec"), "<f4").reshape(-1, 2),
                                      self.vec[ids])

    def test_loader(self):
        loader = blockfs.torch.Loader(self.mount, 128, num_workers=2)
        got = []
        for batch in loader:
            self.assertEqual(list(batch), ["ids", "label", "vec", "tag"])
            got.append(self.check(batch))
        np.testing.assert_array_equal(np.concatenate(got), self.order)
        # decode gets the dict of arrays; its dict comes back as tensors.
        decoded = blockfs.torch.Loader(self.mount, 100, fields=["vec", "label"],
                                       decode=lambda b: {"ids": b["ids"], "s": b["vec"].sum(axis=1) + b["label"]})
        for out in decoded:
            ids = out["ids"].numpy()
            np.testing.assert_allclose(out["s"].numpy(), self.vec[ids].sum(axis=1) + self.label[ids])

    def test_reads_only_labels(self):
        with blockfs.Mount(self.data, seed=8) as m:
            before = stats_sources(m)
            loader = blockfs.torch.Loader(m, 256, num_workers=2, fields=["label"])
            got = []
            for batch in loader:
                self.assertEqual(list(batch), ["ids", "label"])
                np.testing.assert_array_equal(batch["label"].numpy(), self.label[batch["ids"].numpy()])
                got.append(batch["ids"].numpy())
            np.testing.assert_array_equal(np.concatenate(got), blockfs.order(m, 0))
            after = stats_sources(m)
            self.assertEqual((after["vec"], after["tag"]), (before["vec"], before["tag"]))
            read = after["label"] - before["label"]
            self.assertGreater(read, 0)
            self.assertLessEqual(read, 1.1 * 8 * self.records)

    def test_resume(self):
        first = blockfs.torch.Loader(self.mount, 128, num_workers=3, fields=["label"])
        it = iter(first)
        head = [next(it)["ids"].numpy() for _ in range(5)]
        state = roundtrip(first.state_dict())
        second = blockfs.torch.Loader(self.mount, 300, num_workers=2)
        second.load_state_dict(state)
        tail = [self.check(b) for b in second]
        np.testing.assert_array_equal(np.concatenate(head + tail), self.order)


class InfoTest(unittest.TestCase):
    """Field names from info.json alone: the tree's patterns, a field's own names, and what a
    reader cannot read by."""

    def info(self, fields, tree=None):
        tree = dict(LEGACY_TREE) if tree is None else tree
        return {"kind": "fields", "records": 10, "tree": tree, "fields": fields}

    def test_names(self):
        entry = {"name": "img", "kind": "variable", "dtype": ""}
        [f] = fields_of(self.info([entry]))  # a tree without field patterns: "." + name
        self.assertEqual((f.file, f.offsets), (".img", ".img.offsets"))
        tree = dict(LEGACY_TREE, field="~%s", field_offsets="~%s~off")
        [f] = fields_of(self.info([entry], tree))
        self.assertEqual((f.file, f.offsets), ("~img", "~img~off"))
        [f] = fields_of(self.info([dict(entry, file="-img", offsets="-img-o")], tree))  # the field's own names
        self.assertEqual((f.file, f.offsets), ("-img", "-img-o"))
        self.assertEqual(Tree.from_info(self.info([], tree)).epoch_file("/m", 2, (1, 4), "~img"), "/m/shard-1-of-4/epoch-0002~img")
        self.assertEqual(fields_of({"kind": "fixed", "records": 1}), [])

    def test_unreadable_fields(self):
        for entries, msg in (
                ([{"name": "x", "kind": "fixed", "record_size": 12, "dtype": "<f4", "shape": [2]}],
                 r"field 'x': record_size 12 is not that of a value of dtype <f4 and shape \[2\] \(8 bytes\)"),
                ([{"name": "x", "kind": "fixed", "dtype": "<f4"}], "field 'x': a fixed field needs a record_size"),
                ([{"name": "x", "kind": "ragged"}], "field 'x': kind 'ragged' is neither fixed nor variable"),
                ([{"name": "x", "kind": "fixed", "record_size": 4, "dtype": "float99"}], "dtype 'float99' is not a numpy dtype"),
                ([{"name": "x", "kind": "variable"}, {"name": "x", "kind": "variable"}], "name a field twice"),
                ([], "its fields are")):
            with self.subTest(msg=msg), self.assertRaisesRegex(ValueError, msg):
                fields_of(self.info(entries))
        with self.assertRaisesRegex(ValueError, "tree: field '.x' is not a pattern of a field's name"):
            Tree.from_info(self.info([], dict(LEGACY_TREE, field=".x")))


TABLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "testdata", "parquet")


class TableTest(Tmp):
    """Parquet (types.parquet, 5000 rows written by DuckDB) and Arrow IPC (types.arrow, 500 rows
    written by Arrow's JavaScript library) from test/testdata/parquet, whose values are formulas
    of the row i (make.js): fixed fields of a dtype, shaped ones (Arrow's fixed-size lists), a
    bool, variable fields of numbers (a Parquet list, as DuckDB writes FLOAT[3]; int32 token
    lists), strings and a struct's leaf."""

    def pack(self, name, columns, *args):
        dst = os.path.join(self.tmp, name + "".join(args))
        p = subprocess.run([blockfs.binary(), "pack", "--quiet", "--columns", ",".join(columns), *args,
                            os.path.join(TABLES, name), dst], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        return dst

    def check_common(self, b, ids):
        """The columns types.parquet and types.arrow share."""
        np.testing.assert_array_equal(b["row"].numpy(), ids)
        for i, t, s, img in zip(ids.tolist(), b["toks"], b["name"], b["img.bytes"]):
            self.assertEqual(t.dtype, torch.int32)
            self.assertEqual(t.tolist(), [i * 10 + x for x in range(i % 6)])
            self.assertEqual(bytes(s.numpy()).decode(), f"name-{i}" + "\u00e9" * (i % 4))
            self.assertEqual(bytes(img.numpy()), b"img%d" % i)

    def test_parquet(self):
        """The fixed fields' values in a block of samples take a few hundred bytes: they are cut
        at blocks of their own (FORMAT.md) and read by the samples' indices."""
        self.parquet()

    def test_parquet_one_block(self):
        """In one block of 16 MiB every field is cut at the samples."""
        self.parquet("--block-size", "16MiB")

    def parquet(self, *args):
        columns = ["row", "i32", "flag", "vec", "toks", "name", "img.bytes", "u64"]
        dst = self.pack("types.parquet", columns, *args)
        with open(os.path.join(dst, "blockfs-fields.json")) as f:
            own = [fl["name"] for fl in json.load(f)["fields"] if fl.get("blocks") == "own"]
        self.assertEqual(own, [] if args else ["row", "i32", "flag", "vec", "u64"])  # small fixed fields
        with blockfs.Mount(dst, seed=1) as m:
            fs = {f.name: f for f in blockfs.fields(m)}
            self.assertEqual(list(fs), columns)
            self.assertEqual((fs["i32"].kind, fs["i32"].dtype, fs["i32"].shape), ("fixed", np.dtype("<i4"), ()))
            # DuckDB's FLOAT[3]: a Parquet list whose every value has 3 elements, so a fixed field.
            self.assertEqual((fs["vec"].kind, fs["vec"].dtype, fs["vec"].shape), ("fixed", np.dtype("<f4"), (3,)))
            self.assertEqual(fs["toks"].kind, "variable")  # lists of 0-5 elements
            self.assertEqual((fs["name"].kind, fs["name"].opaque), ("variable", True))
            if not blockfs.torch._torch_holds(np.dtype("<u8")):
                with self.assertRaisesRegex(ValueError, "field 'u64' has elements of uint64, of which torch .* has no "
                                            "tensor: pass decode="):
                    blockfs.torch.Loader(m, 500)
            n = 0
            for b in blockfs.torch.Loader(m, 500, num_workers=2, fields=columns[:-1]):
                ids = b["ids"].numpy()
                self.check_common(b, ids)
                np.testing.assert_array_equal(b["i32"].numpy(), (ids * 7919 % 20001) - 10000)
                self.assertEqual(b["flag"].dtype, torch.bool)
                np.testing.assert_array_equal(b["flag"].numpy(), ids % 3 == 0)
                self.assertEqual((b["vec"].dtype, tuple(b["vec"].shape)), (torch.float32, (len(ids), 3)))
                np.testing.assert_array_equal(b["vec"].numpy(), np.stack([ids, ids + 0.5, -ids], axis=1).astype("<f4"))
                n += len(ids)
            self.assertEqual(n, 5000)
            # decode takes what torch cannot hold: numpy's uint64, 2^64 - 1 - i.
            def halves(x):
                return (x >> np.uint64(32)).astype(np.int64), (x & np.uint64(0xFFFFFFFF)).astype(np.int64)

            loader = blockfs.torch.Loader(m, 1000, fields=["u64"], decode=lambda b: {"ids": b["ids"], "u64": halves(b["u64"])})
            for out in loader:
                ids = out["ids"].numpy()
                top, low = halves(np.uint64(2**64 - 1) - ids.astype(np.uint64))
                np.testing.assert_array_equal(out["u64"][0].numpy(), top)
                np.testing.assert_array_equal(out["u64"][1].numpy(), low)

    def test_arrow(self):
        columns = ["row", "f16", "vec", "grid", "toks", "name", "img.bytes", "label"]
        with blockfs.Mount(self.pack("types.arrow", columns), seed=1) as m:
            fs = {f.name: f for f in blockfs.fields(m)}
            self.assertEqual((fs["vec"].kind, fs["vec"].dtype, fs["vec"].shape), ("fixed", np.dtype("<f4"), (3,)))
            self.assertEqual((fs["grid"].dtype, fs["grid"].shape), (np.dtype("<i2"), (3, 2)))
            seen = []
            for b in blockfs.torch.Loader(m, 64, num_workers=2):
                self.assertEqual(list(b), ["ids"] + columns)
                ids = b["ids"].numpy()
                self.check_common(b, ids)
                self.assertEqual(b["f16"].dtype, torch.float16)
                np.testing.assert_array_equal(b["f16"].numpy(), ((ids % 1000) / 2 - 200).astype(np.float16))
                self.assertEqual((b["vec"].dtype, tuple(b["vec"].shape)), (torch.float32, (len(ids), 3)))
                np.testing.assert_array_equal(b["vec"].numpy(), np.stack([ids, ids + 0.5, -ids], axis=1).astype("<f4"))
                self.assertEqual((b["grid"].dtype, tuple(b["grid"].shape)), (torch.int16, (len(ids), 3, 2)))
                want = np.stack([np.stack([ids % 100, np.ones_like(ids)], 1), np.stack([2 + 0 * ids, -(ids % 100)], 1),
                                 np.stack([ids % 7, ids % 11], 1)], axis=1)
                np.testing.assert_array_equal(b["grid"].numpy(), want)
                self.assertEqual([bytes(v.numpy()) for v in b["label"]], [(b"cat", b"dog", b"bird")[i % 3] for i in ids])
                seen.extend(ids.tolist())
            self.assertEqual(seen, blockfs.order(m, 0).tolist())


if __name__ == "__main__":
    unittest.main()
