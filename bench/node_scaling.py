#!/usr/bin/env python3
"""One node's aggregate with many reader processes, timed inside each process after a common start
(import time excluded), on a many-core GPU machine.
(A) W processes, each blockfs.torch.Loader rank r of W (batch 256 of 147 KiB images), a new epoch
    each trial, against W processes each gathering the same batches' records in-process from
    np.memmap of the raw file in the page cache (the copy limit of a loader in the trainer);
(B) dd of a new epoch at bs=1M against bs=16M, 1, 8 and 16 readers; the kernel's FUSE request limit;
(C) ResNet-18 fed by the Loader with 8 workers.
(D) the same as (A) in steady state: each process reads one epoch untimed (its buffers made),
    then all start together on two new epochs; the daemon's CPU seconds per GiB over them.
Usage: node_scaling.py DIR [--small]   (AGG_W=8,16: the process counts of (A) and (D); MOUNT_ARGS: more
options for the mount, e.g. "--cpuprofile FILE"; TRAIN=0: no (C); PHASES=aggregate,steady: only those of
aggregate (A), dd (B), train (C), steady (D))   (DIR/bin holds static blockfs and loopback builds, DIR/py a
copy of python/blockfs; GPUW: scratch, default /tmp/gpuw2; OUT: where the summary goes)
This is how the figures of the "one node at the speed of its memory" issue were measured."""
import json, os, subprocess, sys, time
import numpy as np
import procstat

HERE = os.path.abspath(sys.argv[1]); SMALL = "--small" in sys.argv
os.environ["PATH"] = os.path.join(HERE, "bin") + ":" + os.environ["PATH"]
os.environ["BLOCKFS_BIN"] = B = os.path.join(HERE, "bin", "blockfs")
PY = os.path.join(HERE, "py"); sys.path.insert(0, PY)
W = os.environ.get("GPUW", "/tmp/gpuw2"); os.makedirs(W, exist_ok=True)
OUT = os.environ.get("OUT", W); MIB = 1 << 20; T0 = time.time(); RES = []


def say(*a):
    line = " ".join(str(x) for x in a); print(f"[{time.time() - T0:6.1f}s] {line}", flush=True); RES.append(line)


def sh(c):
    return subprocess.run(c, shell=True, check=True)


def make_raw(path, nbytes, rs):
    if os.path.exists(path) and os.path.getsize(path) == nbytes:
        return
    base = np.random.default_rng(0).integers(0, 256, size=64 * MIB - (64 * MIB) % rs, dtype=np.uint8)
    with open(path, "wb") as f:
        done, k = 0, 0
        while done < nbytes:
            n = min(len(base), nbytes - done); b = base[:n].copy(); b ^= np.uint8(k & 255)
            r = b[: n - n % rs].reshape(-1, rs); first = done // rs
            r[:, :8] = np.arange(first, first + len(r), dtype="<u8").view(np.uint8).reshape(-1, 8)
            f.write(b.tobytes()); done += n; k += 1


WORKER = r'''
import os, sys, time, numpy as np
sys.path.insert(0, sys.argv[1])
kind, r, w, m, raw, n, rs, go, epoch = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], int(sys.argv[7]), int(sys.argv[8]), sys.argv[9], int(sys.argv[10])
import torch, blockfs.torch, blockfs._shm
arena = [0.0]  # seconds this process spent making its shared-memory buffers (the daemon maps each)
if kind == "blockfs":
    make = blockfs._shm._Arena.__init__
    def timed(self, *a, **k):
        t = time.time(); make(self, *a, **k); arena[0] += time.time() - t
    blockfs._shm._Arena.__init__ = timed
    ld = blockfs.torch.Loader(m, batch_size=256, rank=r, world_size=w, drop_last=True)
    ld.set_epoch(epoch)
    def batches():
        for ids, x in ld:
            yield len(ids)
else:
    a = np.memmap(raw, dtype=np.uint8, mode="r").reshape(n, rs)
    perm = np.random.default_rng(epoch).permutation(n)
    step = 256 * w
    def batches():
        for s in range(0, n - step + 1, step):
            idx = np.sort(perm[s + r * 256: s + (r + 1) * 256])
            x = torch.from_numpy(a[idx])          # fancy index: one copy out of the page cache
            yield len(idx)
open(go + f".ready{r}", "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
t0 = time.time(); k = 0
for b in batches():
    k += b
print(k, t0, time.time(), arena[0])
'''


def marks(go, w):
    """The files of a trial's start: go, which starts its w processes, and each one's
    go.readyR."""
    return [go] + [f"{go}.ready{r}" for r in range(w)]


