"""Mixtures (several datasets in one epoch, docs/SHUFFLE.md "Mixtures") from Python: a mount's
epoch files against docs/examples/mixture_order.py composed with each source's own order (the
order a mount of that source alone gives with seed_i), and blockfs.torch.Loader over a mixture:
batches (ids, source, records), epochs of different lengths (repeat "1/3"), exact resume at
another worker count, batch size and world size, and what it refuses.

The Loader's checks run twice: on a folder laid out as a mixture's mount from the reference (no
binary needed), and on a real mount."""
import decimal
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from support import needs_mount, roundtrip, run

import blockfs
import blockfs.torch
from blockfs._files import LEGACY_TREE

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "examples"))
import mixture_order  # noqa: E402
from shuffle_order import epoch_order  # noqa: E402

SIZES = (1000, 600)  # records of source 0 ("a") and source 1 ("b")
RECORD = 64  # bytes: eight uint64s, the source + 1 and the record's id first
BLOCK = 64  # records a block (4 KiB blocks)
SEED = 5
B = 64
EPOCHS = 4
# 700 and 300 records an epoch: a continues through its order (a pass in 1.4 epochs), b takes half a pass.
WEIGHTS = {"epoch_records": 1000, "sources": [{"data": "a", "weight": 0.7}, {"data": "b", "name": "books", "weight": 0.3}]}
# a gives 333, 333, 334 records (each once over three epochs), b one pass: epochs of 933, 933, 934.
REPEAT = {"sources": [{"data": "a", "repeat": "1/3"}, {"data": "b", "weight": 1}]}


