#!/usr/bin/env python3
"""A tiny PyTorch training loop on a shardset cache, checkpointed and resumed.

    python examples/train_torch.py [WORKDIR]

Writes a cache of 4,096 rows (two features and a class id, the class a
linear function of the features), trains a linear classifier for 20 steps
from a `StatefulDataLoader` over `shardset.torch.IterableDataset` with 2
workers, saving model, optimiser and loader state every 5 steps. Then it
starts again from the step-10 checkpoint, as a restarted job would, and
checks that the rows it reads and the weights it reaches are exactly those
of the uninterrupted run.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
import torch
from torchdata.stateful_dataloader import StatefulDataLoader  # type: ignore[import-untyped]

import shardset
from shardset import ClassLabel, Features, Sequence, Value
from shardset.torch import IterableDataset

STEPS, EVERY, BATCH = 20, 5, 64


def make_cache(path: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 2)).astype(np.float32)
    y = (x[:, 0] + 2 * x[:, 1] > 0).astype(np.int64)
    feats = Features({"x": Sequence(Value("float32")), "label": ClassLabel(names=["neg", "pos"]),
                      "id": Value("int64")})
    shardset.write_cache(({"x": x[i], "label": int(y[i]), "id": i} for i in range(4096)),
                         feats, path, shard_size=16 << 10)


def loader(path: str) -> StatefulDataLoader:
    ds = IterableDataset(path, batch_size=BATCH, order="shard-shuffle", seed=7)
    ds.set_epoch(0)
    return StatefulDataLoader(ds, batch_size=None, num_workers=2)


def train(path: str, ckpt_dir: str, start: str | None = None,
          stop: int = STEPS) -> tuple[torch.nn.Linear, list[int]]:
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    dl = loader(path)
    step, seen = 0, []
    if start is not None:
        ck = torch.load(start, weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        dl.load_state_dict(ck["loader"])
        step, seen = ck["step"], ck["seen"]
    for batch in dl:
        # Batches are made in the library as columns: "x" is [B, 2] float32.
        x = batch["x"]
        loss = torch.nn.functional.cross_entropy(model(x), batch["label"])
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]  # unannotated in torch
        opt.step()
        step += 1
        seen += batch["id"].tolist()
        if step % EVERY == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "loader": dl.state_dict(), "step": step, "seen": list(seen)},
                       os.path.join(ckpt_dir, f"step{step}.pt"))
            print(f"step {step}: loss {loss.item():.4f} (checkpointed)")
        if step == stop:
            break
    return model, seen


def main() -> None:
    work = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="shardset-train-")
    path = os.path.join(work, "cache")
    if not os.path.exists(path):
        make_cache(path)
    ckpts = os.path.join(work, "ckpt")
    os.makedirs(ckpts, exist_ok=True)
    print("uninterrupted run:")
    whole, seen = train(path, ckpts)
    print("restarted from the step-10 checkpoint:")
    resumed, seen2 = train(path, ckpts, start=os.path.join(ckpts, "step10.pt"))
    assert seen2 == seen, "the resumed run read other rows"
    for a, b in zip(whole.parameters(), resumed.parameters()):
        assert torch.equal(a, b), "the resumed run reached other weights"
    print(f"resumed run read the same {len(seen)} rows and reached the same weights")


if __name__ == "__main__":
    main()
