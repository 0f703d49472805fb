"""blockfs._nodes: a node's share of the whole epoch's positions, against the definition (the
round-robin interleave of the parts, written out), and the step rule the Loader uses."""
import os
import unittest
from unittest import mock

import numpy as np

import support  # noqa: F401 (first: it finds the blockfs package and binary)

from blockfs._nodes import Nodes, env_node, env_nodes, node_batches, node_keys, node_options


def whole(records):
    """The whole epoch by its definition: round j takes record j of every part with more."""
    out = []
    for j in range(max(records)):
        out += [p for p, n in enumerate(records) if j < n]
    return out


def facts(records, nodes, node):
    return {"nodes": nodes, "node": node, "parts": len(records), "part_records": list(records)}


class ShareTest(unittest.TestCase):
    def test_share_is_the_definition(self):
        rng = np.random.default_rng(3)
        for _ in range(30):
            parts = int(rng.choice([1, 2, 4, 6, 12]))
            records = [int(v) for v in rng.integers(1, 15, parts)]
            order = whole(records)
            for nodes in [n for n in (1, 2, 3, 4, 6, 12) if parts % n == 0]:
                for node in range(nodes):
                    nd = Nodes(facts(records, nodes, node))
                    mine = 0
                    for x in range(len(order) + 1):
                        self.assertEqual(nd.share(x), mine, (records, nodes, node, x))
                        if x < len(order) and order[x] % nodes == node:
                            mine += 1

    def test_steps_cover_the_epoch_once(self):
        # Every rank's keys together are every position of every node's epoch once, at any
        # position to resume from; a batch is never larger than the batch size, and is the
        # batch size on every rank in the balanced part (all of the epoch with drop_last,
        # which then leaves out only what is past the balanced part, and gives every rank the
        # same number of batches).
        cases = [([40, 41, 40, 42, 40, 40], (2, 3, 4), (0, 17, 95)),
                 ([40, 41, 40, 42, 40, 40], (3, 1, 5), (0, 17, 95)),
                 ([40, 41, 40, 42, 40, 40], (6, 2, 1), (0, 17, 95)),
                 ([40, 41, 40, 42, 40, 40], (1, 4, 7), (0, 17, 95)),
                 ([6, 6, 6, 6], (4, 1, 3), (0, 6, 7)),           # a resume at 4 nodes of a state saved at 2
                 ([500, 500] + [400] * 10, (4, 1, 4), (0, 1000)),  # 50 blocks of 100 in 12 parts
                 ([500, 500] + [400] * 10, (2, 2, 8), (0, 4790))]
        for records, (nodes, local, batch), starts in cases:
            world = nodes * local
            for start in starts:
                for drop in (False, True):
                    got = {n: [] for n in range(nodes)}
                    counts = []
                    for node in range(nodes):
                        nd = Nodes(facts(records, nodes, node))
                        for lr in range(local):
                            keys = list(node_keys(0, nd, start, batch, lr, local, world, drop))
                            self.assertEqual(len(keys), node_batches(nd, start, batch, lr, local, world, drop))
                            counts.append(len(keys))
                            prev = start
                            for _, s, e, after in keys:
                                self.assertLessEqual(e - s, batch, (records, nodes, start, drop))
                                if drop or (after <= nd.balanced and after - prev == batch * world):
                                    self.assertEqual(e - s, batch, (records, nodes, start, drop))
                                got[node] += list(range(s, e))
                                prev = after
                    ctx = (records, nodes, local, batch, start, drop)
                    for node in range(nodes):
                        nd = Nodes(facts(records, nodes, node))
                        mine = sorted(got[node])
                        self.assertEqual(len(mine), len(set(mine)), ctx)
                        if not drop:
                            self.assertEqual(mine, list(range(nd.share(start), sum(records[node::nodes]))), ctx)
                    if drop:
                        self.assertEqual(len(set(counts)), 1, ctx)
                        nd = Nodes(facts(records, nodes, 0))
                        self.assertGreaterEqual(sum(len(v) for v in got.values()), nd.balanced - start - batch * world, ctx)


class EnvTest(unittest.TestCase):
    def test_torchrun_and_slurm(self):
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "1"}, clear=True):
            self.assertEqual((env_nodes(), env_node()), (2, 1))
            o = {"nodes": "auto"}
            node_options(o)
            self.assertEqual(o, {"nodes": 2, "node": 1})
        with mock.patch.dict(os.environ, {"SLURM_NNODES": "4", "SLURM_NODEID": "3"}, clear=True):
            o = {"nodes": "auto"}
            node_options(o)
            self.assertEqual(o, {"nodes": 4, "node": 3})
        with mock.patch.dict(os.environ, {}, clear=True):
            with self.assertRaises(ValueError):
                node_options({"nodes": "auto"})
            with self.assertRaises(ValueError):
                node_options({"nodes": 4})
            with self.assertRaises(ValueError):
                node_options({"node": 1})
            o = {"nodes": 4, "node": 2}
            node_options(o)
            self.assertEqual(o, {"nodes": 4, "node": 2})
            o = {}
            node_options(o)
            self.assertEqual(o, {})


if __name__ == "__main__":
    unittest.main()
