"""blockfs._nodes: a node's share of the whole epoch's positions, against the definition (the
round-robin interleave of the parts, written out), and the step rule the Loader uses."""
import os
import unittest
from unittest import mock

import numpy as np

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
        # position to resume from; in the balanced part each rank gets its batch size.
        records = [40, 41, 40, 42, 40, 40]
        for nodes, local, batch in ((2, 3, 4), (3, 1, 5), (6, 2, 1), (1, 4, 7)):
            world = nodes * local
            for start in (0, 17, 95):
                got = {n: [] for n in range(nodes)}
                counts = set()
                for node in range(nodes):
                    nd = Nodes(facts(records, nodes, node))
                    for lr in range(local):
                        keys = list(node_keys(0, nd, start, batch, lr, local, world, False))
                        self.assertEqual(len(keys), node_batches(nd, start, batch, lr, local, world, False))
                        for _, s, e, after in keys:
                            got[node] += list(range(s, e))
                            if after <= nd.balanced:
                                counts.add(e - s)
                for node in range(nodes):
                    nd = Nodes(facts(records, nodes, node))
                    self.assertEqual(sorted(got[node]), list(range(nd.share(start), sum(records[node::nodes]))))
                self.assertEqual(counts, {batch})


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
