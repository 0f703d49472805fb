#!/usr/bin/env python3
"""Reference implementation of the blockfs epoch order (docs/SHUFFLE.md) in plain Python.

Given the record count of every block (in storage order), the seed, the epoch, the mode, the
mix and the order version, it prints the storage index of the record at each position of the
epoch (or at the positions given). blockfs's tests compare it with the mount, so it is the
spec in executable form.

usage: shuffle_order.py --counts 4,4,4,3 --seed 42 --epoch 0 [--shuffle full] [--mix 1]
                        [--order-version 2] [--positions 0,17,...]
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


BIJECTION_FROM = 1 << 22  # order version 2 permutes larger windows by a Bijection


class Bijection:
    """The keyed permutation of [0, n) of order version 2: a 4-round alternating Feistel
    network over the k bits of n-1, cycle-walked into [0, n)."""

    def __init__(self, n, key):
        self.n = n
        k = max(0, (n - 1).bit_length())
        a = k // 2
        self.b = k - a
        self.mask_a, self.mask_b = (1 << a) - 1, (1 << self.b) - 1
        rng = RNG(key)
        self.keys = [rng.next() for _ in range(4)]

    def _pass(self, x):
        left, right = x >> self.b, x & self.mask_b
        for j in (0, 2):
            left ^= mix64(right ^ self.keys[j]) & self.mask_a
            right ^= mix64(left ^ self.keys[j + 1]) & self.mask_b
        return (left << self.b) | right

    def at(self, i):
        if self.n < 2:
            return i
        x = self._pass(i)
        while x >= self.n:
            x = self._pass(x)
        return x


def _starts(counts):
    """starts[b]: the storage index of block b's first record."""
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + c)
    return starts


def _block_order(counts, seed, epoch, mode):
    nb = len(counts)
    if mode == "none":
        return list(range(nb))
    return permutation(nb, RNG(derive(seed, DOMAIN_BLOCK_ORDER, epoch, 0)))


def _window(counts, starts, block_order, k, w):
    """The storage index of each stored-order record of window w, as a function, and its count."""
    blocks = block_order[w * k:(w + 1) * k]
    firsts, n = [], 0
    for b in blocks:
        firsts.append(n)
        n += counts[b]

    def stored(v):
        j = max(i for i, f in enumerate(firsts) if f <= v and counts[blocks[i]] > 0)
        return starts[blocks[j]] + v - firsts[j]
    return stored, n


def epoch_order(counts, seed, epoch, mode="full", mix=1, version=2):
    """Yields the storage index of each record of the epoch, in order."""
    starts, block_order = _starts(counts), _block_order(counts, seed, epoch, mode)
    nb, k = len(counts), (mix if mode == "full" else 1)
    for w in range((nb + k - 1) // k):
        blocks = block_order[w * k:(w + 1) * k]
        records = [starts[b] + i for b in blocks for i in range(counts[b])]
        if mode == "full" and version >= 2 and len(records) > BIJECTION_FROM:
            bij = Bijection(len(records), derive(seed, DOMAIN_WINDOW, epoch, w))
            records = [records[bij.at(i)] for i in range(len(records))]
        elif mode == "full":
            perm = permutation(len(records), RNG(derive(seed, DOMAIN_WINDOW, epoch, w)))
            records = [records[j] for j in perm]
        yield from records


def record_at(counts, seed, epoch, pos, mode="full", mix=1, version=2):
    """The storage index of the record at position pos, computing only its window (and, in a
    window of version 2 permuted by a Bijection, only that record)."""
    starts, block_order = _starts(counts), _block_order(counts, seed, epoch, mode)
    nb, k = len(counts), (mix if mode == "full" else 1)
    first = 0
    for w in range((nb + k - 1) // k):
        stored, n = _window(counts, starts, block_order, k, w)
        if pos < first + n:
            i = pos - first
            if mode == "full" and version >= 2 and n > BIJECTION_FROM:
                return stored(Bijection(n, derive(seed, DOMAIN_WINDOW, epoch, w)).at(i))
            if mode == "full":
                return stored(permutation(n, RNG(derive(seed, DOMAIN_WINDOW, epoch, w)))[i])
            return stored(i)
        first += n
    raise IndexError(f"position {pos} is past the epoch's {first} records")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", required=True, help="records per block, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--shuffle", default="full", choices=["full", "blocks", "none"])
    ap.add_argument("--mix", type=int, default=1)
    ap.add_argument("--order-version", type=int, default=2, choices=[1, 2])
    ap.add_argument("--positions", help="only these positions, comma-separated")
    a = ap.parse_args()
    counts = [int(c) for c in a.counts.split(",")]
    if a.positions:
        for p in a.positions.split(","):
            print(record_at(counts, a.seed, a.epoch, int(p), a.shuffle, a.mix, a.order_version))
        return
    for i in epoch_order(counts, a.seed, a.epoch, a.shuffle, a.mix, a.order_version):
        print(i)


if __name__ == "__main__":
    main()
