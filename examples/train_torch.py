#!/usr/bin/env python3
"""A tiny PyTorch training loop on a shardset cache, fed by the library's
input pipeline, checkpointed and resumed.

    python examples/train_torch.py [WORKDIR]

Writes a cache of 2,048 small images (two classes, reddish or bluish noise)
with their class and id, then trains a small convolutional classifier for
20 steps from `shardset.torch.Loader`: each batch is decoded, randomly
cropped and flipped, normalised and stacked by the library's threads, and
arrives as float32 tensors `[64, 3, 32, 32]`. Model, optimiser and loader
state are saved every 5 steps. Then it starts again from the step-10
checkpoint with another number of threads, as a restarted job on another
machine would, and checks that the rows it reads and the weights it
reaches are exactly those of the uninterrupted run: every crop and flip
follows from (seed, epoch, the row's place in the epoch), not from the
threads.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
import torch

import shardset
from shardset import ClassLabel, Features, Image, Value, ops
from shardset.torch import Loader

STEPS, EVERY, BATCH = 20, 5, 64


def make_cache(path: str) -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, size=2048)

    def image(label: int) -> np.ndarray:
        px = rng.integers(0, 160, size=(40, 40, 3), dtype=np.uint8)
        px[..., 0 if label == 0 else 2] += 90  # reddish or bluish
        return px

    feats = Features({"image": Image(), "label": ClassLabel(names=["red", "blue"]),
                      "id": Value("int64")})
    shardset.write_cache(({"image": image(int(y)), "label": int(y), "id": i}
                          for i, y in enumerate(labels)), feats, path, shard_size=256 << 10)


def loader(path: str, threads: int) -> Loader:
    return Loader(path, batch_size=BATCH, seed=7, threads=threads, ops={"image": [
        ops.RandomResizedCrop(32, scale=(0.5, 1.0)), ops.RandomHorizontalFlip(),
        ops.ToDtype("float32"), ops.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])]})


def model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(8, 2))


def train(path: str, ckpt_dir: str, threads: int, start: str | None = None,
          stop: int = STEPS) -> tuple[torch.nn.Module, list[int]]:
    torch.manual_seed(0)
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    batches = loader(path, threads)
    step, seen = 0, []
    if start is not None:
        ck = torch.load(start, weights_only=False)
        net.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        batches.load_state_dict(ck["loader"])
        step, seen = ck["step"], ck["seen"]
    while step < stop:
        for batch in batches:  # one epoch from where the loader stands
            loss = torch.nn.functional.cross_entropy(net(batch["image"]), batch["label"])
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]  # unannotated in torch
            opt.step()
            step += 1
            seen += batch["id"].tolist()
            if step % EVERY == 0:
                torch.save({"model": net.state_dict(), "opt": opt.state_dict(),
                            "loader": batches.state_dict(), "step": step, "seen": list(seen)},
                           os.path.join(ckpt_dir, f"step{step}.pt"))
                print(f"step {step}: loss {loss.item():.4f} (checkpointed)")
            if step == stop:
                break
    return net, seen


def main() -> None:
    work = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="shardset-train-")
    path = os.path.join(work, "cache")
    if not os.path.exists(path):
        make_cache(path)
    ckpts = os.path.join(work, "ckpt")
    os.makedirs(ckpts, exist_ok=True)
    print("uninterrupted run, 2 threads:")
    whole, seen = train(path, ckpts, threads=2)
    print("restarted from the step-10 checkpoint, 1 thread:")
    resumed, seen2 = train(path, ckpts, threads=1, start=os.path.join(ckpts, "step10.pt"))
    assert seen2 == seen, "the resumed run read other rows"
    for a, b in zip(whole.parameters(), resumed.parameters()):
        assert torch.equal(a, b), "the resumed run reached other weights"
    print(f"resumed run read the same {len(seen)} rows and reached the same weights")


if __name__ == "__main__":
    main()
