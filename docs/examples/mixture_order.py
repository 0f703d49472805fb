#!/usr/bin/env python3
"""Reference implementation of a mixture's epoch order (docs/SHUFFLE.md, "Mixtures") in plain Python.

Given the mixture file and each source's record count N_i, it prints, for each position of
an epoch, the source, the source's pass (its own epoch) and the position in that pass. With
--blocks (each source's block record counts) it adds the storage index at that position of
the source's own order (shuffle_order.py, with seed derive(seed, 6, 0, i), the source's
shuffle and a mix of 1 unless its options give one). Exact arithmetic throughout: 0.7 is
7/10. blockfs's tests compare it with a mount, so it is the spec in executable form.

usage: mixture_order.py --mixture MIX.json --sizes 1000,600 --seed 42 --epoch 0 [--blocks "64,64;32,32"]
"""
import argparse
import decimal
import json
import os
import sys
from fractions import Fraction
from math import ceil, floor  # exact on a Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shuffle_order import derive, epoch_order  # noqa: E402

DOMAIN_SOURCE = 6
MAX_EPOCH_RECORDS = 1 << 48
RULES = ("weight", "repeat", "records")


def exact(v, fraction_string=False):
    """A number of the mixture file as a Fraction: 0.7 (a Decimal, or a float by its shortest
    repr) is 7/10; a string "a/b" only where fraction_string."""
    if isinstance(v, bool) or not isinstance(v, (int, float, decimal.Decimal, str)):
        raise ValueError(f"{v!r} is not a number")
    if isinstance(v, str) and not fraction_string:
        raise ValueError(f"{v!r}: a string is a number only for repeat")
    return Fraction(str(v))


def parse_mixture(obj, sizes):
    """The rules of a mixture (its JSON object; sizes[i] = N_i): one dict per source with its
    rule, value, n, options, and count (c_i, for the rules whose count is the same every epoch)."""
    rules = []
    if len(sizes) != len(obj["sources"]):
        raise ValueError(f"{len(sizes)} sizes for {len(obj['sources'])} sources")
    for i, (src, n) in enumerate(zip(obj["sources"], sizes)):
        given = [r for r in RULES if r in src]
        if len(given) != 1:
            raise ValueError(f"source {i}: give exactly one of weight, repeat, records (not {given})")
        rule = given[0]
        value = exact(src[rule], fraction_string=rule == "repeat")
        if value <= 0 or (rule == "records" and value.denominator != 1):
            raise ValueError(f"source {i}: {rule} {src[rule]} must be a positive {'integer' if rule == 'records' else 'number'}")
        r = {"rule": rule, "value": value, "n": n, "options": src.get("options", {}), "count": None}
        if rule == "records":
            r["count"] = int(value)
        elif rule == "repeat" and (value * n).denominator == 1:
            r["count"] = int(value * n)
        rules.append(r)
    weighted = [r for r in rules if r["rule"] == "weight"]
    if "epoch_records" in obj:
        if not weighted:
            raise ValueError("epoch_records needs a source with a weight")
        if any(r["count"] is None for r in rules if r["rule"] != "weight"):
            raise ValueError("with epoch_records, a repeat must give a whole number of records (r*N integer)")
        t = exact(obj["epoch_records"])
        if t.denominator != 1:
            raise ValueError(f"epoch_records {obj['epoch_records']} is not a whole number")
        t_w = int(t) - sum(r["count"] for r in rules if r["rule"] != "weight")
        if t_w < 0:
            raise ValueError("epoch_records is less than the sources without a weight give")
    else:
        t_w = sum(r["n"] for r in weighted)
    total = sum(r["value"] for r in weighted)
    quotas = [t_w * r["value"] / total for r in weighted]
    for r, q in zip(weighted, quotas):
        r["count"] = floor(q)
    left = t_w - sum(r["count"] for r in weighted)
    by_remainder = sorted(range(len(weighted)), key=lambda k: (-(quotas[k] - weighted[k]["count"]), k))
    for k in by_remainder[:left]:
        weighted[k]["count"] += 1
    for i, r in enumerate(rules):
        if r["count"] == 0 or r["n"] == 0:
            raise ValueError(f"source {i} gives no records")
    most = sum(r["count"] if r["count"] is not None else ceil(r["value"] * r["n"]) for r in rules)
    if most > MAX_EPOCH_RECORDS:
        raise ValueError(f"an epoch would have {most} records, past 2^48")
    return rules


def counts(rules, e):
    """c_i(e) for every source."""
    return [r["count"] if r["count"] is not None else floor((e + 1) * r["value"] * r["n"]) - floor(e * r["value"] * r["n"])
            for r in rules]


def draws_before(rules, i, e):
    """K_i(e): source i's draws in the epochs before e."""
    r = rules[i]
    return e * r["count"] if r["count"] is not None else floor(e * r["value"] * r["n"])


def interleave(cs):
    """The source of each position of an epoch whose sources give cs records: draw j of source
    i has key (2j+1) / (2 cs[i]); positions follow keys, equal keys by lower i."""
    keys = [(Fraction(2 * j + 1, 2 * c), i) for i, c in enumerate(cs) for j in range(c)]
    return [i for _, i in sorted(keys)]


def epoch(rules, e):
    """(source, pass, position in the pass) of every position of epoch e."""
    drawn = [0] * len(rules)
    out = []
    for i in interleave(counts(rules, e)):
        k = draws_before(rules, i, e) + drawn[i]
        drawn[i] += 1
        out.append((i, k // rules[i]["n"], k % rules[i]["n"]))
    return out


def source_seed(seed, i):
    """seed_i, the seed of source i's own order (unless its options give a seed)."""
    return derive(seed, DOMAIN_SOURCE, 0, i)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mixture", required=True, help="the mixture's JSON file")
    ap.add_argument("--sizes", help="N_i, the records of each source, comma-separated")
    ap.add_argument("--blocks", help="each source's block record counts: comma-separated, sources separated by ;")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epoch", type=int, default=0)
    a = ap.parse_args()
    with open(a.mixture) as f:
        obj = json.load(f, parse_float=decimal.Decimal)
    blocks = [[int(c) for c in s.split(",")] for s in a.blocks.split(";")] if a.blocks else None
    if not a.sizes and not blocks:
        ap.error("give --sizes or --blocks")
    sizes = [int(n) for n in a.sizes.split(",")] if a.sizes else [sum(b) for b in blocks]
    rules = parse_mixture(obj, sizes)
    orders = {}  # (source, pass) -> its storage indexes
    for i, p, pos in epoch(rules, a.epoch):
        if blocks is None:
            print(i, p, pos)
            continue
        if (i, p) not in orders:
            opt = rules[i]["options"]
            orders[i, p] = list(epoch_order(blocks[i], int(opt.get("seed", source_seed(a.seed, i))), p,
                                            opt.get("shuffle", "full"), int(opt.get("mix", 1))))
        print(i, p, pos, orders[i, p][pos])


if __name__ == "__main__":
    main()
