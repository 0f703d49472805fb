"""blockfs.torch.Loader against a real mount: exact order at any worker count, ranks exactly
once, resume across worker counts, batch sizes and world sizes, foreign states refused."""
import errno
import multiprocessing
import os
import time
import unittest

import numpy as np

from support import Scratch, pack_npy, roundtrip, run, write_names

import blockfs
import blockfs.torch
import blockfs._readahead

B = 64


class LoaderTest(Scratch):
    n = 5000  # 79 batches of 64, the last short

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.mount = blockfs.Mount(cls.data, seed=7, mix=2, cache_size="8MiB", readahead="64KiB").open()
        cls.orders = [blockfs.order(cls.mount, e) for e in range(3)]

    @classmethod
    def tearDownClass(cls):
        cls.mount.close()
        super().tearDownClass()

    def collect(self, loader, batches=None):
        """ids of the batches loader yields (all, or the first `batches`), checking records."""
        out = []
        for ids, x in loader:
            ids, x = ids.cpu().numpy(), x.cpu().numpy()  # device=: on that device
            self.check_records(ids, x)
            out.append(ids)
            if batches is not None and len(out) == batches:
                break
        return out

    def test_order_any_workers(self):
        # The batches are the epoch file in order, cut into batches, whatever the workers.
        for workers in (0, 2, 3):
            for persistent in ((False, True) if workers else (False,)):
                with self.subTest(workers=workers, persistent=persistent):
                    loader = blockfs.torch.Loader(self.mount, B, num_workers=workers, persistent_workers=persistent)
                    for epoch in range(3):
                        loader.set_epoch(epoch)
                        self.assertEqual(len(loader), -(-self.n // B))
                        got = self.collect(loader)
                        self.assertEqual([len(b) for b in got], [B] * (self.n // B) + [self.n % B])
                        np.testing.assert_array_equal(np.concatenate(got), self.orders[epoch])
                        self.assertEqual((loader.epoch, loader.position), (epoch + 1, 0))
                    loader.close()
        self.assertFalse((self.orders[0] == self.orders[1]).all())

    def test_files_read_direct(self):
        # Through the files (shm=False) reads of DIRECT_READ bytes or more go through O_DIRECT,
        # and a file system that refuses an O_DIRECT read (EINVAL) has the same read buffered:
        # the batches are the same either way.
        import fcntl
        import blockfs._batches as batches
        keep, preadv = batches.DIRECT_READ, batches.os.preadv
        refused = []

        def refusing(fd, bufs, off):
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
                refused.append(off)
                raise OSError(errno.EINVAL, "Invalid argument")
            return preadv(fd, bufs, off)

        try:
            batches.DIRECT_READ = 1024  # a batch of 64 records is 2 KiB; its ids 512 B
            for refuse in (False, True):
                with self.subTest(refuse=refuse):
                    if refuse:
                        batches.os.preadv = refusing
                    loader = blockfs.torch.Loader(self.mount, B, shm=False)
                    loader.set_epoch(1)
                    got = self.collect(loader)
                    np.testing.assert_array_equal(np.concatenate(got), self.orders[1])
                    self.assertGreater(loader._batches.direct_reads, 0)
                    self.assertEqual(loader._batches.no_direct, refuse)
                    self.assertEqual(len(refused), 1 if refuse else 0, "refused once, then buffered")
                    loader.close()
        finally:
            batches.DIRECT_READ, batches.os.preadv = keep, preadv

    def test_epoch_is_a_whole_number(self):
        # set_epoch(1.5) became epoch 1, silently; a numpy integer is an epoch as an int is.
        loader = blockfs.torch.Loader(self.mount, B)
        with self.assertRaisesRegex(TypeError, "an epoch is a whole number"):
            loader.set_epoch(1.5)
        with self.assertRaisesRegex(TypeError, "an epoch is a whole number"):
            loader.set_epoch("1")
        with self.assertRaisesRegex(ValueError, "epochs count from 0"):
            loader.set_epoch(-1)
        with self.assertRaisesRegex(TypeError, "an epoch is a whole number"):
            blockfs.torch.Loader(self.mount, B, epoch=2.0)
        loader.set_epoch(np.int64(2))
        self.assertEqual(loader.epoch, 2)
        loader.close()

    def test_epochs_advance_without_set_epoch(self):
        loader = blockfs.torch.Loader(self.mount, 1000, num_workers=2, persistent_workers=True, epoch=1)
        with loader:
            for epoch in (1, 2):
                np.testing.assert_array_equal(np.concatenate(self.collect(loader)), self.orders[epoch])

    def test_next_epoch_read_ahead(self):
        # With num_workers=0 the thread goes on into the next epoch once this one is read, so
        # that its first batch is not read with the trainer waiting; whatever comes next (that
        # epoch, another, a resumed position) gets its own batches.
        loader = blockfs.torch.Loader(self.mount, B, prefetch_factor=2)
        with loader:
            np.testing.assert_array_equal(np.concatenate(self.collect(loader)), self.orders[0])
            carried = loader._carried
            self.assertIsNotNone(carried, "the epoch's thread goes on into the next")
            for _ in range(100):  # it reads the next epoch's first batches, as many as it may hold
                if carried._q.full():
                    break
                time.sleep(0.05)
            self.assertTrue(carried._q.full(), "the next epoch's first batches are read before it is iterated")
            np.testing.assert_array_equal(np.concatenate(self.collect(loader)), self.orders[1])
            self.assertIs(loader._carried, carried, "the same thread goes on")
            self.assertEqual(carried.epoch, 2)
            loader.set_epoch(0)  # another epoch than the one read ahead
            np.testing.assert_array_equal(np.concatenate(self.collect(loader)), self.orders[0])
            state = {**loader.state_dict(), "epoch": 1, "position": 10 * B}
            loader.load_state_dict(state)  # epoch 1, but not from its start
            np.testing.assert_array_equal(np.concatenate(self.collect(loader)), self.orders[1][10 * B:])
            self.collect(loader, batches=3)  # broken off: nothing is carried
            self.assertIsNone(loader._carried)
            np.testing.assert_array_equal(np.concatenate(self.collect(loader)), self.orders[2][3 * B:])
        self.assertIsNone(loader._carried, "close stops the thread")
        self.assertFalse(carried._thread.is_alive())

    def test_dropped_loader_stops_its_thread(self):
        # A loader dropped without close() (a notebook cell run again) lets its read-ahead
        # thread go with it, and the batches it held.
        loader = blockfs.torch.Loader(self.mount, B)
        self.collect(loader)
        carried = loader._carried
        self.assertTrue(carried._thread.is_alive())
        del loader
        for _ in range(50):
            if not carried._thread.is_alive():
                break
            time.sleep(0.05)
        self.assertFalse(carried._thread.is_alive(), "no cycle keeps the loader, and its thread, alive")

    def test_exit_stops_read_ahead(self):
        # The interpreter's exit stops a read-ahead thread making the next epoch's batches
        # (inside torch as torch is torn down, it aborted processes on 16 cores).
        loader = blockfs.torch.Loader(self.mount, B)
        self.collect(loader)
        carried = loader._carried
        self.assertTrue(carried._thread.is_alive())
        blockfs._readahead._stop_all()  # what atexit runs
        self.assertFalse(carried._thread.is_alive())

    def test_device(self):
        # device=: the same batches, each tensor on that device, the position counting a batch
        # once it is yielded (a CUDA device's copies run a batch ahead); a device this process
        # cannot use is refused in one line.
        import torch
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        for workers in (0, 2):
            with self.subTest(workers=workers), blockfs.torch.Loader(self.mount, B, num_workers=workers, device=dev) as loader:
                loader.set_epoch(1)
                got = []
                for i, (ids, x) in enumerate(loader):
                    self.assertEqual((ids.device.type, x.device.type), (dev, dev))
                    self.check_records(ids.cpu().numpy(), x.cpu().numpy())
                    got.append(ids.cpu().numpy())
                    self.assertEqual((loader.epoch, loader.position), (1, min((i + 1) * B, self.n)))
                np.testing.assert_array_equal(np.concatenate(got), self.orders[1])
        for bad, why in (("gpu7", "is not a torch device"), ("cuda:99", "CUDA device")):
            with self.subTest(device=bad), self.assertRaisesRegex(ValueError, f"^device='{bad}'.*{why}"):
                blockfs.torch.Loader(self.mount, B, device=bad)

    def test_close_stops_persistent_workers(self):
        loader = blockfs.torch.Loader(self.mount, 1000, num_workers=2, persistent_workers=True)
        before = set(multiprocessing.active_children())
        np.testing.assert_array_equal(np.concatenate(self.collect(loader)), self.orders[0])
        workers = set(multiprocessing.active_children()) - before
        self.assertEqual(len(workers), 2, "persistent workers outlive the epoch")
        loader.close()
        self.assertEqual([w for w in workers if w.is_alive()], [], "close stops them")
        # A closed loader goes on from where it was, with new workers; close ends an iteration
        # in progress too.
        it = iter(loader)
        np.testing.assert_array_equal(next(it)[0].numpy(), self.orders[1][:1000])
        loader.close()
        self.assertEqual(set(multiprocessing.active_children()) - before, set())
        self.assertEqual(list(it), [])
        self.assertEqual((loader.epoch, loader.position), (1, 1000))

    def test_ranks_exactly_once(self):
        for world in (1, 2, 3):
            for drop_last in (False, True):
                with self.subTest(world=world, drop_last=drop_last):
                    per_rank = []
                    for rank in range(world):
                        loader = blockfs.torch.Loader(self.mount, B, num_workers=2 if rank == 0 else 0, rank=rank,
                                                      world_size=world, drop_last=drop_last)
                        n = len(loader)
                        per_rank.append(self.collect(loader))
                        self.assertEqual(len(per_rank[-1]), n)
                    steps = self.n // (B * world)
                    for s in range(steps):  # global step s, rank r: positions s*B*W + r*B, B of them
                        for r in range(world):
                            np.testing.assert_array_equal(per_rank[r][s], self.orders[0][(s * world + r) * B:(s * world + r + 1) * B])
                    seen = np.concatenate([np.concatenate(b) for b in per_rank])
                    self.assertEqual(len(seen), len(np.unique(seen)), "ranks are disjoint")
                    if drop_last:
                        self.assertEqual({len(b) for b in per_rank}, {steps}, "equal batch counts")
                        self.assertEqual(len(seen), steps * B * world)
                    else:
                        self.assertEqual(sorted(seen), sorted(self.orders[0]), "together, the epoch once")
                        self.assertEqual(len({len(b) for b in per_rank}), 1, "a short last step is split evenly")

    def test_resume_across_workers_and_batch_size(self):
        first = blockfs.torch.Loader(self.mount, B, num_workers=3)
        first.set_epoch(1)
        head = self.collect(first, batches=10)
        state = roundtrip(first.state_dict())
        self.assertEqual((state["epoch"], state["position"]), (1, 10 * B), "counted as delivered, not as prefetched")
        second = blockfs.torch.Loader(self.mount, 100, num_workers=2)
        second.load_state_dict(state)
        second.set_epoch(1)  # a resumed run's loop: keeps the position
        middle = self.collect(second, batches=7)
        # A resume of a resume, with yet another batch size and no workers.
        third = blockfs.torch.Loader(self.mount, 33)
        third.load_state_dict(roundtrip(second.state_dict()))
        tail = self.collect(third)
        np.testing.assert_array_equal(np.concatenate(head + middle + tail), self.orders[1])
        self.assertEqual((third.epoch, third.position), (2, 0))

    def test_resume_world_2_to_1(self):
        loaders = [blockfs.torch.Loader(self.mount, B, num_workers=2, rank=r, world_size=2) for r in range(2)]
        heads = [self.collect(loader, batches=5) for loader in loaders]
        states = [roundtrip(loader.state_dict()) for loader in loaders]
        self.assertEqual(states[0], states[1], "the same state on every rank")
        one = blockfs.torch.Loader(self.mount, B, num_workers=3, rank=0, world_size=1)
        one.load_state_dict(states[0])
        rest = self.collect(one)
        seen = np.concatenate([np.concatenate(h) for h in heads] + rest)
        self.assertEqual(sorted(seen), sorted(self.orders[0]))
        np.testing.assert_array_equal(np.concatenate(rest), self.orders[0][10 * B:])

    def test_resume_at_boundary(self):
        loader = blockfs.torch.Loader(self.mount, B, num_workers=2)
        self.collect(loader)
        state = roundtrip(loader.state_dict())
        self.assertEqual((state["epoch"], state["position"]), (1, 0))
        again = blockfs.torch.Loader(self.mount, 128, world_size=1, rank=0)
        again.load_state_dict(state)
        np.testing.assert_array_equal(np.concatenate(self.collect(again)), self.orders[1])

    def test_foreign_state_refused(self):
        loader = blockfs.torch.Loader(self.mount, B)
        state = loader.state_dict()
        with blockfs.Mount(self.data, seed=8, mix=2) as other:
            with self.assertRaisesRegex(ValueError, "seed 7 in the state, 8 in this mount"):
                blockfs.torch.Loader(other, B).load_state_dict(state)
        with blockfs.Mount(self.data, seed=7) as other:
            with self.assertRaisesRegex(ValueError, "mix 2 in the state, 1 in this mount"):
                blockfs.torch.Loader(other, B).load_state_dict(state)
        data2 = pack_npy(self.tmp, "other", self.n, "--seed", "1")
        with blockfs.Mount(data2, seed=7, mix=2) as other:
            with self.assertRaisesRegex(ValueError, "fingerprint"):
                blockfs.torch.Loader(other, B).load_state_dict(state)
        for bad in ({}, {"format": "blockfs-loader", "version": 99}, dict(state, position=self.n + 1)):
            with self.assertRaises(ValueError):
                loader.load_state_dict(bad)
        # Every field typed: a missing epoch, an epoch past 2^64, positions that are not whole
        # record counts, a fingerprint that is not one.
        no_epoch = {k: v for k, v in state.items() if k != "epoch"}
        for bad, msg in ((no_epoch, "has no 'epoch'"), (dict(state, epoch=2**64), "epoch 18446744073709551616 is out of range"),
                         (dict(state, position=5000.9), r"position 5000.9 is not an integer \(float\)"),
                         (dict(state, position="5000"), "position '5000' is not an integer"),
                         (dict(state, position=True), r"position True is not an integer \(bool\)"),
                         (dict(state, fingerprint=None), "fingerprint None is not a dict")):
            with self.assertRaisesRegex(ValueError, msg):
                loader.load_state_dict(bad)
        loader.load_state_dict(dict(state, position=np.int64(3)))
        self.assertEqual(loader.position, 3)

    def test_order_version_in_state(self):
        # Orders of windows this small are the same in versions 1 and 2 (info.json's
        # order.versions): a state of either, or of a blockfs from before versions (no
        # order_version: version 1), resumes here.
        self.assertEqual(self.mount.info["order"]["versions"], [1, 2])
        loader = blockfs.torch.Loader(self.mount, B)
        state = loader.state_dict()
        self.assertEqual(state["fingerprint"]["order_version"], 2)
        old = dict(state, fingerprint={k: v for k, v in state["fingerprint"].items() if k != "order_version"})
        for st in (old, dict(state, fingerprint=dict(state["fingerprint"], order_version=1))):
            loader.load_state_dict(dict(st, position=64))
            self.assertEqual(loader.position, 64)
        # 6 M one-byte records in one window: version 2 permutes it otherwise than version 1,
        # and a state of one is refused by the other, saying how to resume.
        raw = os.path.join(self.tmp, "bytes.bin")
        with open(raw, "wb") as f:
            f.truncate(6_000_000)
        with self.assertWarnsRegex(blockfs.OrderWarning, "held down by its order state in order version 1"):
            v1 = blockfs.Mount(raw, dtype="uint8", order_version=1).open()
        with v1, blockfs.Mount(raw, dtype="uint8") as v2:
            self.assertEqual((v1.info["order_version"], v1.info["order"]["versions"]), (1, [1]))
            self.assertEqual((v2.info["order_version"], v2.info["order"]["versions"]), (2, [2]))
            state = blockfs.torch.Loader(v1, B).state_dict()
            with self.assertRaisesRegex(ValueError, r"order_version 1 in the state, 2 in this mount.*--order-version 1"):
                blockfs.torch.Loader(v2, B).load_state_dict(state)
            older = dict(state, fingerprint={k: v for k, v in state["fingerprint"].items() if k != "order_version"})
            with self.assertRaisesRegex(ValueError, r"order_version 1 in the state.*--order-version 1"):
                blockfs.torch.Loader(v2, B).load_state_dict(older)
            self.assertNotIn("order_version", older["fingerprint"], "the caller's state is left as it was")
            blockfs.torch.Loader(v1, B).load_state_dict(state)

    def test_labels_and_decode(self):
        labels = (np.arange(self.n) * 7) % 10
        path = os.path.join(self.tmp, "labels.npy")
        np.save(path, labels)
        loader = blockfs.torch.Loader(self.mount, B, num_workers=2, labels=path, decode=lambda x: x.sum(axis=1))
        n = 0
        for ids, sums, labs in loader:
            ids = ids.numpy()
            np.testing.assert_array_equal(labs.numpy(), labels[ids])
            np.testing.assert_allclose(sums.numpy(), ids * 64.0 + 28, rtol=1e-6)
            n += len(ids)
        self.assertEqual(n, self.n)
        with self.assertRaisesRegex(ValueError, "labels has 10 entries"):
            blockfs.torch.Loader(self.mount, B, labels=labels[:10])

    def test_rank_from_environment(self):
        env = dict(os.environ)
        try:
            os.environ.update(RANK="1", WORLD_SIZE="2")
            loader = blockfs.torch.Loader(self.mount, B)
        finally:
            os.environ.clear()
            os.environ.update(env)
        self.assertEqual((loader.rank, loader.world_size), (1, 2))
        np.testing.assert_array_equal(next(iter(loader))[0].numpy(), self.orders[0][B:2 * B])


def _ddp_rank(rank, world, init, mount, out):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        loader = blockfs.torch.Loader(mount, B, num_workers=1, drop_last=True)  # rank, world from dist
        ids = np.concatenate([b[0].numpy() for b in loader])
        np.save(os.path.join(out, "rank%d.npy" % rank), ids)
        state = loader.state_dict()
        assert (loader.rank, loader.world_size) == (rank, world), (loader.rank, loader.world_size)
        dist.barrier()
        return state
    finally:
        dist.destroy_process_group()


class DistributedTest(Scratch):
    def test_ranks_from_torch_distributed(self):
        import torch.multiprocessing as mp
        with blockfs.Mount(self.data, seed=11) as m:
            init = "file://" + os.path.join(self.tmp, "ddp-init")
            mp.spawn(_ddp_rank, args=(2, init, m.path, self.tmp), nprocs=2, join=True)
            got = [np.load(os.path.join(self.tmp, "rank%d.npy" % r)) for r in range(2)]
            order = blockfs.order(m, 0)
        self.assertEqual(len(got[0]), len(got[1]))
        steps = self.n // (2 * B)
        for r in range(2):
            want = np.concatenate([order[(2 * s + r) * B:(2 * s + r + 1) * B] for s in range(steps)])
            np.testing.assert_array_equal(got[r], want)


class VariableTest(Scratch):
    def test_lines(self):
        src = os.path.join(self.tmp, "lines.txt")
        lines = [("line %d " % i) + "x" * (i % 97) for i in range(3000)]
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        from support import run
        dst = os.path.join(self.tmp, "lines")
        run("pack", "--quiet", "--block-size", "8KiB", src, dst)
        with blockfs.Mount(dst, seed=2) as m:
            order = blockfs.order(m, 0)
            loader = blockfs.torch.Loader(m, 50, num_workers=2)
            got = []
            for ids, recs in loader:
                for i, r in zip(ids.tolist(), recs):
                    self.assertEqual(bytes(r.numpy()).decode(), lines[i])
                got.extend(ids.tolist())
            self.assertEqual(got, order.tolist())
            decoded = blockfs.torch.Loader(m, 50, decode=lambda recs: [bytes(r).decode() for r in recs])
            ids, texts = next(iter(decoded))
            self.assertEqual(texts, [lines[i] for i in ids.tolist()])


class DecodeTest(Scratch):
    n = 10

    def test_decode_ids_and_errors(self):
        bad = ("b/broken.rec", "notes.txt")
        names = [f"{c}/{i:03d}.rec" for c in "ab" for i in range(40)] + list(bad)

        def content(name):
            return b"BAD" if name in bad else f"REC {name}".encode()

        def decode(recs):
            out = []
            for r in recs:
                b = bytes(r)
                if not b.startswith(b"REC "):
                    raise ValueError(f"not a record: {b[:8]!r}")
                out.append(b[4:].decode())
            return out

        root = write_names(os.path.join(self.tmp, "folder"), names, content)
        dst = os.path.join(self.tmp, "folder-ds")
        run("pack", "--quiet", "--block-size", "1KiB", root, dst)
        with blockfs.Mount(dst, seed=3) as m:
            by_id = blockfs.record_names(m)
            self.assertEqual(sorted(by_id), sorted(names))
            # decode_ids: decode(records, ids), ids the batch's record ids.
            seen = []
            loader = blockfs.torch.Loader(m, 16, num_workers=1, decode_ids=True,
                                          decode=lambda recs, ids: [(int(i), bytes(r)) for i, r in zip(ids, recs)])
            for ids, pairs in loader:
                self.assertEqual([i for i, _ in pairs], ids.tolist())
                for i, b in pairs:
                    self.assertEqual(b, content(by_id[i]))
                seen += ids.tolist()
            self.assertEqual(seen, blockfs.order(m, 0).tolist())
            # decode(records) as before; a failure names the records it fails on.
            want = sorted(by_id.index(n) for n in bad)
            for workers in (0, 1):
                loader = blockfs.torch.Loader(m, len(names), num_workers=workers, decode=decode)
                with self.assertRaises(blockfs.torch.DecodeError) as cm:
                    next(iter(loader))
                msg = str(cm.exception)
                self.assertIn("decode failed on 2 records: ", msg)
                for n in bad:
                    self.assertIn(f"id {by_id.index(n)} ({n})", msg)
                self.assertIn("in the batch of epoch 0, positions [0, 82): ValueError: not a record: b'BAD'", msg)
                if workers == 0:
                    self.assertEqual(sorted(cm.exception.ids), want)
                    self.assertEqual(sorted(cm.exception.names), sorted(bad))
                    self.assertIsInstance(cm.exception.__cause__, ValueError)
            # A batch that fails only as a whole is named whole.
            def one_at_a_time(recs):
                if len(recs) > 1:
                    raise RuntimeError("one at a time")
                return recs

            loader = blockfs.torch.Loader(m, 4, decode=one_at_a_time)
            with self.assertRaisesRegex(blockfs.torch.DecodeError, r"decode failed on the batch of epoch 0, positions "
                                        r"\[0, 4\) \(id \d+ \(\w/\S+\), .*\), though each of its records decodes alone"):
                next(iter(loader))
        # Without names (not packed from a folder), ids alone.
        with blockfs.Mount(self.data) as m:
            loader = blockfs.torch.Loader(m, 5, decode=lambda x: 1 / 0)
            first = blockfs.order(m, 0)[:5].tolist()
            with self.assertRaises(blockfs.torch.DecodeError) as cm:
                next(iter(loader))
            self.assertEqual(cm.exception.ids, first)
            self.assertIsNone(cm.exception.names)
            self.assertIn(f"decode failed on 5 records: id {first[0]}, id {first[1]}", str(cm.exception))
            with self.assertRaisesRegex(ValueError, "decode_ids=True needs a decode function"):
                blockfs.torch.Loader(m, 5, decode_ids=True)


class WindowTest(Scratch):
    def test_windows_are_records(self):
        src = os.path.join(self.tmp, "series.npy")
        rows = np.arange(2000 * 3, dtype=np.float32).reshape(2000, 3)
        np.save(src, rows)
        with blockfs.Mount(src, window=16, stride=4, block_size="4KiB", seed=1) as m:
            loader = blockfs.torch.Loader(m, 32, num_workers=2)
            starts = []
            for ids, x in loader:
                self.assertEqual(tuple(x.shape[1:]), (16, 3))
                for s, w in zip(ids.tolist(), x.numpy()):
                    np.testing.assert_array_equal(w, rows[s:s + 16])
                starts.extend(ids.tolist())
            self.assertEqual(sorted(starts), list(range(0, 2000 - 16 + 1, 4)))


if __name__ == "__main__":
    unittest.main()
