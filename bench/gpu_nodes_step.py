"""4 node-aware mounts (--nodes 4) of one dataset on one machine feed a real training step on
the GPU: each step concatenates one batch from every node's rank (a DDP global batch), copies
it to the GPU and runs a forward/backward of an MLP. Prints records/s and the step time."""
import os, subprocess, sys, time
import numpy as np
sys.path.insert(0, "python")
import torch
import blockfs.torch
B = "bin/blockfs"
work = "/tmp/gn"
os.makedirs(work, exist_ok=True)
raw = os.path.join(work, "raw.bin")
n, rs = 262144, 1024  # 256 MiB of 1 KiB records
if not os.path.exists(raw):
    np.random.default_rng(0).integers(0, 255, size=n * rs, dtype=np.uint8).tofile(raw)
ds = os.path.join(work, "ds")
if not os.path.exists(ds):
    subprocess.run([B, "pack", "--quiet", "--format", "raw", "--record-size", "1KiB", "--block-size", "1MiB", raw, ds], check=True)
mnts = []
for i in range(4):
    m = os.path.join(work, "m%d" % i); os.makedirs(m, exist_ok=True)
    subprocess.run([B, "mount", "--daemon", "--nodes", "4", "--node", str(i), "--seed", "1", ds, m], check=True)
    mnts.append(m)
try:
    dev = torch.device("cuda")
    net = torch.nn.Sequential(torch.nn.Linear(rs, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    loaders = [blockfs.torch.Loader(m, batch_size=256, rank=i, world_size=4, drop_last=True) for i, m in enumerate(mnts)]
    for epoch in range(2):
        for ld in loaders: ld.set_epoch(epoch)
        t0, recs, steps, seen = time.perf_counter(), 0, 0, []
        for batches in zip(*loaders):
            x = torch.cat([b[1] for b in batches]).to(dev, non_blocking=True).float()
            seen.append(torch.cat([b[0] for b in batches]))
            y = (x[:, 0] % 10).long()
            opt.zero_grad(); loss = torch.nn.functional.cross_entropy(net(x / 255), y); loss.backward(); opt.step()
            recs += len(x); steps += 1
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        ids = torch.cat(seen).numpy()
        print("epoch %d: %d steps, %d records (%d distinct) in %.2f s: %.0f records/s, %.2f ms a step; GPU %s" % (
            epoch, steps, recs, len(np.unique(ids)), dt, recs / dt, 1000 * dt / steps, torch.cuda.get_device_name()), flush=True)
    for ld in loaders: ld.close()
finally:
    for m in mnts:
        subprocess.run([B, "unmount", m])
