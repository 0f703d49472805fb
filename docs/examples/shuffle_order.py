#!/usr/bin/env python3
"""Reference implementation of the blockfs epoch order (docs/SHUFFLE.md) in plain Python.

Given the record count of every block (in storage order), the seed, the epoch, the mode and
the mix, it prints the storage index of the record at each position of the epoch. blockfs's
tests compare it with the mount, so it is the spec in executable form.

usage: shuffle_order.py --counts 4,4,4,3 --seed 42 --epoch 0 [--shuffle full] [--mix 1]
"""
import argparse

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
DOMAIN_BLOCK_ORDER, DOMAIN_WINDOW = 1, 2


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def derive(seed, domain, epoch, index):
    h = mix64((seed + GOLDEN) & MASK)
    for v in (domain, epoch, index):
        h = mix64(((h ^ v) + GOLDEN) & MASK)
    return h


class RNG:
    def __init__(self, state):
        self.state = state

    def next(self):
        self.state = (self.state + GOLDEN) & MASK
        return mix64(self.state)

    def below(self, n):
        threshold = (1 << 64) % n
        while True:
            x = self.next()
            if x >= threshold:
                return x % n


def permutation(n, rng):
    a = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        a[i], a[j] = a[j], a[i]
    return a


def epoch_order(counts, seed, epoch, mode="full", mix=1):
    """Yields the storage index of each record of the epoch, in order."""
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + c)
    nb = len(counts)
    if mode == "none":
        block_order = list(range(nb))
    else:
        block_order = permutation(nb, RNG(derive(seed, DOMAIN_BLOCK_ORDER, epoch, 0)))
    k = mix if mode == "full" else 1
    for w in range((nb + k - 1) // k):
        blocks = block_order[w * k:(w + 1) * k]
        records = [starts[b] + i for b in blocks for i in range(counts[b])]
        if mode == "full":
            perm = permutation(len(records), RNG(derive(seed, DOMAIN_WINDOW, epoch, w)))
            records = [records[j] for j in perm]
        yield from records


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", required=True, help="records per block, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--shuffle", default="full", choices=["full", "blocks", "none"])
    ap.add_argument("--mix", type=int, default=1)
    a = ap.parse_args()
    counts = [int(c) for c in a.counts.split(",")]
    for i in epoch_order(counts, a.seed, a.epoch, a.shuffle, a.mix):
        print(i)


if __name__ == "__main__":
    main()
