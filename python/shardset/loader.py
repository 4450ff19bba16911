"""`shardset.torch.Loader`: the input pipeline as a PyTorch iterable.

    from shardset import ops
    from shardset.torch import Loader

    loader = Loader(path, batch_size=256, seed=0, ops={"image": [
        ops.RandomResizedCrop(224), ops.RandomHorizontalFlip(),
        ops.ToDtype("float32"), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]})
    for epoch in range(epochs):
        for batch in loader:          # {"image": float32 [256, 3, 224, 224], "label": int64 [256]}
            ...
        # the next `for` starts the next epoch

Each batch is read, decoded, augmented and assembled by the library's
threads (`threads`, default the machine's cores) with no worker process and
no Python per sample, `prefetch` batches ahead; its columns reach torch as
tensors over the library's buffers (no copy). The split of the epoch over
ranks (from torch.distributed, or `rank`/`world_size`) is the library's one
epoch model, the one `IterableDataset` uses, and every sample's random
crop and flip follow from `(seed, epoch, its place in the epoch's order)`:
the same seed gives the same pixels with any thread count or rank split,
and after a resume.

Iteration goes on from where the loader stands: after a whole epoch, the
next epoch; after `load_state_dict`, the saved point; after a `break`, the
rest of that epoch (`set_epoch(e)` starts epoch `e` afresh).
`state_dict()`/`load_state_dict()` resume exactly, also with another
thread count or world size; torchdata's `StatefulDataLoader` checkpoints it
inside its workers too. Inside a `DataLoader` worker (`DataLoader(loader,
batch_size=None, num_workers=n)`), each worker reads its share with one
thread and hands each batch over as one shared-memory block.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import IterableDataset as _TorchIterable
from torch.utils.data import get_worker_info

import shardset
from shardset import _shardset

if TYPE_CHECKING:
    from ._shardset import _Order, _Remainder

Batch = dict[str, Any]


def _dist() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class Loader(_TorchIterable[Batch]):
    """Batches of finished tensors from a cache (see the module's docstring).

    source: a path (opened with `open_kwargs`), a `shardset.Dataset`, or a
    `shardset.Mixture` (read from where it stands, with its seed and batch
    size; iteration ends only when every source has dropped out, so a
    training loop counts its steps; `state_dict` is the mixture's state,
    its weight schedule included, and `set_weights` changes it on the way).
    ops: `{column: [op, ...]}` from `shardset.ops`; an image column needs
    ops that fix its size. columns: the output columns (default: numbers,
    class ids, fixed-shape arrays and images given ops). layout: "CHW"
    (default) or "HWC". map_batch: a function applied to each whole batch
    (the user's own Python step), in the consuming process."""

    def __init__(self, source: str | os.PathLike[str] | shardset.Dataset | shardset.Mixture,
                 batch_size: int | None = None,
                 ops: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                 columns: Sequence[str] | None = None, order: _Order = "shard-shuffle",
                 seed: int = 0, threads: int | None = None, prefetch: int = 2,
                 remainder: _Remainder = "drop_last", rank: int | None = None,
                 world_size: int | None = None, layout: str = "CHW",
                 map_batch: Callable[[Batch], Any] | None = None, **open_kwargs: Any) -> None:
        if isinstance(source, (shardset.Dataset, shardset.Mixture)):
            if open_kwargs:
                raise shardset.BadInputError(
                    "open options go with a path; this dataset is open already")
            self._source: Any = source
        else:
            self._source = os.fspath(source)
        self._open_kwargs = dict(open_kwargs)
        mixture_batch = source.batch_size if isinstance(source, shardset.Mixture) else 256
        self.batch_size = mixture_batch if batch_size is None else int(batch_size)
        self.ops = {str(k): [dict(o) for o in v] for k, v in (ops or {}).items()}
        self.columns = None if columns is None else [str(c) for c in columns]
        self.order, self.seed, self.remainder = order, int(seed), remainder
        self.threads = None if threads is None else int(threads)
        self.prefetch = int(prefetch)
        self.layout = layout
        self.map_batch = map_batch
        self._rank, self._world = rank, world_size
        self._pipe: _shardset.Pipeline | _shardset.MixturePipeline | None = None
        self._key: tuple[Any, ...] | None = None
        self._pending: dict[str, Any] | None = None
        # Checks every option and op now, before the first batch.
        self._pipeline()

    # ------------------------------------------------------------ set-up ---
    def _dataset(self) -> shardset.Dataset:
        if isinstance(self._source, shardset.Dataset):
            return self._source
        return shardset.open_cache(self._source, **self._open_kwargs)

    def _place(self) -> tuple[int, int, int, int, int]:
        """(rank, world size, worker, workers, threads) of this process."""
        if self._world is not None:
            rank, world = int(self._rank or 0), int(self._world)
        else:
            rank, world = _dist()
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        threads = self.threads
        if threads is None:
            threads = 1 if info is not None else (os.cpu_count() or 1)
        return rank, world, wid, nw, threads

    def _is_mixture(self) -> bool:
        return isinstance(self._source, shardset.Mixture)

    def _pipeline(self) -> _shardset.Pipeline | _shardset.MixturePipeline:
        key = (os.getpid(), *self._place())
        if self._pipe is None or self._key != key:
            if self._pipe is not None and self._pending is None:
                # Another process (a forked worker) or place: go on from
                # where this loader stood.
                self._pending = json.loads(self._pipe.state())
            rank, world, wid, nw, threads = key[1:]
            ops = [(c, json.dumps(o)) for c, o in self.ops.items()]
            if self._is_mixture():
                self._pipe = _shardset.MixturePipeline(
                    self._source._m, self.batch_size, ops, self.columns, rank, world, wid, nw,
                    threads, self.prefetch, self.layout)
            else:
                self._pipe = _shardset.Pipeline(
                    self._dataset()._ds, self.batch_size, ops, self.columns, self.order,
                    self.seed, self.remainder, rank, world, wid, nw, threads, self.prefetch,
                    self.layout)
            self._key = key
            if self._pending is not None:
                self._resume(self._pipe, self._pending)
                self._pending = None
        return self._pipe

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_pipe"], state["_key"] = None, None
        if self._pipe is not None:
            # Where this process's loader stands travels as a state.
            state["_pending"] = json.loads(self._pipe.state())
        return state

    # --------------------------------------------------------- iteration ---
    def __iter__(self) -> Iterator[Any]:
        pipe = self._pipeline()
        step, shared = self.map_batch, get_worker_info() is not None
        if step is None and not shared:
            # The native iterator itself: no Python frame a batch (at millions
            # of rows a second a batch has a few tens of microseconds), and a
            # batch the loop drops goes back to the pool at once, where a
            # generator would keep it until the next.
            return pipe
        return self._stepped(pipe, step, shared)

    @staticmethod
    def _stepped(pipe: Iterator[Batch], step: Callable[[Batch], Any] | None,
                 shared: bool) -> Iterator[Any]:
        from .torch import to_shared
        batch: Batch
        for batch in pipe:
            if shared:
                batch = to_shared(batch)
            # No local holds the batch while the generator waits at the
            # yield: one the loop drops is freed at once.
            box = [batch]
            del batch
            yield step(box.pop()) if step is not None else box.pop()

    def __len__(self) -> int:
        pipe = self._pipeline()
        if isinstance(pipe, _shardset.MixturePipeline):
            raise TypeError("a mixture's batches go on until its sources run out: it has no "
                            "length; count the steps of the training loop")
        return pipe.epoch_batches()

    @property
    def columns_out(self) -> list[str]:
        """The columns each batch has."""
        return self._pipeline().columns

    @property
    def max_bytes_in_flight(self) -> int:
        """The most bytes of batches being made or waiting at once."""
        return self._pipeline().max_bytes_in_flight()

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch `epoch` from its beginning (a mixture has no
        epochs: its sources have their own, and this does nothing)."""
        pipe = self._pipeline()
        if isinstance(pipe, _shardset.Pipeline):
            pipe.set_epoch(int(epoch))

    def set_weights(self, step: int, weights: Sequence[float]) -> None:
        """A mixture's weights from global step `step` on (see
        `shardset.Mixture.set_weights`); batches made ahead are made again."""
        pipe = self._pipeline()
        if not isinstance(pipe, _shardset.MixturePipeline):
            raise shardset.BadInputError("set_weights is for a loader over a shardset.Mixture")
        pipe.set_weights(int(step), [float(w) for w in weights])

    # ------------------------------------------------------ checkpointing ---
    def state_dict(self) -> dict[str, Any]:
        """Where the loader stands (after the last batch it yielded)."""
        state: dict[str, Any] = json.loads(self._pipeline().state())
        return state

    def _resume(self, pipe: _shardset.Pipeline | _shardset.MixturePipeline,
                state: Mapping[str, Any]) -> None:
        if isinstance(pipe, _shardset.MixturePipeline):
            pipe.load_state(json.dumps(state))
            return
        rank, world, wid, nw, _ = self._place()
        p = state["partition"]
        if (p["rank"], p["world_size"], p["worker"], p["num_workers"]) == (rank, world, wid, nw):
            pipe.resume(json.dumps(state))
        elif p["num_workers"] == 1:
            pos = state["position"]
            pipe.resume_at(pos["epoch"], pos["base"], state["next"], pos["world_size"])
        else:
            raise shardset.BadInputError(
                "this state is one DataLoader worker's; load the rank's state instead "
                "(shardset.torch.rank_state of the StatefulDataLoader's state)")

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues from `state` (also with another thread count, world
        size or number of DataLoader workers)."""
        self._resume(self._pipeline(), state)
