#!/usr/bin/env python3
"""blockfs.torch.Loader through the mount's files (shm=False: a trainer in another network
namespace than the daemon, or BLOCKFS_SHM=0), its large reads through O_DIRECT (the default,
blockfs._batches.DIRECT_READ) against every read buffered, in alternating rounds: for each
round and way, three new epochs of batches of 256 in a process of their own, each timed with
the trainer's CPU (getrusage) and the daemon's (/proc/PID/stat) per GiB, page cache dropped
before each round (root). The first epoch of each process includes its buffers' first pages.

  . bench/ddcpu.sh; ddcpu_data bin/blockfs /tmp/fuse_uring   # 588 MiB of 147 KiB records
  bin/blockfs mount --daemon /tmp/fuse_uring/img /tmp/lf
  /usr/bin/python3 bench/loader_files.py /tmp/lf 3
  bin/blockfs unmount /tmp/lf
"""
import os
import resource
import subprocess
import sys
import time
import warnings

import procstat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one(mount, way, first):
    """Three epochs from first, read the way asked, in this process."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    warnings.simplefilter("ignore")  # "reading through the mount's files": asked for
    import blockfs._batches
    import blockfs.torch
    if way == "buffered":
        blockfs._batches.DIRECT_READ = 1 << 62

    def cpu():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime

    ld = blockfs.torch.Loader(mount, batch_size=256, drop_last=True, shm=False)
    for e in range(first, first + 3):
        ld.set_epoch(e)
        d0, c0, t0, n = procstat.daemon_cpu(mount), cpu(), time.time(), 0
        for ids, x in ld:
            n += x.numel() * x.element_size()
        t, c, d, g = time.time() - t0, cpu() - c0, procstat.daemon_cpu(mount) - d0, n / 2**30
        print(f"{way:8s} epoch {e}: {g / t:.2f} GiB/s; CPU s/GiB trainer {c / g:.3f}, daemon {d / g:.3f}, "
              f"both {(c + d) / g:.3f}; reads through O_DIRECT so far {ld._batches.direct_reads}", flush=True)
    ld.close()


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--one":
        one(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    if len(sys.argv) < 2:
        sys.exit("usage: loader_files.py MOUNT [ROUNDS]")
    mount, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    epoch = int(time.time()) % 100000 * 10  # new epochs each run
    for r in range(rounds):
        ways = ("direct", "buffered") if r % 2 else ("buffered", "direct")
        for way in ways:
            subprocess.run(["sync"], check=True)
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            subprocess.run([sys.executable, os.path.abspath(__file__), "--one", mount, way, str(epoch)], check=True)
            epoch += 3


if __name__ == "__main__":
    main()