def clear(go, w):
    """Removes a trial's start files (an earlier run's, of the same name, would start its
    processes at once, each as its imports end)."""
    for f in marks(go, w):
        if os.path.exists(f):
            os.remove(f)


def ready(go, ps):
    """Waits until each of the processes ps has made go.readyR (its imports done, its reader
    made) or ended (results says why), at most 600 s."""
    deadline = time.time() + 600
    while not all(os.path.exists(f"{go}.ready{r}") or p.poll() is not None for r, p in enumerate(ps)):
        if time.time() > deadline:
            raise RuntimeError("the processes were not ready within 600 s")
        time.sleep(0.01)


def results(ps, kind):
    """The numbers each process printed, once all have ended; RuntimeError if one failed."""
    outs = []
    for p in ps:
        o, err = p.communicate()
        if p.returncode: raise RuntimeError(f"{kind} process exited {p.returncode}: {err[-600:]}")
        outs.append([float(x) for x in o.split()])
    return outs


def aggregate(m, raw, n, rs):
    wp = os.path.join(W, "worker.py"); open(wp, "w").write(WORKER)
    e = 100
    for w in ((1, 2) if SMALL else tuple(int(x) for x in os.environ.get("AGG_W", "1,4,8,16").split(","))):
        best = {}
        for kind in ("blockfs", "memmap", "blockfs", "memmap"):
            e += 1; go = os.path.join(W, f"go{e}"); clear(go, w)
            ps = [subprocess.Popen(["python3", wp, PY, kind, str(r), str(w), m, raw, str(n), str(rs), go, str(e)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(w)]
            ready(go, ps)
            open(go, "w").close()
            outs = results(ps, kind)
            clear(go, w)
            recs = sum(o[0] for o in outs); t = max(o[2] for o in outs) - min(o[1] for o in outs)
            best[kind] = max(best.get(kind, 0), recs / t)
            if kind == "blockfs":  # a fresh process's buffers: made as its reads need them
                say(f"   {w:2d} Loader processes: {t:.3f} s; making their buffers took {1e3 * sum(o[3] for o in outs) / w:.0f} ms "
                    f"a process (at most {1e3 * max(o[3] for o in outs):.0f})")
        say(f"{w:2d} processes, batches of 256 x {rs // 1024} KiB: blockfs Loader {best['blockfs']:,.0f} img/s = {best['blockfs'] * rs / 1e9:.2f} GB/s; "
            f"in-process memmap gather {best['memmap']:,.0f} img/s = {best['memmap'] * rs / 1e9:.2f} GB/s; ratio {best['blockfs'] / best['memmap']:.2f}")


STEADY = r'''
import os, sys, time, numpy as np
sys.path.insert(0, sys.argv[1])
kind, r, w, m, raw, n, rs, go, epoch = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], int(sys.argv[7]), int(sys.argv[8]), sys.argv[9], int(sys.argv[10])
import torch, blockfs.torch
if kind == "blockfs":
    ld = blockfs.torch.Loader(m, batch_size=256, rank=r, world_size=w, drop_last=True)
    def batches(e):
        ld.set_epoch(e)
        for ids, x in ld:
            yield len(ids)
else:
    a = np.memmap(raw, dtype=np.uint8, mode="r").reshape(n, rs)
    def batches(e):
        perm = np.random.default_rng(e).permutation(n); step = 256 * w
        for s in range(0, n - step + 1, step):
            x = torch.from_numpy(a[np.sort(perm[s + r * 256: s + (r + 1) * 256])])
            yield len(x)
t = time.time(); k0 = sum(batches(epoch)); first = time.time() - t
open(go + f".ready{r}", "w").close()
while not os.path.exists(go):
    time.sleep(0.0005)
t0 = time.time(); k = 0
for e in (epoch + 1, epoch + 2):
    k += sum(batches(e))
print(k, t0, time.time(), first)
'''
dcpu = procstat.daemon_cpu
def steady(m, raw, n, rs):
    wp = os.path.join(W, "steady.py"); open(wp, "w").write(STEADY)
    e = 500
    for w in ((1, 2) if SMALL else tuple(int(x) for x in os.environ.get("AGG_W", "1,8,16").split(","))):
        best = {}
        for kind in ("blockfs", "memmap", "blockfs", "memmap"):
            e += 3; go = os.path.join(W, f"sgo{e}"); clear(go, w)
            ps = [subprocess.Popen(["python3", wp, PY, kind, str(r), str(w), m, raw, str(n), str(rs), go, str(e)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(w)]
            ready(go, ps)
            d0 = dcpu(m); open(go, "w").close()
            outs = results(ps, kind)
            d1 = dcpu(m)
            clear(go, w)
            recs = sum(o[0] for o in outs); t = max(o[2] for o in outs) - min(o[1] for o in outs)
            r = recs / t
            if r > best.get(kind, (0,))[0]:
                best[kind] = (r, (d1 - d0) / (recs * rs / 2**30), max(o[3] for o in outs))
        b, g = best["blockfs"], best["memmap"]
        say(f"steady {w:2d} processes: Loader {b[0] * rs / 1e9:.2f} GB/s (daemon {b[1]:.3f} cpu-s/GiB; first epoch {b[2]:.2f} s); "
               f"gather {g[0] * rs / 1e9:.2f} GB/s (first epoch {g[2]:.2f} s); ratio {b[0] / g[0]:.2f}")


def dd(m):
    e = [200]

    def run(n, bs):
        e[0] += 1
        t = time.perf_counter()
        ps = [subprocess.Popen(f"dd if={m}/shard-{r}-of-{n}/epoch-{e[0]:04d} of=/dev/null bs={bs}", shell=True,
                               stderr=subprocess.DEVNULL) for r in range(n)]
        for p in ps: p.wait()
        return time.perf_counter() - t
    size = os.path.getsize(os.path.join(m, "epoch-0000"))
    for n in (1, 8, 16):
        r = {bs: max(size / run(n, bs) / 1e9 for _ in range(2)) for bs in ("1M", "16M")}
        say(f"dd of a new epoch, {n} readers: bs=1M {r['1M']:.2f} GB/s, bs=16M {r['16M']:.2f} GB/s")


def train(m):
    import torch, torchvision, blockfs.torch
    if not torch.cuda.is_available():
        return
    dev = torch.device("cuda"); side = 224; rs = 3 * side * side
    net = torchvision.models.resnet18(num_classes=1000).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    for workers in (8,):
        ld = blockfs.torch.Loader(m, batch_size=256, num_workers=workers, pin_memory=True, drop_last=True, persistent_workers=True)
        k, got, t, e = 0, 0, None, 0
        while k < 45:
            ld.set_epoch(e); e += 1
            for ids, x in ld:
                x = x.to(dev, non_blocking=True).view(-1, 3, side, side).contiguous(memory_format=torch.channels_last)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = torch.nn.functional.cross_entropy(net(x.float().div_(255)), (ids % 1000).long().to(dev))
                opt.zero_grad(set_to_none=True); loss.backward(); opt.step(); k += 1
                if k == 5: torch.cuda.synchronize(); t = time.perf_counter()
                elif k > 5: got += len(ids)
                if k == 45: break
        torch.cuda.synchronize()
        say(f"resnet18 blockfs.torch.Loader num_workers={workers}: {got / (time.perf_counter() - t):,.0f} images/s")


if __name__ == "__main__":
    lim = open("/proc/sys/fs/fuse/max_pages_limit").read().strip() if os.path.exists("/proc/sys/fs/fuse/max_pages_limit") else "absent"
    say("cpus", os.cpu_count(), "max_pages_limit", lim)
    side = 224 if not SMALL else 32; rs = 3 * side * side; n = 16384 if not SMALL else 2048
    # Named by their shape: a --small run's data in the same GPUW is not the full run's.
    raw = os.path.join(W, f"img-{side}.bin"); make_raw(raw, n * rs, rs)
    ds = os.path.join(W, f"img-{side}")
    if not os.path.exists(os.path.join(ds, "blockfs.json")):
        sh(f"{B} pack --quiet --format raw --record-size {rs} {raw} {ds}")
    sh(f"cat {raw} > /dev/null; find {ds} -type f -exec cat {{}} + > /dev/null")
    m = os.path.join(W, "m"); os.makedirs(m, exist_ok=True); sh(f"{B} mount --daemon {os.environ.get('MOUNT_ARGS', '')} {ds} {m}")
    try:
        sh(f"dd if={m}/epoch-0000 of=/dev/null bs=1M 2>/dev/null")  # the daemon's cache filled
        phases = os.environ.get("PHASES", "aggregate,steady,dd,train").split(",")
        for f in (aggregate, steady, dd) + ((train,) if os.environ.get("TRAIN") != "0" else ()):
            if f.__name__ not in phases:
                continue
            try:
                f(m) if f not in (aggregate, steady) else f(m, raw, n, rs)
            except Exception as ex:
                import traceback; traceback.print_exc(); say(f.__name__, "failed:", repr(ex)[:400])
        st = json.load(open(os.path.join(m, ".blockfs/stats.json")))
        say("stats:", json.dumps(st)[:800])
    finally:
        subprocess.run(f"{B} unmount {m}", shell=True)
        open(os.path.join(OUT, "gpucheck2.txt"), "w").write("\n".join(RES) + "\n")
