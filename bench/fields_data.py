"""The inputs of fields_bench.py, each written once under its --work and reused: part 1's
table (Parquet written by DuckDB, and the same rows as raw 72-byte records written by numpy
from the same formulas), part 2's images (a DuckDB Parquet, packed) and part 3's COCO-shaped
samples (WebDataset tars, packed, and the in-RAM loader's files); DuckDB run through node; and
the helpers fields_bench.py shares with them (log, sh)."""
import io
import json
import os
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin", "blockfs")

ROW = 72  # int64 label + 16 float32
# Feature k of row i is ((i * MULT[k]) % 2^24) as float32: exact in float32, in DuckDB and in
# numpy, and of 2^24 values, so that Parquet's encodings do not shrink it to nothing.
MULT = [2654435761 + 2 * 40503 * k for k in range(16)]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def bench_mod():
    import bench  # bench/bench.py: Daemon, drop_caches, sh
    return bench


def sh(cmd):
    return bench_mod().sh(cmd)


# ---------------------------------------------------------------- DuckDB through node

def node_modules():
    for d in ("/tmp/duck/node_modules", "/tmp/node_modules"):
        if os.path.isdir(os.path.join(d, "@duckdb", "node-api")):
            return d
    raise SystemExit("needs @duckdb/node-api: cd /tmp && npm install @duckdb/node-api@1.5.6-r.1")


def duckdb(work, statements):
    """Runs SQL statements in a DuckDB in memory (node, @duckdb/node-api)."""
    js = os.path.join(work, "duck.js")
    with open(js, "w") as f:
        f.write("const duckdb = require('@duckdb/node-api');\n(async () => {\n"
                "  const db = await duckdb.DuckDBInstance.create(':memory:');\n"
                "  const c = await db.connect();\n")
        for s in statements:
            f.write("  await c.run(%s);\n" % json.dumps(s))
        f.write("})().catch(e => { console.error(e.message); process.exit(1); });\n")
    subprocess.run(["node", js], env=dict(os.environ, NODE_PATH=node_modules()), check=True)


# ---------------------------------------------------------------- 1. pack from Parquet

def feature_rows(lo, hi):
    """Rows [lo, hi) of the table as numpy records of 72 bytes."""
    import numpy as np
    dt = np.dtype([("label", "<i8"), ("f", "<f4", (16,))])
    i = np.arange(lo, hi, dtype=np.int64)
    a = np.empty(hi - lo, dtype=dt)
    a["label"] = i
    for k, m in enumerate(MULT):
        a["f"][:, k] = ((i * m) % (1 << 24)).astype(np.float32)
    return a


def table_data(work, rows):
    pq = os.path.join(work, "fields-table-%d.parquet" % rows)
    raw = os.path.join(work, "fields-table-%d.bin" % rows)
    if not os.path.exists(pq):
        log("writing %d rows of Parquet with DuckDB" % rows)
        cols = ", ".join("((range * %d) %% 16777216)::FLOAT AS f%d" % (m, k) for k, m in enumerate(MULT))
        duckdb(work, ["COPY (SELECT range::BIGINT AS label, %s FROM range(%d)) TO '%s.tmp' "
                      "(FORMAT PARQUET)" % (cols, rows, pq)])
        os.rename(pq + ".tmp", pq)
    if not os.path.exists(raw) or os.path.getsize(raw) != rows * ROW:
        log("writing %d rows of 72 B records with numpy" % rows)
        with open(raw + ".tmp", "wb") as f:
            for lo in range(0, rows, 1 << 20):
                feature_rows(lo, min(rows, lo + (1 << 20))).tofile(f)
        os.rename(raw + ".tmp", raw)
    return pq, raw


# ---------------------------------------------------------------- 2. a labels pass

def images_data(work, n):
    pq = os.path.join(work, "fields-images-%d.parquet" % n)
    if not os.path.exists(pq):
        log("writing %d samples of 10-100 KiB images and an INTEGER label with DuckDB" % n)
        # image i: md5(i) repeated 320 + (i * 7919 % 2881) times: 10-100 KiB.
        duckdb(work, ["COPY (SELECT (range %% 1000)::INTEGER AS label, "
                      "encode(repeat(md5(range::VARCHAR), (320 + range * 7919 %% 2881)::INTEGER)) AS image "
                      "FROM range(%d)) TO '%s.tmp' (FORMAT PARQUET, ROW_GROUP_SIZE 512)" % (n, pq)])
        os.rename(pq + ".tmp", pq)
    ds = os.path.join(work, "fields-images-%d" % n)
    if not os.path.exists(os.path.join(ds, "blockfs-fields.json")):
        sh("%s pack --quiet --force %s %s >/dev/null" % (BIN, pq, ds))
    return ds


