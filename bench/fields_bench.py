#!/usr/bin/env python3
"""Datasets with fields (issue 28's floors), every figure from one run:

1. pack from Parquet against pack from a raw file of the same records: a table of --rows rows
   (default 29,826,160: 2.0 GiB) of an int64 `label` and 16 float32 columns `f0`..`f15` (72 B a
   row), written by DuckDB (an independent writer; through node, @duckdb/node-api), and the same
   rows as a raw file of 72-byte records written by numpy from the same formulas (checked:
   both packs hold the same values). Each pack starts cold (page cache dropped) and ends with
   its output on disk (sync), runs alternating the order: MB/s of input (the rows' raw bytes /
   seconds) of `blockfs pack table.parquet` against `blockfs pack --format raw --record-size 72`
   with and without the pre-shuffle (the Parquet pack keeps input order, as --no-shuffle does);
   the peak RSS (VmHWM) of pack and of its blockfs-tables child (run through /usr/bin/time by
   $BLOCKFS_TABLES_BIN; pack's own polled from /proc);
2. a labels pass reads only labels: a DuckDB Parquet of --images samples of an `image` BLOB of
   10-100 KiB and an INTEGER `label`, packed, mounted with --direct on and --cache-size 256MiB
   (and again with --readahead 0); each epoch cold (page cache dropped, the daemon mounted
   afresh), `dd` of epoch-NNNN.label whole: the bytes each field gave the cache (stats.json
   "sources") and the daemon's disk reads (/proc/PID/io read_bytes) against the label file's
   size;
3. seed 004: --samples COCO-shaped samples (a JSON annotation per image: 0-20 boxes with
   category, area and a segmentation polygon; image bytes of 2-8 KiB), written as WebDataset
   tars with Python's tarfile and packed; a DataLoader of 4 workers, batch 64, over
   blockfs.torch.Loader(fields=["jpg", "json"], decode= json.loads) against seed 004's first
   loader (a map-style Dataset that json.loads one COCO annotations file into Python dicts, as
   pycocotools does, and preads the same image bytes from one file by offset; shuffle=True):
   the PSS of the trainer and its workers (smaps_rollup) at the middle of an epoch, the mount's
   daemon's beside it (default flags, and --cache-size 256MiB), and the rates, runs alternating
   the order.

    fields_bench.py [--work DIR] [--rows N] [--images N] [--samples N] [--runs 3] [--only PART]
                    [--markdown FILE] [--json FILE]

Run as root from the repository (bin/blockfs and bin/blockfs-tables must exist: make build;
node with @duckdb/node-api 1.5.6-r.1 in /tmp/duck/node_modules or /tmp/node_modules:
`cd /tmp && npm install @duckdb/node-api@1.5.6-r.1`). make bench runs it.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin", "blockfs")
TABLES = os.path.join(ROOT, "bin", "blockfs-tables")
PY = "/usr/bin/python3"
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))

from fields_data import MULT, ROW, bench_mod, coco_data, feature_rows, images_data, log, sh, table_data  # noqa: E402

MiB = 1 << 20


# ---------------------------------------------------------------- shared helpers

def drop_caches():
    bench_mod().drop_caches()


def stats(mnt):
    with open(os.path.join(mnt, ".blockfs", "stats.json")) as f:
        return json.load(f)


def info(mnt):
    with open(os.path.join(mnt, ".blockfs", "info.json")) as f:
        return json.load(f)


def proc_status(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def proc_io(pid, key):
    with open("/proc/%d/io" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def children_of():
    """{ppid: [pid, ...]} of every process now."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out.setdefault(ppid, []).append(int(d))
    return out


