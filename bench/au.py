#!/usr/bin/env python3
"""Accelerator utilisation in MLPerf Storage's terms: P emulated accelerators on one node, one
process each, each reading its rank's batches of one blockfs mount with blockfs.torch.Loader
(num_workers=0: the Loader reads the next batch while the step computes) and "computing" each
batch for a fixed time (a sleep, as MLPerf Storage emulates a step). Utilisation is the compute
time (what the steps took) over the wall time, from a common start; a mount keeps P accelerators busy when every
one of them is at 90% or more. The same processes gathering the same batches in-process from
np.memmap of the raw file in the page cache (a gather, then the step) are the reference.

Two figures each: over the whole run (every process new: its first batch waits for its
buffers to be made, which in a short run of many processes is much of it), and over the
epochs after each process's first ("steady": what a training run of many epochs sees; needs
--epochs 2 or more). Processes start once each has imported torch and made its Loader.

    /usr/bin/python3 bench/au.py [--bin bin/blockfs] [--workload resnet50|resnet18|unet3d]
                                 [--processes 1,2,4] [--mib N] [--epochs 2] [--markdown FILE]

Workloads (the step times are the H200's, measured with torchvision in bf16 on 256 images of
224x224x3 uint8, 147 KiB each; 3D-U-Net's is MLPerf Storage v1.0's H100 figure a sample):
  resnet50: batch 256 of 147 KiB, 54 ms a step   resnet18: batch 256 of 147 KiB, 20 ms a step
  unet3d:   batch 1 of 140 MiB, 46 ms a step
Data: --mib of records (default 1024; 2048 for unet3d), packed once under $AUW (default
/tmp/blockfs-au), mounted with the default flags and read once before timing (in the daemon's
cache). Prints a row per process count and exits 0."""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = {"resnet50": (150528, 256, 0.054), "resnet18": (150528, 256, 0.020), "unet3d": (140 << 20, 1, 0.046)}

WORKER = r'''
import os, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
kind, r, w, m, raw, rs, bs, step, go, epochs = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], int(sys.argv[7]), int(sys.argv[8]), float(sys.argv[9]), sys.argv[10], int(sys.argv[11])
ready = sys.argv[12]
import torch, blockfs.torch
n = os.path.getsize(raw) // rs
if kind == "blockfs":
    ld = blockfs.torch.Loader(m, batch_size=bs, rank=r, world_size=w, drop_last=True)
    def batches(e):
        ld.set_epoch(10 + e)
        for ids, x in ld:
            yield x
else:
    a = np.memmap(raw, dtype=np.uint8, mode="r").reshape(n, rs)
    def batches(e):
        perm = np.random.default_rng(e).permutation(n)
        for s in range(0, n - bs * w + 1, bs * w):
            yield torch.from_numpy(a[np.sort(perm[s + r * bs: s + (r + 1) * bs])])
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
t0 = time.time(); busy = 0.0; steps = 0
for e in range(epochs):
    if e == 1:
        t1, busy1 = time.time(), busy
    for x in batches(e):
        s0 = time.time(); time.sleep(step); busy += time.time() - s0; steps += 1
end = time.time()
if epochs < 2:
    t1, busy1 = end, busy
print(steps, busy, end - t0, busy - busy1, end - t1)
'''