# ---------------------------------------------------------------- 3. seed 004

def coco_data(work, n, shard=10000):
    """COCO-shaped samples: shards of WebDataset tars (NNNNNNNN.jpg, NNNNNNNN.json), and, for
    the in-RAM loader, coco/annotations.json (COCO's layout), coco/images.bin and its offsets."""
    import numpy as np
    d = os.path.join(work, "fields-coco-%d" % n)
    done = os.path.join(d, "done")
    if not os.path.exists(done):
        log("writing %d COCO-shaped samples (WebDataset tars, annotations.json, images.bin)" % n)
        os.makedirs(d, exist_ok=True)
        rng = np.random.default_rng(4)
        images, offsets, pos, ann_id = [], [0], 0, 0
        anns_part = open(os.path.join(d, "annotations.part"), "w")
        bins = open(os.path.join(d, "images.bin"), "wb")
        first = True
        tf = None
        mtime = time.time()

        def add(tf, name, data):
            ti = tarfile.TarInfo(name)  # as webdataset's TarWriter writes members
            ti.size, ti.mtime, ti.mode, ti.uname, ti.gname = len(data), mtime, 0o444, "bigdata", "bigdata"
            tf.addfile(ti, io.BytesIO(data))
        for i in range(n):
            if i % shard == 0:
                if tf:
                    tf.close()
                tf = tarfile.open(os.path.join(d, "shard-%06d.tar" % (i // shard)), "w", format=tarfile.USTAR_FORMAT)
            w, h = int(rng.integers(320, 641)), int(rng.integers(240, 481))
            k = min(20, int(rng.geometric(0.22)) - 1)
            pts = rng.integers(3, 31, size=k)
            coords = np.round(rng.uniform(0, 480, size=int(2 * pts.sum())), 2).tolist()
            boxes = np.round(rng.uniform(0, 300, size=(k, 4)), 2).tolist()
            cats = rng.integers(1, 91, size=k).tolist()
            anns, c = [], 0
            for j in range(k):
                seg = coords[c:c + 2 * int(pts[j])]
                c += 2 * int(pts[j])
                bx = boxes[j]
                anns.append({"id": ann_id, "image_id": i, "category_id": cats[j], "iscrowd": 0,
                             "area": round(bx[2] * bx[3] * 0.6, 2), "bbox": bx, "segmentation": [seg]})
                ann_id += 1
            img = {"id": i, "file_name": "%012d.jpg" % i, "width": w, "height": h}
            images.append(img)
            for a in anns:
                anns_part.write(("" if first else ",") + json.dumps(a))
                first = False
            blob = rng.bytes(int(rng.integers(2048, 8193)))
            bins.write(blob)
            pos += len(blob)
            offsets.append(pos)
            add(tf, "%08d.jpg" % i, blob)
            add(tf, "%08d.json" % i, json.dumps(dict(img, annotations=anns)).encode())
        tf.close()
        anns_part.close()
        bins.close()
        np.save(os.path.join(d, "offsets.npy"), np.array(offsets, dtype=np.int64))
        cats = [{"id": c, "name": "category-%d" % c, "supercategory": "thing"} for c in range(1, 91)]
        with open(os.path.join(d, "annotations.json"), "w") as f:
            f.write('{"info": {"description": "COCO-shaped, bench/fields_bench.py"}, "categories": %s, "images": %s, '
                    '"annotations": [' % (json.dumps(cats), json.dumps(images)))
            with open(os.path.join(d, "annotations.part")) as p:
                while True:
                    chunk = p.read(1 << 24)
                    if not chunk:
                        break
                    f.write(chunk)
            f.write("]}")
        os.remove(os.path.join(d, "annotations.part"))
        open(done, "w").close()
    ds = d + "-packed"
    if not os.path.exists(os.path.join(ds, "blockfs-fields.json")):
        t = time.perf_counter()
        sh("%s pack --quiet --force '%s/shard-*.tar' %s >/dev/null" % (BIN, d, ds))
        log("  packed %d samples from WebDataset tars in %.1f s" % (n, time.perf_counter() - t))
    return d, ds
