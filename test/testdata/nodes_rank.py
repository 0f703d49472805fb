"""One rank of a simulated multi-node job over a node-aware mount (test/nodes_test.go).

torchrun-style environment: RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, and MASTER_ADDR and
MASTER_PORT for a gloo process group whose all_reduce of each batch's size keeps the ranks in
step, as a training step's gradient all_reduce does. Reads the epochs
given with blockfs.torch.Loader from MOUNT, checks every record against the raw file (record
id i is bytes [i*size, (i+1)*size) of it), and writes each epoch's ids to OUT/ids-E-RANK.npy.
After each epoch it writes OUT/done-E-RANK and waits for OUT/go-E, so the test can read the
store's counters between epochs. --state-in resumes from a saved state; --stop-after N stops
the first epoch after N batches and writes the state to --state-out (rank 0).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import blockfs.torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mount")
    ap.add_argument("--raw", required=True)
    ap.add_argument("--record-size", type=int, required=True)
    ap.add_argument("--epochs", required=True, help="first:last, inclusive")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--state-in")
    ap.add_argument("--stop-after", type=int)
    ap.add_argument("--state-out")
    ap.add_argument("--barrier", action="store_true")
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["WORLD_SIZE"]))
    raw = np.memmap(a.raw, dtype=np.uint8, mode="r").reshape(-1, a.record_size)
    loader = blockfs.torch.Loader(a.mount, batch_size=a.batch)
    first, last = (int(x) for x in a.epochs.split(":"))
    if a.state_in:
        with open(a.state_in) as f:
            loader.load_state_dict(json.load(f))
        first = loader.epoch
    tag = os.environ.get("BLOCKFS_TEST_TAG", "")
    for e in range(first, last + 1):
        loader.set_epoch(e)
        got, n = [], 0
        expect = len(loader)
        for ids, x in loader:
            ids = ids.numpy().astype(np.int64)
            if not np.array_equal(x.numpy().reshape(len(ids), -1), raw[ids]):
                sys.exit(f"rank {rank} epoch {e}: records differ from the raw file at ids {ids[:4]}...")
            got.append(ids)
            n += 1
            step = torch.tensor([len(ids)])
            dist.all_reduce(step)  # the training step: every rank in it, each with a batch
            if a.stop_after is not None and n == a.stop_after:
                break
        if a.stop_after is None and n != expect:
            sys.exit(f"rank {rank} epoch {e}: {n} batches, len() said {expect}")
        np.save(os.path.join(a.out, f"ids-{e}-{rank}{tag}.npy"), np.concatenate(got) if got else np.zeros(0, np.int64))
        if a.stop_after is not None:
            if rank == 0 and a.state_out:
                with open(a.state_out + ".tmp", "w") as f:
                    json.dump(loader.state_dict(), f)
                os.rename(a.state_out + ".tmp", a.state_out)
            break
        if a.barrier:
            open(os.path.join(a.out, f"done-{e}-{rank}"), "w").close()
            deadline = time.time() + 300
            while not os.path.exists(os.path.join(a.out, f"go-{e}")):
                if time.time() > deadline:
                    sys.exit(f"rank {rank}: no go-{e} after 300 s")
                time.sleep(0.02)
    dist.destroy_process_group()
    print("ok", rank)


if __name__ == "__main__":
    main()