def tree(pid):
    """pid and its descendants."""
    kids, out, todo = children_of(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def pss(pid):
    """(Pss, Rss) of one process in bytes, from smaps_rollup."""
    got = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                k, _, rest = line.partition(":")
                if k in ("Pss", "Rss"):
                    got[k] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return got.get("Pss", 0), got.get("Rss", 0)


# ---------------------------------------------------------------- 1. pack from Parquet

def pack_measured(argv, work):
    """Runs a pack cold (page cache dropped) to its output on disk (sync): (seconds, pack's
    VmHWM, blockfs-tables' VmHWM or 0, the largest ru_maxrss of the tree, CPU seconds of pack
    and its children, CPU seconds of blockfs-tables), sizes in bytes."""
    wrapper = os.path.join(work, "tables-timed.sh")
    hwm_file = os.path.join(work, "tables-hwm.txt")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nexec /usr/bin/time -f \"%%M %%U %%S\" -o %s %s "$@"\n' % (hwm_file, TABLES))
    os.chmod(wrapper, 0o755)
    if os.path.exists(hwm_file):
        os.remove(hwm_file)
    drop_caches()
    err = open(os.path.join(work, "pack.err"), "w+")
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=dict(os.environ, BLOCKFS_TABLES_BIN=wrapper))
    peak = [0]
    done = threading.Event()

    def poll():
        while not done.is_set():
            peak[0] = max(peak[0], proc_status(p.pid, "VmHWM"))
            time.sleep(0.01)
    th = threading.Thread(target=poll)
    th.start()
    _, status, ru = os.wait4(p.pid, 0)
    done.set()
    th.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    sh("sync")
    el = time.perf_counter() - t
    if p.returncode != 0:
        err.seek(0)
        raise SystemExit("%s failed: %s" % (" ".join(argv), err.read()))
    tables, tables_cpu = 0, 0.0
    if os.path.exists(hwm_file):
        with open(hwm_file) as f:
            hwm, user, sys_ = f.read().split()[-3:]
            tables, tables_cpu = int(hwm) * 1024, float(user) + float(sys_)
    return el, peak[0] * 1024, tables, ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime, tables_cpu


def check_same_records(work, pq_ds, raw_ds, n=200000):
    """Both packs hold the table's values: a slice of each's epoch 0, against the formulas."""
    import numpy as np
    Daemon = bench_mod().Daemon
    m1, m2 = os.path.join(work, "mnt-fields-pq"), os.path.join(work, "mnt-fields-raw")
    with Daemon([BIN, "mount", pq_ds, m1], m1), Daemon([BIN, "mount", raw_ds, m2], m2):
        ids = np.fromfile(os.path.join(m1, "epoch-0000.ids"), dtype="<u8", count=n).astype(np.int64)
        want = feature_rows(0, 1)  # for its dtype
        lab = np.fromfile(os.path.join(m1, "epoch-0000.label"), dtype="<i8", count=n)
        f9 = np.fromfile(os.path.join(m1, "epoch-0000.f9"), dtype="<f4", count=n)
        assert (lab == ids).all(), "Parquet pack: label is not the row"
        assert (f9 == ((ids * MULT[9]) % (1 << 24)).astype(np.float32)).all(), "Parquet pack: f9 differs"
        rid = np.fromfile(os.path.join(m2, "epoch-0000.ids"), dtype="<u8", count=n).astype(np.int64)
        rec = np.fromfile(os.path.join(m2, "epoch-0000"), dtype=want.dtype, count=n)
        ref = np.concatenate([feature_rows(int(i), int(i) + 1) for i in rid[:2000]])
        assert (rec[:2000] == ref).all(), "raw pack: records differ from the formulas"
        assert (rec["label"] == rid).all(), "raw pack: label is not the id"


def part_pack(work, rows, runs):
    pq, raw = table_data(work, rows)
    dst = os.path.join(work, "fields-packed")
    confs = [
        ("parquet", [BIN, "pack", "--quiet", pq, dst]),
        ("raw --no-shuffle", [BIN, "pack", "--quiet", "--format", "raw", "--record-size", str(ROW), "--no-shuffle", raw, dst]),
        ("raw (pre-shuffle)", [BIN, "pack", "--quiet", "--format", "raw", "--record-size", str(ROW), raw, dst]),
    ]
    res = {name: [] for name, _ in confs}
    for r in range(runs):
        order = confs if r % 2 == 0 else confs[::-1]
        for name, argv in order:
            sh("rm -rf %s" % dst)
            m = pack_measured(argv, work)
            res[name].append(m)
            log("  pack %-18s %6.2f s %7.0f MB/s  pack %4.0f MiB  tables %4.0f MiB" % (
                name, m[0], rows * ROW / m[0] / 1e6, m[1] / MiB, m[2] / MiB))
            if r == 0 and name == "parquet":
                sh("rm -rf %s.pq && mv %s %s.pq" % (dst, dst, dst))
            if r == 0 and name == "raw --no-shuffle":
                sh("rm -rf %s.raw && mv %s %s.raw" % (dst, dst, dst))
    check_same_records(work, dst + ".pq", dst + ".raw")
    sh("rm -rf %s %s.pq %s.raw" % (dst, dst, dst))
    return {"rows": rows, "input_bytes": rows * ROW, "parquet_bytes": os.path.getsize(pq), "runs": res}


