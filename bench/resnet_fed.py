"""ResNet-18 on a GPU fed by blockfs.torch.Loader (num_workers 0, the default: the shared-memory
path and a reading thread; the same with device="cuda", the copy to the GPU a batch ahead on a
stream of its own; and 8 workers), against its ceiling (one batch kept on the GPU) and the
map-style DataLoader users write first (np.memmap, shuffle=True, 8 workers).
Usage: resnet_fed.py DIR   (DIR as bench/node_scaling.py's: DIR/bin/blockfs, DIR/py/blockfs; its data
in $GPUW, default /tmp/gpuw2, made by node_scaling.py first)"""
import atexit, os, signal, sys, time, subprocess
HERE = os.path.abspath(sys.argv[1]); B = os.path.join(HERE, "bin", "blockfs")
sys.path.insert(0, os.path.join(HERE, "py")); os.environ["BLOCKFS_BIN"] = B
W = os.environ.get("GPUW", "/tmp/gpuw2"); ds = os.path.join(W, "img-224"); raw = os.path.join(W, "img-224.bin")
m = os.path.join(W, "m2"); os.makedirs(m, exist_ok=True)
import numpy as np, torch, torchvision, blockfs.torch
side = 224; rs = 3 * side * side; n = os.path.getsize(raw) // rs
subprocess.run([B, "mount", "--daemon", ds, m], check=True)
atexit.register(subprocess.run, [B, "unmount", m])  # also when a step fails (no GPU, no torchvision)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # and when a timeout stops it (device.sh)
subprocess.run(f"dd if={m}/epoch-0000 of=/dev/null bs=1M 2>/dev/null", shell=True)
dev = torch.device("cuda"); torch.backends.cudnn.benchmark = True
net = torchvision.models.resnet18(num_classes=1000).to(dev).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
def step(x, y):
    x = x.to(dev, non_blocking=True).view(-1, 3, side, side).contiguous(memory_format=torch.channels_last)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(net(x.float().div_(255)), (y % 1000).long().to(dev, non_blocking=True))
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
def rate(batches, steps=80, warm=10):
    k = got = 0; t = None
    for y, x in batches():
        step(x, y); k += 1
        if k == warm: torch.cuda.synchronize(); t = time.perf_counter()
        elif k > warm: got += len(y)
        if k == steps: break
    torch.cuda.synchronize(); return got / (time.perf_counter() - t)
def loader(nw, device=None):
    ld = blockfs.torch.Loader(m, batch_size=256, num_workers=nw, pin_memory=True, drop_last=True, persistent_workers=nw > 0,
                              device=device)
    def gen():
        e = 0
        while True:
            ld.set_epoch(e); e += 1
            yield from ld
    return gen
def ceiling():
    x = torch.randint(0, 256, (256, rs), dtype=torch.uint8, device=dev); y = torch.arange(256, device=dev)
    while True:
        yield y, x
class DS(torch.utils.data.Dataset):
    def __init__(self): self.a = None
    def __len__(self): return n
    def __getitem__(self, i):
        if self.a is None: self.a = np.memmap(raw, dtype=np.uint8, mode="r").reshape(n, rs)
        return i, torch.from_numpy(np.array(self.a[i]))
def memmap_dl():
    dl = torch.utils.data.DataLoader(DS(), batch_size=256, shuffle=True, num_workers=8, pin_memory=True, drop_last=True, persistent_workers=True)
    def gen():
        while True:
            yield from dl
    return gen
rate(ceiling, 30)
res = {}
for name, f in (("ceiling", lambda: ceiling), ("loader nw=0", lambda: loader(0)), ("loader nw=0 device", lambda: loader(0, dev)),
                ("loader nw=8", lambda: loader(8)), ("memmap DataLoader nw=8", memmap_dl), ("ceiling", lambda: ceiling),
                ("loader nw=0 device", lambda: loader(0, dev)), ("loader nw=0", lambda: loader(0))):
    r = rate(f()); res[name] = max(res.get(name, 0), r)
    print(f"resnet18 {name}: {r:,.0f} images/s", flush=True)
c = res["ceiling"]
print("resnet18 fed: " + "; ".join(f"{k} {v:,.0f} ({v / c:.2f}x)" for k, v in res.items()), flush=True)
