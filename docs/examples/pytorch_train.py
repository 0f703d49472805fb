#!/usr/bin/env python3
"""Training from a blockfs dataset with the Python package, with a checkpoint that resumes
exactly (the rest of the epoch, each record once), whatever the workers or ranks of the
resumed run.

    pytorch_train.py DATASET [--epochs 2] [--workers 2] [--batch 64] [--checkpoint ckpt.pt]
                             [--stop-after K]

DATASET is a directory made by blockfs pack of float32 rows (an .npy). The model is a linear
layer fitting the last column from the others; the point is the loop. --stop-after K stops
after K batches, as a crash would after a checkpoint; run again to resume. Under torchrun,
rank and world size come from the environment and every local rank shares one mount.
"""
import argparse
import os

import torch

import blockfs
import blockfs.torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--stop-after", type=int, default=0)
    a = ap.parse_args()

    with blockfs.Mount(a.dataset, seed=1) as m, \
            blockfs.torch.Loader(m, a.batch, num_workers=a.workers, persistent_workers=True) as loader:
        cols = m.info["shape"][0]
        model = torch.nn.Linear(cols - 1, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        if a.checkpoint and os.path.exists(a.checkpoint):
            ckpt = torch.load(a.checkpoint)
            model.load_state_dict(ckpt["model"])
            opt.load_state_dict(ckpt["opt"])
            loader.load_state_dict(ckpt["loader"])  # the rest of that epoch, each record once
            print("resumed at epoch %d, record %d" % (loader.epoch, loader.position))
        steps = 0
        for epoch in range(loader.epoch, a.epochs):
            loader.set_epoch(epoch)  # keeps a resumed position in the resumed epoch
            seen = 0
            for ids, rows in loader:
                loss = torch.nn.functional.mse_loss(model(rows[:, :-1]), rows[:, -1:])
                opt.zero_grad()
                loss.backward()
                opt.step()
                seen += len(ids)
                steps += 1
                if a.checkpoint and steps == a.stop_after:
                    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                                "loader": loader.state_dict()}, a.checkpoint)
                    print("stopped after %d batches, at epoch %d record %d" % (steps, loader.epoch, loader.position))
                    return
            print("epoch %d: %d records, loss %.4f" % (epoch, seen, float(loss)))


if __name__ == "__main__":
    main()