# ---------------------------------------------------------------- 2. a labels pass

LABEL_MOUNTS = (("--direct on --cache-size 256MiB", ["--direct", "on", "--cache-size", "256MiB"]),
                ("the same, --readahead 0", ["--direct", "on", "--cache-size", "256MiB", "--readahead", "0"]))


def part_labels(work, n, epochs=(1, 2)):
    """Each epoch cold: page cache dropped, the daemon mounted afresh (its cache empty)."""
    import numpy as np
    ds = images_data(work, n)
    mnt = os.path.join(work, "mnt-fields-labels")
    out = []
    for e in epochs:
        for name, flags in LABEL_MOUNTS:
            drop_caches()
            with bench_mod().Daemon([BIN, "mount"] + flags + [ds, mnt], mnt) as d:
                inf = info(mnt)
                before, disk0 = stats(mnt)["sources"], proc_io(d.p.pid, "read_bytes")
                path = os.path.join(mnt, "epoch-%04d.label" % e)
                sh("dd if=%s of=/dev/null bs=1M 2>/dev/null" % path)
                after, disk1 = stats(mnt)["sources"], proc_io(d.p.pid, "read_bytes")
                size = os.path.getsize(path)
                got = {s["name"]: (s["bytes_read"] - b["bytes_read"], s["reads"] - b["reads"]) for s, b in zip(after, before)}
                ids = np.fromfile(os.path.join(mnt, "epoch-%04d.ids" % e), dtype="<u8").astype(np.int64)
                lab = np.fromfile(path, dtype="<i4")
                assert (lab == ids % 1000).all(), "labels differ from the Parquet's"
                out.append({"epoch": e, "mount": name, "label_size": size, "fields": got, "disk": disk1 - disk0})
                log("  epoch %d, %s: label %d B in %d reads, image %d B, daemon disk reads %d B" % (
                    e, name, got["label"][0], got["label"][1], got["image"][0], disk1 - disk0))
    sizes = {f["name"]: f.get("bytes") for f in inf["fields"]}
    with open(os.path.join(ds, "fields", "label", "blockfs.json")) as f:
        blocks = len(json.load(f)["blocks"])
    return {"samples": n, "field_bytes": sizes, "blocks": blocks, "epochs": out}


# ---------------------------------------------------------------- 3. seed 004

def decode_json(batch):
    """The blockfs loader's decode: the JSON annotations parsed (in the worker)."""
    batch["json"] = [json.loads(x.tobytes()) for x in batch["json"]]
    return batch


class CocoInRAM:
    """Seed 004's first loader: the annotations as Python dicts in the Dataset (json.load of the
    COCO annotations file, indexed by image as pycocotools' imgToAnns), the image bytes pread
    from one file by offset."""

    def __init__(self, d):
        import numpy as np
        with open(os.path.join(d, "annotations.json")) as f:
            self.dataset = json.load(f)
        self.imgs = self.dataset["images"]
        self.img_to_anns = [[] for _ in self.imgs]
        for a in self.dataset["annotations"]:
            self.img_to_anns[a["image_id"]].append(a)
        self.offsets = np.load(os.path.join(d, "offsets.npy"))
        self.path, self.fd = os.path.join(d, "images.bin"), None

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        import numpy as np
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY)
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        img = np.frombuffer(bytearray(os.pread(self.fd, hi - lo, lo)), dtype=np.uint8)
        return i, img, dict(self.imgs[i], annotations=self.img_to_anns[i])


def collate_coco(batch):
    import torch
    ids, imgs, anns = zip(*batch)
    return {"ids": torch.tensor(ids), "jpg": [torch.from_numpy(x) for x in imgs], "json": list(anns)}