def run(args, kind, w, m, raw, rs, bs, step, tag):
    wp = os.path.join(args.work, "au_worker.py")
    with open(wp, "w") as f:
        f.write(WORKER)
    go = os.path.join(args.work, f"go-{tag}")
    ready = [os.path.join(args.work, f"ready-{tag}-{r}") for r in range(w)]
    marks = ready + [go]
    for f in marks:  # a run cut short leaves them
        if os.path.exists(f):
            os.remove(f)
    ps = []
    try:
        for r in range(w):
            ps.append(subprocess.Popen([sys.executable, wp, os.path.join(HERE, "..", "python"), kind, str(r), str(w), m,
                                        raw, str(rs), str(bs), str(step), go, str(args.epochs), ready[r]],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        # Every process's imports done and its reader made (or it failed), then all start at once.
        deadline = time.time() + 600
        while not all(os.path.exists(f) or p.poll() is not None for f, p in zip(ready, ps)):
            if time.time() > deadline:
                raise RuntimeError(f"{kind}: the processes were not ready within 600 s")
            time.sleep(0.01)
        open(go, "w").close()
        aus, steady = [], []
        for p in ps:
            out, err = p.communicate()
            if p.returncode:
                raise RuntimeError(err[-600:])
            steps, busy, wall, busy1, wall1 = (float(x) for x in out.split())
            aus.append(busy / wall)
            if args.epochs >= 2:
                steady.append(busy1 / wall1)
        return aus, steady
    finally:
        for p in ps:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in marks:
            if os.path.exists(f):
                os.remove(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "bin", "blockfs"))
    ap.add_argument("--workload", default="resnet50", choices=sorted(WORKLOADS))
    ap.add_argument("--processes", default="1,2,4")
    ap.add_argument("--mib", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--markdown", default="")
    args = ap.parse_args()
    args.work = os.environ.get("AUW", "/tmp/blockfs-au")
    os.makedirs(args.work, exist_ok=True)
    rs, bs, step = WORKLOADS[args.workload]
    mib = args.mib or (2048 if args.workload == "unet3d" else 1024)
    n = max(1, (mib << 20) // rs)
    raw = os.path.join(args.work, f"{args.workload}-{mib}.bin")
    if not os.path.exists(raw) or os.path.getsize(raw) != n * rs:
        rng = np.random.default_rng(0)
        with open(raw, "wb") as f:
            for i in range(n):
                f.write(rng.integers(0, 256, size=rs, dtype=np.uint8).tobytes())
    ds = raw[:-4]
    if not os.path.exists(os.path.join(ds, "blockfs.json")):
        subprocess.run([args.bin, "pack", "--quiet", "--format", "raw", "--record-size", str(rs), raw, ds], check=True)
    subprocess.run(f"cat {raw} > /dev/null", shell=True, check=True)
    m = os.path.join(args.work, "mnt")
    os.makedirs(m, exist_ok=True)
    os.environ["BLOCKFS_BIN"] = args.bin
    subprocess.run([args.bin, "mount", "--daemon", ds, m], check=True)
    head = ("| workload | accelerators | blockfs.torch.Loader utilisation (min / mean) | np.memmap gather, then step "
            "(min / mean) | Loader keeps all >= 90% | gather keeps all >= 90% | steady: Loader / gather (min) | "
            "steady: Loader keeps all | steady: gather keeps all |\n|---|---|---|---|---|---|---|---|---|\n")
    print(head, end="", flush=True)
    rows = []
    try:
        subprocess.run(f"dd if={m}/epoch-0000 of=/dev/null bs=1M 2>/dev/null", shell=True, check=True)
        for w in (int(x) for x in args.processes.split(",")):
            best, steadiest = {}, {}
            for i, kind in enumerate(("blockfs", "memmap", "blockfs", "memmap")):
                aus, steady = run(args, kind, w, m, raw, rs, bs, step, f"{kind}-{w}-{len(rows)}-{i}")
                if kind not in best or min(aus) > min(best[kind]):
                    best[kind] = aus
                if steady and (kind not in steadiest or min(steady) > min(steadiest[kind])):
                    steadiest[kind] = steady
            b, g = best["blockfs"], best["memmap"]
            row = (f"| {args.workload} | {w} | {min(b):.2f} / {np.mean(b):.2f} | {min(g):.2f} / {np.mean(g):.2f} | "
                   f"{'yes' if min(b) >= 0.9 else 'no'} | {'yes' if min(g) >= 0.9 else 'no'} | ")
            if steadiest:
                sb, sg = min(steadiest["blockfs"]), min(steadiest["memmap"])
                row += f"{sb:.2f} / {sg:.2f} | {'yes' if sb >= 0.9 else 'no'} | {'yes' if sg >= 0.9 else 'no'} |"
            else:
                row += "n/a (--epochs 1) | | |"
            print(row, flush=True)
            rows.append(row)
    finally:
        subprocess.run([args.bin, "unmount", m])
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(head + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