def records_of(source, n):
    """Source's raw records: record i holds source + 1 and i."""
    rec = np.zeros((n, RECORD // 8), dtype="<u8")
    rec[:, 0], rec[:, 1] = source + 1, np.arange(n)
    return rec


def rules_of(mixture):
    """The reference's rules of mixture (a dict as written to its file), its numbers exact."""
    return mixture_order.parse_mixture(json.loads(json.dumps(mixture), parse_float=decimal.Decimal), SIZES)


def reference(mixture, order_of, epoch):
    """(sources, ids) of epoch of mixture by the reference: mixture_order.epoch's (source, pass,
    position) through order_of(source, pass), the ids of that source's own epoch."""
    placed = mixture_order.epoch(rules_of(mixture), epoch)
    sources = np.array([s for s, _, _ in placed], dtype=np.int64)
    ids = np.array([order_of(s, p)[q] for s, p, q in placed], dtype=np.int64)
    return sources, ids


def check_records(test, source, ids, x):
    """Each record (a row of bytes) is the one (source, id) names."""
    words = np.ascontiguousarray(np.asarray(x, dtype=np.uint8)).view("<u8")
    np.testing.assert_array_equal(words[:, 0], np.asarray(source) + 1)
    np.testing.assert_array_equal(words[:, 1], np.asarray(ids))


class MixtureDigestTest(unittest.TestCase):
    """The digest Mount keeps of a mixture file: its content's; none, at once, for a FIFO in its
    place (no writer: a plain open would wait for ever) or a file past the mount's bound."""

    def test_digest(self):
        from blockfs._mount import MAX_MIXTURE_FILE, _mixture_digest
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "mix.json")
            with open(p, "w") as f:
                f.write('{"sources": []}')
            a = _mixture_digest(p)
            self.assertIsNotNone(a)
            with open(p, "w") as f:
                f.write('{"sources": [ ]}')
            self.assertNotEqual(a, _mixture_digest(p), "edited in place: another digest")
            with open(p, "wb") as f:
                f.truncate(MAX_MIXTURE_FILE + 1)
            self.assertIsNone(_mixture_digest(p), "past the bound")
            fifo = os.path.join(d, "fifo.json")
            os.mkfifo(fifo)
            self.assertIsNone(_mixture_digest(fifo), "a FIFO")
            self.assertIsNone(_mixture_digest(os.path.join(d, "missing.json")))


class LoaderChecks:
    """The Loader over a mixture. A subclass sets path (the repeat mixture: epochs of different
    lengths), want[e] = (sources, ids) of its epochs, and other (the weights mixture)."""

    path: str
    other: str
    want: list

    def collect(self, loader, batches=None):
        """(sources, ids) of the batches loader yields (all, or the first `batches`), checking
        their records."""
        out = []
        for ids, source, x in loader:
            self.assertEqual(source.dtype, ids.dtype)
            check_records(self, source.numpy(), ids.numpy(), x.numpy())
            out.append((source.numpy(), ids.numpy()))
            if batches is not None and len(out) == batches:
                break
        return out

    def assert_epoch(self, got, epoch, start=0):
        np.testing.assert_array_equal(np.concatenate([s for s, _ in got]), self.want[epoch][0][start:])
        np.testing.assert_array_equal(np.concatenate([i for _, i in got]), self.want[epoch][1][start:])

    def test_batches(self):
        lengths = [len(w[0]) for w in self.want]
        self.assertEqual(lengths[:3], [933, 933, 934])
        for workers in (0, 2):
            with self.subTest(workers=workers), blockfs.torch.Loader(self.path, B, num_workers=workers,
                                                                     persistent_workers=workers > 0) as loader:
                for epoch in range(EPOCHS):  # without set_epoch: each epoch its own length
                    self.assertEqual((loader.epoch, loader.epoch_records()), (epoch, lengths[epoch]))
                    self.assertEqual(len(loader), -(-lengths[epoch] // B))
                    got = self.collect(loader)
                    self.assertEqual([len(i) for _, i in got][-1], lengths[epoch] % B or B)
                    self.assert_epoch(got, epoch)
        for e in range(EPOCHS):
            self.assertEqual(blockfs.epoch_records(self.path, e), lengths[e])
            np.testing.assert_array_equal(blockfs.record_sources(self.path, e), self.want[e][0])
            np.testing.assert_array_equal(blockfs.order(self.path, e), self.want[e][1])

    def test_resume_across_workers_batch_size_and_world(self):
        first = blockfs.torch.Loader(self.path, B, num_workers=3)
        first.set_epoch(2)
        head = self.collect(first, batches=5)
        state = roundtrip(first.state_dict())
        self.assertEqual((state["epoch"], state["position"]), (2, 5 * B), "counted as delivered, not as prefetched")
        second = blockfs.torch.Loader(self.path, 100, num_workers=2)
        second.load_state_dict(state)
        second.set_epoch(2)  # a resumed run's loop: keeps the position
        middle = self.collect(second, batches=3)
        third = blockfs.torch.Loader(self.path, 33)
        third.load_state_dict(roundtrip(second.state_dict()))
        tail = self.collect(third)
        self.assert_epoch(head + middle + tail, 2)
        self.assertEqual((third.epoch, third.position), (3, 0))
        self.assert_epoch(self.collect(third), 3)  # on to an epoch of another length
        # Two ranks stop after 4 steps; one rank with 2 workers goes on from there.
        ranks = [blockfs.torch.Loader(self.path, B, num_workers=2, rank=r, world_size=2, epoch=1) for r in range(2)]
        heads = [self.collect(loader, batches=4) for loader in ranks]
        states = [roundtrip(loader.state_dict()) for loader in ranks]
        self.assertEqual(states[0], states[1], "the same state on every rank")
        one = blockfs.torch.Loader(self.path, 50, num_workers=2, rank=0, world_size=1)
        one.load_state_dict(states[0])
        self.assert_epoch(self.collect(one), 1, start=8 * B)
        seen = np.concatenate([i for h in heads for _, i in h])
        np.testing.assert_array_equal(np.sort(seen), np.sort(self.want[1][1][:8 * B]))

    def test_refused(self):
        with self.assertRaisesRegex(ValueError, "labels= is not for a mixture"):
            blockfs.torch.Loader(self.path, B, labels=np.zeros(SIZES[0], dtype=np.int64))
        state = blockfs.torch.Loader(self.path, B, epoch=2).state_dict()
        self.assertIn("sources", state["fingerprint"])
        with self.assertRaisesRegex(ValueError, "other data or options: .*fingerprint"):
            blockfs.torch.Loader(self.other, B).load_state_dict(state)
        loader = blockfs.torch.Loader(self.path, B)
        loader.load_state_dict(dict(state, position=934))  # epoch 2 has 934 records
        self.assertEqual((loader.epoch, len(loader)), (2, 0))
        with self.assertRaisesRegex(ValueError, r"position 934 is out of range \(0 to 933\)"):
            loader.load_state_dict(dict(state, epoch=1, position=934))

    def test_decode_ids_and_errors(self):
        def decode(records, ids, source):
            check_records(self, source, ids, records)
            self.assertFalse(ids.flags.writeable or source.flags.writeable)
            return np.stack([source, ids], axis=1)

        loader = blockfs.torch.Loader(self.path, B, num_workers=1, decode=decode, decode_ids=True)
        got = [(p[:, 0].numpy(), p[:, 1].numpy()) for ids, source, p in loader]
        self.assert_epoch(got, 0)
        bad_id = int(self.want[0][1][3])

        def fails(records):
            if (np.asarray(records).view("<u8")[:, 1] == bad_id).any():
                raise ValueError("bad record")
            return records

        with self.assertRaises(blockfs.torch.DecodeError) as cm:
            next(iter(blockfs.torch.Loader(self.path, 8, decode=fails)))
        failed = [(s, i) for s, i in zip(self.want[0][0][:8].tolist(), self.want[0][1][:8].tolist()) if i == bad_id]
        self.assertEqual(list(zip(cm.exception.sources, cm.exception.ids)), failed)
        self.assertIsNone(cm.exception.names)
        self.assertIn(f"id {bad_id} of source {failed[0][0]}", str(cm.exception))


def fake_mount(root, mixture, name):
    """A folder laid out as a mount of mixture (seed SEED) would be, from the reference: each
    source's own order from shuffle_order.py over blocks of BLOCK records, ids its storage
    indexes. Returns (path, want)."""
    rules = rules_of(mixture)
    seeds = [mixture_order.source_seed(SEED, i) for i in range(len(SIZES))]

    def order_of(s, p):
        blocks = [BLOCK] * (SIZES[s] // BLOCK) + ([SIZES[s] % BLOCK] if SIZES[s] % BLOCK else [])
        return list(epoch_order(blocks, seeds[s], p))

    path = os.path.join(root, name)
    os.makedirs(os.path.join(path, ".blockfs"))
    want = [reference(mixture, order_of, e) for e in range(EPOCHS)]
    raw = [records_of(s, n) for s, n in enumerate(SIZES)]
    for e, (sources, ids) in enumerate(want):
        epoch = os.path.join(path, LEGACY_TREE["epoch"] % e)
        np.concatenate([raw[s][i:i + 1] for s, i in zip(sources, ids)]).tofile(epoch)
        ids.astype("<u8").tofile(epoch + ".ids")
        sources.astype("<u2").tofile(epoch + ".source")
    counts = mixture_order.counts(rules, 0)
    info = {
        "kind": "fixed", "record_size": RECORD, "records": sum(counts), "fingerprint": "fake-" + name, "seed": SEED,
        "epoch_records_vary": len({len(w[0]) for w in want}) > 1,
        "mixture": {"file": os.path.join(root, name + ".json"), "fingerprint": "fake-" + name,
                    "epoch_records": mixture.get("epoch_records")},
        "sources": [{"index": i, "name": src.get("name", src["data"]), "data": os.path.join(root, src["data"]),
                     "fingerprint": f"fake-{src['data']}", "kind": "fixed", "record_size": RECORD, "records": SIZES[i],
                     "rule": rules[i]["rule"], "value": str(src[rules[i]["rule"]]), "records_per_epoch": counts[i],
                     "seed": seeds[i], "shuffle": "full", "mix": 1} for i, src in enumerate(mixture["sources"])],
        "source_dtype": "<u2", "tree": dict(LEGACY_TREE, source=".source"),
    }
    with open(os.path.join(path, ".blockfs", "info.json"), "w") as f:
        json.dump(info, f)
    return path, want


class FakeMixtureTest(LoaderChecks, unittest.TestCase):
    """The Loader over a folder laid out as a mixture's mount."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="blockfs-mix-")
        cls.path, cls.want = fake_mount(cls.tmp, REPEAT, "repeat")
        cls.other, _ = fake_mount(cls.tmp, WEIGHTS, "weights")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_one_dataset_has_no_sources(self):
        info = blockfs.read_info(self.path)
        del info["sources"], info["mixture"], info["tree"]["source"], info["epoch_records_vary"]
        one = os.path.join(self.tmp, "one")
        shutil.copytree(self.path, one)
        with open(os.path.join(one, ".blockfs", "info.json"), "w") as f:
            json.dump(info, f)
        ids, x = next(iter(blockfs.torch.Loader(one, B)))  # (ids, records): no source
        np.testing.assert_array_equal(ids.numpy(), self.want[0][1][:B])
        with self.assertRaisesRegex(ValueError, "not of a mixture"):
            blockfs.record_sources(one, 0)
        self.assertNotIn("sources", blockfs.torch.Loader(one, B).state_dict()["fingerprint"])

    def test_reference_command(self):
        # mixture_order.py's command prints what its functions give; --blocks adds the storage
        # index of each record in its source's own order (here its id).
        path = os.path.join(self.tmp, "repeat.json")
        with open(path, "w") as f:
            json.dump(REPEAT, f)
        blocks = ";".join(",".join(str(min(BLOCK, n - b)) for b in range(0, n, BLOCK)) for n in SIZES)
        out = subprocess.run([sys.executable, mixture_order.__file__, "--mixture", path, "--blocks", blocks, "--seed",
                              str(SEED), "--epoch", "2"], capture_output=True, text=True, check=True).stdout
        rows = [tuple(int(v) for v in line.split()) for line in out.splitlines()]
        self.assertEqual([r[:3] for r in rows], mixture_order.epoch(rules_of(REPEAT), 2))
        self.assertEqual([(r[0], r[3]) for r in rows], list(zip(*(w.tolist() for w in self.want[2]))))

    def test_mount_of_an_edited_mixture_is_another(self):
        # Mount's default mountpoint (shared by a node's processes) follows the mixture file's
        # content: a job started after an edit does not attach to the old mixture's mount.
        path = os.path.join(self.tmp, "edited.json")

        def mountpoint(mixture):
            with open(path, "w") as f:
                json.dump(mixture, f)
            return blockfs.Mount(path, seed=SEED).path  # not opened: nothing mounted

        first = mountpoint(WEIGHTS)
        self.assertEqual(mountpoint(WEIGHTS), first)
        self.assertNotEqual(mountpoint(dict(WEIGHTS, epoch_records=999)), first)


@needs_mount
class MountedMixtureTest(LoaderChecks, unittest.TestCase):
    """Mixtures mounted with blockfs.Mount against the reference, and the Loader over one."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="blockfs-mix-")
        cls.mounts = []
        try:
            for s, (name, n) in enumerate(zip("ab", SIZES)):
                raw = os.path.join(cls.tmp, name + ".raw")
                records_of(s, n).tofile(raw)
                run("pack", "--quiet", "--format", "raw", "--record-size", str(RECORD), "--block-size", "4KiB", raw,
                    os.path.join(cls.tmp, name))
            cls.files = {}
            for name, mixture in (("weights", WEIGHTS), ("repeat", REPEAT)):
                cls.files[name] = os.path.join(cls.tmp, name + ".json")  # its sources relative to it
                with open(cls.files[name], "w") as f:
                    json.dump(mixture, f)
            cls.weights = cls.open(cls.files["weights"], seed=SEED, cache_size="8MiB", readahead="64KiB")
            cls.repeat = cls.open(cls.files["repeat"], seed=SEED, cache_size="8MiB", readahead="64KiB")
            # Each source alone, with its seed in the mixture: its own epochs are the passes.
            cls.alone = [cls.open(os.path.join(cls.tmp, name), seed=mixture_order.source_seed(SEED, s))
                         for s, name in enumerate("ab")]
        except BaseException:
            cls.tearDownClass()
            raise
        cls.passes = {}
        cls.path, cls.other = cls.repeat.path, cls.weights.path
        cls.want = [reference(REPEAT, cls.order_of, e) for e in range(EPOCHS)]

    @classmethod
    def open(cls, data, **options):
        m = blockfs.Mount(data, **options).open()
        cls.mounts.append(m)
        return m

    @classmethod
    def tearDownClass(cls):
        for m in reversed(cls.mounts):
            m.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def order_of(cls, source, p):
        """Source's epoch p (its pass p in a mixture), as its own mount gives it."""
        if (source, p) not in cls.passes:
            cls.passes[source, p] = blockfs.order(cls.alone[source], p).tolist()
        return cls.passes[source, p]

    def test_info(self):
        for m, mixture, name in ((self.weights, WEIGHTS, "weights"), (self.repeat, REPEAT, "repeat")):
            with self.subTest(mixture=name):
                info, rules = m.info, rules_of(mixture)
                counts = mixture_order.counts(rules, 0)
                self.assertEqual(info["records"], sum(counts))
                self.assertEqual(info["epoch_records_vary"], name == "repeat")
                self.assertEqual(info["mixture"]["file"], self.files[name])
                self.assertEqual(info["mixture"]["fingerprint"], info["fingerprint"])
                self.assertEqual(info["mixture"]["epoch_records"], mixture.get("epoch_records"))
                self.assertEqual((info["kind"], info["record_size"]), ("fixed", RECORD))
                self.assertEqual(info["source_dtype"], "<u2")
                self.assertEqual(info["tree"]["source"], ".source")
                self.assertEqual(info["seed"], SEED)
                self.assertEqual(len(info["sources"]), len(SIZES))
                for i, (src, alone) in enumerate(zip(info["sources"], self.alone)):
                    rule = rules[i]["rule"]
                    self.assertEqual(src["index"], i)
                    self.assertEqual(src["name"], mixture["sources"][i].get("name", mixture["sources"][i]["data"]))
                    self.assertEqual(src["data"], os.path.join(self.tmp, "ab"[i]))
                    self.assertEqual((src["rule"], src["value"]), (rule, str(mixture["sources"][i][rule])))
                    self.assertEqual((src["records"], src["records_per_epoch"]), (SIZES[i], counts[i]))
                    self.assertEqual(src["seed"], mixture_order.source_seed(SEED, i))
                    for k in ("fingerprint", "kind", "record_size", "shuffle", "mix"):
                        self.assertEqual(src[k], alone.info[k], k)
        self.assertNotIn("sources", self.alone[0].info)
        self.assertNotIn("mixture", self.alone[0].info)
        self.assertNotIn("source", self.alone[0].info.get("tree", {}))

    def test_files_against_reference(self):
        for m, mixture in ((self.weights, WEIGHTS), (self.repeat, REPEAT)):
            for e in range(EPOCHS):
                with self.subTest(mixture=m.data, epoch=e):
                    sources, ids = reference(mixture, self.order_of, e)
                    np.testing.assert_array_equal(blockfs.record_sources(m, e), sources)
                    np.testing.assert_array_equal(blockfs.order(m, e), ids)
                    with open(blockfs.epoch_path(m, e), "rb") as f:
                        check_records(self, sources, ids, np.frombuffer(f.read(), dtype=np.uint8).reshape(-1, RECORD))
                    n = len(ids)
                    self.assertEqual(blockfs.epoch_records(m, e), n)
                    start, end = blockfs.shard_range(n, 1, 3)
                    np.testing.assert_array_equal(blockfs.record_sources(m, e, shard="1/3"), sources[start:end])
                    np.testing.assert_array_equal(blockfs.order(m, e, shard="1/3"), ids[start:end])
        # repeat 1/3: over three epochs each record of a once, in its own first epoch's order.
        a = np.concatenate([w[1][w[0] == 0] for w in self.want[:3]])
        self.assertEqual(a.tolist(), self.order_of(0, 0))
        # weights 0.7/0.3 of 1000: a's 700 a epoch run on through its passes.
        a = np.concatenate([blockfs.order(self.weights, e)[blockfs.record_sources(self.weights, e) == 0] for e in range(3)])
        self.assertEqual(a.tolist(), self.order_of(0, 0) + self.order_of(0, 1) + self.order_of(0, 2)[:100])

    def test_share_in_every_batch(self):
        # Two sources: every run of B records holds each one's share to within one of floor/ceil.
        sources = blockfs.record_sources(self.weights, 1)
        held = np.convolve(sources == 1, np.ones(B, dtype=np.int64), mode="valid")
        share = B * 300 / 1000
        self.assertGreaterEqual(held.min(), np.floor(share) - 1)
        self.assertLessEqual(held.max(), np.ceil(share) + 1)

    def test_records_of_two_sizes(self):
        # Fixed-size records and lines: a variable-length epoch, read through its offsets.
        lines = [f"line {i} " + "x" * (i % 37) for i in range(300)]
        src = os.path.join(self.tmp, "lines.txt")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        run("pack", "--quiet", "--block-size", "2KiB", src, os.path.join(self.tmp, "lines"))
        path = os.path.join(self.tmp, "two-sizes.json")
        with open(path, "w") as f:
            json.dump({"sources": [{"data": "a", "records": 200}, {"data": "lines", "repeat": 0.5}]}, f)
        with blockfs.Mount(path, seed=SEED) as m:
            self.assertEqual((m.info["kind"], m.info["records"]), ("variable", 350))
            seen = []
            for ids, source, recs in blockfs.torch.Loader(m, 48, num_workers=2):
                for i, s, r in zip(ids.tolist(), source.tolist(), recs):
                    if s == 0:
                        check_records(self, [0], [i], r.numpy()[None])
                    else:
                        self.assertEqual(bytes(r.numpy()).decode(), lines[i])
                    seen.append((s, i))
            self.assertEqual([s for s, _ in seen], blockfs.record_sources(m, 0).tolist())
            self.assertEqual([i for _, i in seen], blockfs.order(m, 0).tolist())
            self.assertEqual(sum(s for s, _ in seen), 150)

    def test_attach(self):
        m = blockfs.attach(self.repeat.path)
        self.assertEqual(m.data, self.files["repeat"])
        self.assertEqual(m.info["fingerprint"], self.repeat.info["fingerprint"])


if __name__ == "__main__":
    unittest.main()