def trainer(kind, data, epoch, daemon_pid):
    """One epoch of a 4-worker DataLoader, in a fresh interpreter; prints a JSON line: the PSS of
    this process and its workers at the middle of the epoch, and the rate."""
    import torch
    t0 = time.perf_counter()
    if kind == "blockfs":
        import blockfs.torch
        loader = blockfs.torch.Loader(data, batch_size=64, num_workers=4, fields=["jpg", "json"], decode=decode_json)
        loader.set_epoch(epoch)
        n = info(data)["records"]
    else:
        ds = CocoInRAM(data)
        g = torch.Generator()
        g.manual_seed(epoch)
        loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=4, collate_fn=collate_coco,
                                             generator=g)
        n = len(ds)
    init = time.perf_counter() - t0
    main_after_init = pss(os.getpid())[0]
    mid, got, boxes, nbytes = math.ceil(n / 64) // 2, 0, 0, 0
    at_mid = None
    t = time.perf_counter()
    for k, b in enumerate(loader):
        got += len(b["ids"])
        boxes += sum(len(a["annotations"]) for a in b["json"])
        nbytes += sum(len(x) for x in b["jpg"])
        if k == mid:
            procs = tree(os.getpid())
            per = [(p, *pss(p)) for p in procs]
            at_mid = {"pss": sum(x[1] for x in per), "rss": sum(x[2] for x in per), "procs": len(procs),
                      "main_pss": pss(os.getpid())[0],
                      "daemon_pss": pss(daemon_pid)[0] if daemon_pid else 0}
    el = time.perf_counter() - t
    print(json.dumps({"kind": kind, "samples": got, "boxes": boxes, "image_bytes": nbytes, "seconds": el,
                      "rate": got / el, "init_seconds": init, "main_pss_after_init": main_after_init, "mid": at_mid}))


