"""Node-aware mounts (docs/SHUFFLE.md, "Many nodes"): where each node's epoch stands at a
position of the whole epoch, and the node options from torchrun's or Slurm's environment.

The whole epoch is the round-robin interleave of the canonical parts: round j takes record j
of every part with more than j records, in part order. Node I of N holds the parts p with
p mod N == I, and its epoch file is those parts' positions of the whole epoch, in order. So
the first x positions of the whole epoch are, on every node, the first share(x) positions of
its own epoch, at any N that divides the parts: a loader's position in the whole epoch is a
resume point at any node count.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple

import numpy as np


class Nodes:
    """A node-aware mount's facts (info.json's "nodes"), and the node shares of positions."""

    def __init__(self, facts: Mapping[str, Any]) -> None:
        self.nodes = int(facts["nodes"])
        self.node = int(facts["node"])
        self.parts = int(facts["parts"])
        self.records = np.asarray(facts["part_records"], dtype=np.int64)
        if len(self.records) != self.parts or self.parts % self.nodes or not 0 <= self.node < self.nodes:
            raise ValueError(f"info.json's nodes facts do not hold together: {dict(facts)!r}")
        self.total = int(self.records.sum())
        self.sorted = np.sort(self.records)
        self.cum = np.concatenate([[0], np.cumsum(self.sorted)])
        # While every part has records left (rounds below the smallest part), a step of S
        # whole-epoch positions with S a multiple of the node count gives each node S / N.
        self.balanced = int(self.sorted[0]) * self.parts
        self.mine = np.arange(self.parts) % self.nodes == self.node

    def _through(self, j: int) -> int:
        """Positions in rounds 0..j-1: the sum of min(records, j)."""
        k = int(np.searchsorted(self.sorted, j, side="left"))  # parts with fewer than j records
        return int(self.cum[k]) + j * (self.parts - k)

    def share(self, x: int, node: Optional[int] = None) -> int:
        """Node's positions (this node's by default) among the first x positions of the whole
        epoch."""
        x = min(max(int(x), 0), self.total)
        lo, hi = 0, int(self.sorted[-1])
        while lo < hi:  # the most rounds j whose positions fit in x
            mid = (lo + hi + 1) // 2
            if self._through(mid) <= x:
                lo = mid
            else:
                hi = mid - 1
        j = lo
        rest = x - self._through(j)
        drawn = np.minimum(self.records, j)
        active = np.flatnonzero(self.records > j)[:rest]
        drawn[active] += 1
        mine = self.mine if node is None else np.arange(self.parts) % self.nodes == node
        return int(drawn[mine].sum())

    def step_end(self, pos: int, step: int, most: int) -> int:
        """Where a step from position pos of the whole epoch ends: pos + step while every part
        has records left (every node then has step / N of them); past that, the furthest
        position within pos + step at which no node has more than most records of the step."""
        end = min(pos + step, self.total)
        if end <= self.balanced:
            return end
        before = [self.share(pos, i) for i in range(self.nodes)]

        def fits(x: int) -> bool:
            return all(self.share(x, i) - before[i] <= most for i in range(self.nodes))
        lo, hi = pos + 1, end  # one record always fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo


def env_nodes() -> Optional[int]:
    """The job's node count from Slurm ($SLURM_NNODES) or torchrun ($WORLD_SIZE over
    $LOCAL_WORLD_SIZE), or None."""
    if "SLURM_NNODES" in os.environ:
        return int(os.environ["SLURM_NNODES"])
    if "WORLD_SIZE" in os.environ and "LOCAL_WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"]) // max(1, int(os.environ["LOCAL_WORLD_SIZE"]))
    return None


def env_node() -> Optional[int]:
    """This node's index from torchrun ($GROUP_RANK), $NODE_RANK or Slurm ($SLURM_NODEID), or
    None."""
    for k in ("GROUP_RANK", "NODE_RANK", "SLURM_NODEID"):
        if k in os.environ:
            return int(os.environ[k])
    return None


def node_options(options: Dict[str, Any]) -> None:
    """Fills a Mount's nodes= ("auto": from the environment) and, when nodes is given, node=
    from the environment when not given; raises ValueError when the environment does not say."""
    nodes = options.get("nodes")
    if nodes is None:
        if "node" in options or "parts" in options:
            raise ValueError("node= and parts= go with nodes= (the job's node count, or \"auto\")")
        return
    if nodes == "auto":
        n = env_nodes()
        if n is None:
            raise ValueError("nodes=\"auto\": neither $SLURM_NNODES nor torchrun's $WORLD_SIZE and $LOCAL_WORLD_SIZE "
                             "are set; give nodes=N")
        options["nodes"] = n
    if options.get("node") is None:
        i = env_node()
        if i is None:
            raise ValueError("nodes= without node=: none of torchrun's $GROUP_RANK, $NODE_RANK or Slurm's "
                             "$SLURM_NODEID is set; give node=I")
        options["node"] = i


def node_keys(epoch: int, nodes: Nodes, position: int, batch_size: int, local_rank: int, local_world: int,
              world: int, drop_last: bool) -> Iterator[Tuple[int, int, int, int]]:
    """The batch keys (epoch, start, end, after) of local rank local_rank of local_world on a
    node-aware mount. Each step takes positions of the whole epoch (Nodes.step_end: S =
    batch_size x world of them while every part has records left, so that every node has
    batch_size x local_world; past that as many as keep every node within that); this node's
    records of the step are a run of its own epoch, cut among its local ranks as batch_keys
    cuts a step among ranks; after is the whole epoch's position after the step. With
    drop_last the epoch ends where the first part runs out (the larger parts' last records,
    at most a block of each, are left out), so every rank gets batch_size every step."""
    step, most = batch_size * world, batch_size * local_world
    end = nodes.total
    if drop_last:
        end = position + max(0, nodes.balanced - position) // step * step
    pos = position
    a = nodes.share(pos)
    while pos < end:
        nxt = nodes.step_end(pos, step, most)
        b = a + (nxt - pos) // nodes.nodes if nxt - pos == step and nxt <= nodes.balanced else nodes.share(nxt)
        n = b - a
        if n == most:
            start = a + local_rank * batch_size
            stop = start + batch_size
        else:
            start, stop = a + local_rank * n // local_world, a + (local_rank + 1) * n // local_world
        pos, a = nxt, b
        if stop > start:
            yield epoch, start, stop, pos


def node_batches(nodes: Nodes, position: int, batch_size: int, local_rank: int, local_world: int, world: int,
                 drop_last: bool) -> int:
    """How many batches node_keys yields (a step each in the balanced part of the epoch, the
    steps of the rest counted one by one)."""
    step = batch_size * world
    full = max(0, nodes.balanced - position) // step
    if drop_last:
        return full
    n, rest = full, position + full * step
    for _ in node_keys(0, nodes, rest, batch_size, local_rank, local_world, world, False):
        n += 1
    return n


def check_world(nodes: Nodes, world: int, local_world: Optional[int]) -> int:
    """The local world (ranks per node): local_world, else world over the node count; raises
    ValueError when they disagree."""
    if local_world is None:
        if world % nodes.nodes:
            raise ValueError(f"world size {world} is not a multiple of the mount's {nodes.nodes} nodes: give "
                             "local_world_size (torchrun's $LOCAL_WORLD_SIZE)")
        local_world = world // nodes.nodes
    if local_world * nodes.nodes != world:
        raise ValueError(f"world size {world} is not {nodes.nodes} nodes x {local_world} local ranks: every node "
                         "of a node-aware mount runs the same number of ranks")
    return local_world


__all__: Sequence[str] = ["Nodes", "node_options", "node_keys", "node_batches", "check_world"]