def run_trainer(kind, data, epoch, daemon_pid=0):
    out = subprocess.run([PY, os.path.abspath(__file__), "--trainer", kind, "--data", data, "--epoch", str(epoch),
                          "--daemon-pid", str(daemon_pid)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("trainer %s failed:\n%s" % (kind, out.stderr[-3000:]))
    return json.loads(out.stdout.strip().splitlines()[-1])


COCO_LOADERS = ("blockfs", "blockfs-256", "blockfs-inplace", "inram")


def part_coco(work, n, runs):
    """Four loaders, alternating: blockfs over a mount with default flags (its daemon caches the
    whole dataset), blockfs over a mount with --cache-size 256MiB, blockfs over a mount of the
    same WebDataset tars in place (default flags; indexed at its first mount), and seed 004's
    in-RAM loader."""
    d, ds = coco_data(work, n)
    m1, m2 = os.path.join(work, "mnt-fields-coco"), os.path.join(work, "mnt-fields-coco-256")
    m3, ix = os.path.join(work, "mnt-fields-coco-inplace"), os.path.join(work, "fields-coco-%d-index" % n)
    res = {k: [] for k in COCO_LOADERS}
    Daemon = bench_mod().Daemon
    with Daemon([BIN, "mount", ds, m1], m1) as d1, Daemon([BIN, "mount", "--cache-size", "256MiB", ds, m2], m2) as d2, \
            Daemon([BIN, "mount", "--index", ix, os.path.join(d, "shard-*.tar"), m3], m3) as d3:
        # Warm-up: every loader's bytes in memory as far as its memory allows (the image file
        # and the annotations in the page cache; the mounts' blocks in their caches).
        sh("cat %s/images.bin %s/annotations.json > /dev/null" % (d, d))
        for m in (m1, m2, m3):
            sh("cat %s/epoch-0000.jpg %s/epoch-0000.json > /dev/null" % (m, m))
        inf = info(m1)
        where = {"blockfs": (m1, d1.p.pid), "blockfs-256": (m2, d2.p.pid), "blockfs-inplace": (m3, d3.p.pid), "inram": (d, 0)}
        for r in range(runs):
            order = COCO_LOADERS if r % 2 == 0 else COCO_LOADERS[::-1]
            for kind in order:
                data, pid = where[kind]
                got = run_trainer("inram" if kind == "inram" else "blockfs", data, 1 + r, pid)
                res[kind].append(got)
                log("  %-11s %8.0f samples/s  PSS at mid-epoch %6.0f MiB (main %5.0f MiB, %d processes)%s" % (
                    kind, got["rate"], got["mid"]["pss"] / MiB, got["mid"]["main_pss"] / MiB, got["mid"]["procs"],
                    "  daemon %.0f MiB" % (got["mid"]["daemon_pss"] / MiB) if pid else ""))
        fields = {f["name"]: f.get("bytes") for f in inf["fields"]}
    sizes = {"annotations_json": os.path.getsize(os.path.join(d, "annotations.json")),
             "images_bin": os.path.getsize(os.path.join(d, "images.bin")), "fields": fields}
    return {"samples": n, "sizes": sizes, "runs": res}


# ---------------------------------------------------------------- report

def report(p1, p2, p3, argv):
    L = []
    if p1:
        inp = p1["input_bytes"]
        rate = {k: [inp / m[0] / 1e6 for m in v] for k, v in p1["runs"].items()}
        med = {k: statistics.median(v) for k, v in rate.items()}
        L += ["### 1. pack from Parquet against a raw file of the same records",
              "",
              "%d rows of int64 + 16 x float32 (%d B of input as raw records, %.2f GiB; the Parquet file %d B, "
              "DuckDB's defaults), each pack cold to its output on disk (sync), %d runs alternating the order:" % (
                  p1["rows"], inp, inp / (1 << 30), p1["parquet_bytes"], len(rate["parquet"])),
              "",
              "| pack of | MB/s of input (median) | runs | peak RSS: pack | peak RSS: blockfs-tables | CPU s (all; blockfs-tables) |",
              "|---|---|---|---|---|---|"]
        for k, v in p1["runs"].items():
            L.append("| %s | %.0f | %s | %s MiB | %s | %s |" % (
                k, med[k], ", ".join("%.0f" % x for x in rate[k]), ", ".join("%.0f" % (m[1] / MiB) for m in v),
                ", ".join("%.0f MiB" % (m[2] / MiB) for m in v) if k == "parquet" else "(none)",
                ", ".join("%.1f; %.1f" % (m[4], m[5]) for m in v)))
        rp, rn, rs = med["parquet"], med["raw --no-shuffle"], med["raw (pre-shuffle)"]
        worst = max(max(m[1], m[2]) for m in p1["runs"]["parquet"])
        L += ["", "Parquet / raw --no-shuffle **%.2fx**, Parquet / raw pre-shuffled **%.2fx** (floor 0.5x); "
              "the largest peak RSS of a Parquet pack's processes **%.0f MiB** (floor 512 MiB)." % (
                  rp / rn, rp / rs, worst / MiB), ""]
        p1["summary"] = (rp, rn, rs, worst)
    if p2:
        L += ["### 2. a labels pass reads only labels",
              "",
              "%d samples in %d blocks a field, field sizes %s; each epoch cold (page cache dropped, the daemon "
              "mounted afresh), `dd bs=1M` of epoch-NNNN.label; bytes each field gave the cache (stats.json "
              "`sources`) and the daemon's disk reads (/proc/PID/io `read_bytes`):" % (
                  p2["samples"], p2["blocks"], ", ".join("%s %d B" % kv for kv in p2["field_bytes"].items())),
              "",
              "| epoch | mount | label file | label: bytes read (reads) | image: bytes read (reads) | label read / file | disk reads | disk / file |",
              "|---|---|---|---|---|---|---|---|"]
        for e in p2["epochs"]:
            lab, img = e["fields"]["label"], e["fields"]["image"]
            L.append("| %d | %s | %d | %d (%d) | %d (%d) | **%.3fx** | %d | %.1fx |" % (
                e["epoch"], e["mount"], e["label_size"], lab[0], lab[1], img[0], img[1], lab[0] / e["label_size"],
                e["disk"], e["disk"] / e["label_size"]))
        L.append("")
    if p3:
        def med(kind, f):
            return statistics.median(f(x) for x in p3["runs"][kind])
        b_pss, i_pss = med("blockfs", lambda x: x["mid"]["pss"]), med("inram", lambda x: x["mid"]["pss"])
        b_rate, i_rate = med("blockfs", lambda x: x["rate"]), med("inram", lambda x: x["rate"])
        s = p3["sizes"]
        L += ["### 3. seed 004: COCO-shaped annotations beside the images, 4 workers, batch 64",
              "",
              "%d samples; annotations.json %d B, images %d B; fields %s. PSS: the trainer and its 4 workers at the "
              "middle of an epoch (smaps_rollup); runs alternating the order:" % (
                  p3["samples"], s["annotations_json"], s["images_bin"],
                  ", ".join("%s %d B" % kv for kv in s["fields"].items())),
              "",
              "| loader | PSS at mid-epoch (runs) | of which the main process | samples/s (runs) | start (s) | main PSS before iterating |",
              "|---|---|---|---|---|---|"]
        names = {"blockfs": "blockfs.torch.Loader(fields=[jpg, json], decode=json.loads), mount with default flags",
                 "blockfs-256": "the same, mount with --cache-size 256MiB",
                 "blockfs-inplace": "the same, mount of the WebDataset tars in place (default flags)",
                 "inram": "map-style Dataset, annotations in RAM (seed 004)"}
        for kind in COCO_LOADERS:
            rr = p3["runs"][kind]
            L.append("| %s | %s MiB | %s MiB | %s | %s | %s MiB |" % (
                names[kind], ", ".join("%.0f" % (x["mid"]["pss"] / MiB) for x in rr),
                ", ".join("%.0f" % (x["mid"]["main_pss"] / MiB) for x in rr),
                ", ".join("%.0f" % x["rate"] for x in rr), ", ".join("%.1f" % x["init_seconds"] for x in rr),
                ", ".join("%.0f" % (x["main_pss_after_init"] / MiB) for x in rr)))
        d1, d2 = med("blockfs", lambda x: x["mid"]["daemon_pss"]), med("blockfs-256", lambda x: x["mid"]["daemon_pss"])
        b2_pss, b2_rate = med("blockfs-256", lambda x: x["mid"]["pss"]), med("blockfs-256", lambda x: x["rate"])
        L += ["", "blockfs / in-RAM PSS (medians), trainer and workers: **%.3fx** (default flags), **%.3fx** "
              "(--cache-size 256MiB) (floor 0.25x); rate %.2fx, %.2fx. The mounts' daemons, outside the trainer's "
              "tree, at mid-epoch: PSS %.0f MiB with default flags (the dataset in its cache, as the in-RAM "
              "loader's image file is in the page cache, which PSS does not count), %.0f MiB with --cache-size "
              "256MiB; with the daemon counted: %.3fx, %.3fx." % (
                  b_pss / i_pss, b2_pss / i_pss, b_rate / i_rate, b2_rate / i_rate, d1 / MiB, d2 / MiB,
                  (b_pss + d1) / i_pss, (b2_pss + d2) / i_pss), ""]
        ip_pss, ip_rate = med("blockfs-inplace", lambda x: x["mid"]["pss"]), med("blockfs-inplace", lambda x: x["rate"])
        d3 = med("blockfs-inplace", lambda x: x["mid"]["daemon_pss"])
        L += ["The tars mounted in place: PSS **%.3fx** the in-RAM loader's (daemon %.0f MiB; with it %.3fx), rate "
              "%.2fx the in-RAM loader's, %.2fx the packed mount's." % (
                  ip_pss / i_pss, d3 / MiB, (ip_pss + d3) / i_pss, ip_rate / i_rate, ip_rate / b_rate), ""]
        p3["summary"] = (b_pss, i_pss, b_rate, i_rate, d1, b2_pss, b2_rate, d2)
    L += ["Command: `%s`" % " ".join(argv)]
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--rows", type=int, default=29826160)
    ap.add_argument("--images", type=int, default=20000)
    ap.add_argument("--samples", type=int, default=200000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", choices=("pack", "labels", "coco"), help="one part only")
    ap.add_argument("--markdown")
    ap.add_argument("--json", help="also write the raw figures as JSON")
    ap.add_argument("--trainer", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--epoch", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--daemon-pid", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.trainer:
        return trainer(a.trainer, a.data, a.epoch, a.daemon_pid)
    if os.geteuid() != 0:
        raise SystemExit("run as root (it drops the page cache and mounts)")
    os.makedirs(a.work, exist_ok=True)
    a.work = os.path.abspath(a.work)
    t = time.perf_counter()
    p1 = p2 = p3 = None
    if a.only in (None, "pack"):
        log("1. pack from Parquet against raw")
        p1 = part_pack(a.work, a.rows, a.runs)
    if a.only in (None, "labels"):
        log("2. a labels pass")
        p2 = part_labels(a.work, a.images)
    if a.only in (None, "coco"):
        log("3. seed 004")
        p3 = part_coco(a.work, a.samples, a.runs)
    text = report(p1, p2, p3, [os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])
    log("total %.0f s" % (time.perf_counter() - t))
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"pack": p1, "labels": p2, "coco": p3}, f, indent=1)


if __name__ == "__main__":
    main()
