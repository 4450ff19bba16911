"""PyTorch datasets over shardset caches.

    from shardset.torch import MapDataset, IterableDataset

    # Map-style: any sampler; the DataLoader fetches batches with __getitems__.
    loader = DataLoader(MapDataset(path), batch_size=256, num_workers=2, shuffle=True)

    # Iterable: the library's epoch orders, split by rank and worker, batches
    # collated in the workers, exact resume with torchdata's StatefulDataLoader.
    ds = IterableDataset(path, batch_size=256, order="shard-shuffle", seed=0)
    loader = StatefulDataLoader(ds, batch_size=None, num_workers=2)

Both pickle as their path and options: every worker process opens the cache
itself, lazily, once per process (fork, spawn and forkserver alike); the
library's runtimes are rebuilt in a forked child.

How the iterable dataset splits an epoch: by the library's epoch model
(`shardset::EpochBatches` in Rust, the same as the Rust `Loader`'s). The
epoch order (one permutation per `(order, seed, epoch)`, the same in every
process) is cut into global batches of `batch_size` rows. Global batch `j`
goes to rank `j % world_size`; within a rank, rank-local batch `i` goes to
worker `i % num_workers`, and a DataLoader yields a rank's batches
round-robin over its workers, so it yields rank-local batches 0, 1, 2, ...
in order whatever the number of workers. Its position is then one number,
the rank-local batches yielded, which is why a checkpoint resumes exactly
after a change of `num_workers`, and (with every rank at the same step, as
in synchronous data-parallel training) after a change of world size: the
global batches consumed are a prefix of the epoch.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.context
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import Dataset as _TorchDataset
from torch.utils.data import IterableDataset as _TorchIterable
from torch.utils.data import get_worker_info

import shardset
from shardset import _shardset

if TYPE_CHECKING:
    from numpy.typing import NDArray
    from typing_extensions import TypeIs

    from ._shardset import _Order, _Remainder, _Row


class _Lazy:
    """A cache opened once per process, on first use; or a dataset given
    opened (any view, Parquet too), which pickles as its path, options and
    rows and opens again in a worker process."""

    def __init__(self, path: str | os.PathLike[str] | shardset.Dataset,
                 open_kwargs: Mapping[str, Any]) -> None:
        self._given = path if isinstance(path, shardset.Dataset) else None
        self.path = str(path.path) if isinstance(path, shardset.Dataset) else str(path)
        self.open_kwargs = dict(open_kwargs)
        self._ds: shardset.Dataset | None = None
        self._pid: int | None = None

    def get(self) -> shardset.Dataset:
        if self._given is not None:
            return self._given
        if self._ds is None or self._pid != os.getpid():
            self._ds = shardset.open_cache(self.path, **self.open_kwargs)
            self._pid = os.getpid()
        return self._ds

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "open_kwargs": self.open_kwargs, "given": self._given}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.path = state["path"]
        self.open_kwargs = state["open_kwargs"]
        self._given = state.get("given")
        self._ds = None
        self._pid = None


class MapDataset(_TorchDataset[dict[str, Any]]):
    """`len(ds)`, `ds[i]` and `ds.__getitems__(indices)` over a cache (a
    path and `open_cache`'s keywords) or an opened dataset (any view;
    `open_parquet`'s too): rows
    as the reference returns them (dicts of Python scalars and numpy arrays;
    the DataLoader's collate stacks them into tensors)."""

    def __init__(self, path: str | os.PathLike[str] | shardset.Dataset,
                 **open_kwargs: Any) -> None:
        self._lazy = _Lazy(path, open_kwargs)
        self._len = len(self._lazy.get())

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int | list[int] | tuple[int, ...]) -> dict[str, Any]:
        if isinstance(index, (list, tuple)):
            # A batch sampler's whole batch (DataLoader(batch_size=None,
            # sampler=BatchSampler(...))): columns made in the library.
            return to_torch(self._lazy.get().take_batch(list(index)))
        return self._lazy.get()[int(index)]

    def __getitems__(self, indices: Sequence[int]) -> list[_Row]:
        return self._lazy.get().__getitems__(list(indices))


def _is_array(v: NDArray[Any] | list[Any]) -> TypeIs[NDArray[Any]]:
    """A column a batch holds as an array (the others are lists). (Not
    `hasattr(v, "__array_interface__")`: numpy builds that dict on every
    look-up, a fifth of a scalar batch's time in the consumer.)"""
    return isinstance(v, np.ndarray)


def to_torch(
    columns: Mapping[str, NDArray[Any] | list[Any]],
) -> dict[str, torch.Tensor | list[Any]]:
    """A batch of columns (`Dataset.take_batch`) as tensors; lists stay
    lists. In this process: tensors over the arrays' memory (no copy). In a
    DataLoader worker: in one shared-memory block (`to_shared`)."""
    batch = {k: torch.from_numpy(v) if _is_array(v) else v for k, v in columns.items()}
    return to_shared(batch) if get_worker_info() is not None else batch


def to_shared(batch: dict[str, Any]) -> dict[str, Any]:
    """A worker's batch with every tensor copied once into one shared-memory
    block that all of them view, so the batch crosses to the main process
    as one segment (not one per column, and not copied again when it is
    sent)."""
    tensors = [(k, v) for k, v in batch.items() if isinstance(v, torch.Tensor)]
    if len(tensors) < 2:
        return batch
    spans, total = [], 0
    for _, v in tensors:
        total = -(-total // 16) * 16  # every column 16-byte aligned
        spans.append(total)
        total += v.nbytes
    shared = torch.UntypedStorage._new_shared(total)  # type: ignore[no-untyped-call]
    block = torch.empty(0, dtype=torch.uint8).set_(shared)
    out = dict(batch)
    for (k, v), off in zip(tensors, spans):
        t = block[off:off + v.nbytes].view(v.dtype).view(v.shape)
        t.copy_(v)
        out[k] = t
    return out


def _dist() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class IterableDataset(_TorchIterable[Any]):
    """Collated batches of `batch_size` rows in the library's epoch order,
    this rank's and this worker's share (see the module's docstring).

    order: "shard-shuffle" (default: shards in a random order, rows shuffled
    within each), "shard-sequential", "random", "sequential" or
    "block-shuffle:<rows>" (each shard cut into blocks of at most that many
    rows, the blocks in a random order, rows shuffled within each). remainder:
    "drop_last" (every rank gets the same number of full batches; the rest
    of the epoch is dropped) or "pad" (the last batches wrap to the start of
    the epoch's order so every row is read) or "partial" (every row exactly
    once: the epoch's last batch is shorter, and ranks may get one batch
    more than others, so it suits one process or evaluation rather than
    lock-step data-parallel training). rank / world_size: default from
    torch.distributed when it is initialised, else 0 / 1.

    Use it with `DataLoader(ds, batch_size=None, ...)` (batches are made
    here). collate=True (default): each batch is made in the library as
    columns, a dict of tensors (numbers in the column's dtype, images and
    arrays of one shape stacked, strings and other unstackable values as
    lists; see `Dataset.take_batch`); collate=False: a list of row dicts.
    `set_epoch(e)` before each epoch; with persistent workers the epoch
    reaches them through the state the loader hands each worker at
    the start of its iteration (`StatefulDataLoader`), or through
    `shardset.torch.epoch_sync`."""

    def __init__(self, path: str | os.PathLike[str] | shardset.Dataset, batch_size: int = 256,
                 order: _Order = "shard-shuffle", seed: int = 0,
                 remainder: _Remainder = "drop_last", rank: int | None = None,
                 world_size: int | None = None, collate: bool = True,
                 **open_kwargs: Any) -> None:
        _shardset._check_order(order)
        self._lazy = _Lazy(path, open_kwargs)
        self.num_rows = len(self._lazy.get())
        # Checks batch_size and remainder (the library's one check).
        _shardset.EpochBatches(self.num_rows, int(batch_size), remainder, 1)
        self.batch_size = int(batch_size)
        self.order = order
        self.seed = int(seed)
        self.remainder = remainder
        self.collate = collate
        self._rank, self._world = rank, world_size
        # The epoch, shared with worker processes (persistent ones too): an
        # anonymous shared value, inherited by forked workers and handed to
        # spawned ones at their start; no named shared-memory file.
        self._epoch = multiprocessing.get_context().Value("q", 0, lock=False)
        # Where the epoch stands: global batches consumed before this
        # segment (`base`), then rank-local batches yielded in it (`done`).
        self._base = 0
        self._done = 0
        # This worker's next rank-local batch while iterating, and the one a
        # loaded worker state continues from.
        self._next: int | None = None
        self._resume_next: int | None = None

    @property
    def epoch(self) -> int:
        return int(self._epoch.value)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if multiprocessing.context.get_spawning_popen() is None:
            # Plain pickling (not a worker's start): the epoch by value.
            state["_epoch"] = int(self._epoch.value)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        epoch = state["_epoch"]
        if isinstance(epoch, int):
            state["_epoch"] = multiprocessing.get_context().Value("q", epoch, lock=False)
        self.__dict__.update(state)

    # ------------------------------------------------------------ layout ---
    def _rank_world(self) -> tuple[int, int]:
        if self._world is not None:
            return int(self._rank or 0), int(self._world)
        return _dist()

    def _plan(self, world: int) -> _shardset.EpochBatches:
        return _shardset.EpochBatches(self.num_rows, self.batch_size, self.remainder, world)

    def _rank_total(self, rank: int, world: int) -> int:
        """Rank-local batches of `rank` from `base` on."""
        return self._plan(world).rank_total(rank, self._base)

    def rank_batches(self) -> int:
        """Rank-local batches of this rank in the epoch, from where it stands."""
        rank, world = self._rank_world()
        return max(0, self._rank_total(rank, world) - self._done)

    def __len__(self) -> int:
        return self.rank_batches()

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch `epoch` from its beginning (in persistent workers too)."""
        self._epoch.value = int(epoch)
        self._base = 0
        self._done = 0
        self._next = None
        self._resume_next = None

    # --------------------------------------------------------- iteration ---
    def __iter__(self) -> Iterator[Any]:
        rank, world = self._rank_world()
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        ds = self._lazy.get()
        plan = self._plan(world)
        total = plan.rank_total(rank, self._base)
        epoch = self.epoch
        if self._resume_next is not None:
            # A worker state loaded by StatefulDataLoader: its own next batch.
            i, self._resume_next = self._resume_next, None
        else:
            i = self._done + wid
        self._next = i
        while i < total:
            lo, hi = plan.span(rank, self._base, i)
            i += nw
            batch: dict[str, torch.Tensor | list[Any]] | list[_Row]
            if self.collate:
                batch = to_torch(ds._ds.epoch_columns(self.order, self.seed, epoch, lo, hi))
            else:
                batch = ds._ds.epoch_rows(self.order, self.seed, epoch, lo, hi)
            self._next = i
            yield batch

    # ------------------------------------------------------ checkpointing ---
    def state_dict(self) -> dict[str, Any]:
        """The position: epoch, global batches consumed before this segment,
        rank-local batches yielded, and this worker's next batch (in a
        worker), with what they refer to (checked when loaded)."""
        _, world = self._rank_world()
        info = get_worker_info()
        return {
            "epoch": self.epoch, "base": self._base, "done": self._done,
            "next": self._next, "world_size": world,
            "num_workers": info.num_workers if info is not None else 0,
            "seed": self.seed, "order": self.order, "batch_size": self.batch_size,
            "num_rows": self.num_rows, "remainder": self.remainder,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues from `state`: a worker's own state (from
        StatefulDataLoader, same number of workers), or a rank's state from
        `rank_state(loader.state_dict())` (any number of workers, any world
        size)."""
        for k in ("seed", "order", "batch_size", "num_rows", "remainder"):
            if state[k] != getattr(self, k):
                raise shardset.BadInputError(
                    f"the state is for {k}={state[k]!r}, this dataset has {getattr(self, k)!r}")
        _, world = self._rank_world()
        self._epoch.value = int(state["epoch"])
        # Every rank at the same step: a prefix of the global batches.
        self._base, self._done = _shardset.EpochBatches.restate(
            state["base"], state["done"], state["world_size"], world)
        same = state["world_size"] == world and state.get("next") is not None
        self._resume_next = state["next"] if same else None
        self._next = None


class MixtureDataset(_TorchIterable[Any]):
    """A `shardset.Mixture` for `DataLoader(ds, batch_size=None, ...)`: its
    global steps split over ranks (torch.distributed when initialised, else
    `rank`/`world_size`) and the DataLoader's workers as the epoch model
    splits batches, each batch a dict of tensors. `state_dict` and
    `load_state_dict` work as `IterableDataset`'s: a worker's own state
    under `StatefulDataLoader`, or a rank's from `rank_state(...)`, loadable
    with any number of workers or world size."""

    def __init__(self, mixture: shardset.Mixture, rank: int | None = None,
                 world_size: int | None = None) -> None:
        self.mixture = mixture
        self._rank, self._world = rank, world_size
        self._next: int | None = None
        self._resume_next: int | None = None

    def _rank_world(self) -> tuple[int, int]:
        if self._world is not None:
            return int(self._rank or 0), int(self._world)
        return _dist()

    def _done(self, world: int) -> int:
        m = self.mixture._m
        state = json.loads(m.state_json())
        if state["world_size"] != world:
            m.set_done(0, world)  # restated: the steps consumed become the base
            return 0
        return int(state["done"])

    def __iter__(self) -> Iterator[dict[str, torch.Tensor | list[Any]]]:
        rank, world = self._rank_world()
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        m = self.mixture._m
        if self._resume_next is not None:
            # A worker state loaded by StatefulDataLoader: its own next batch.
            m.set_done(self._resume_next - wid, world)
            self._resume_next = None
        self._next = self._done(world) + wid
        for local, _step, cols, _sources in m.batches(rank, world, wid, nw):
            self._next = local + nw
            if info is None:
                m.set_done(local + 1, world)
            yield to_torch(cols)

    def state_dict(self) -> dict[str, Any]:
        """The mixture's state (its schedule included), the rank-local
        batches yielded, and this worker's next batch (in a worker)."""
        _, world = self._rank_world()
        info = get_worker_info()
        done = self._done(world)
        return {"mixture": json.loads(self.mixture._m.state_json()), "done": done,
                "next": self._next, "world_size": world,
                "num_workers": info.num_workers if info is not None else 0}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues from `state` (see the class docstring)."""
        _, world = self._rank_world()
        saved = dict(state["mixture"])
        saved["done"], saved["world_size"] = int(state["done"]), int(state["world_size"])
        self.mixture._m.load_state_json(json.dumps(saved), world)
        same = state["world_size"] == world and state.get("next") is not None
        self._resume_next = state["next"] if same else None
        self._next = None


def rank_state(loader_state: Mapping[str, Any]) -> dict[str, Any]:
    """A rank's position from a `StatefulDataLoader.state_dict()` over an
    `IterableDataset`: the rank-local batches the loader yielded (the least
    next batch of its workers), loadable into an `IterableDataset` read with
    any number of workers or world size."""
    snap = loader_state.get("_snapshot", {})
    workers = snap.get("_worker_snapshots")
    if workers:
        states = [w["dataset_state"] for w in workers.values()]
    else:
        states = [snap.get("_main_snapshot", {}).get("dataset_state") or
                  loader_state.get("dataset_state")]
    states = [s for s in states if s]
    if not states:
        raise shardset.BadInputError("no shardset dataset state in this loader state")
    nw = max(1, len(states))
    base = dict(states[0])
    # A worker that has not yielded yet stands at the rank's position plus
    # its id; the loader has yielded exactly the batches before the least.
    nexts = [s["next"] if s["next"] is not None else s["done"] + k
             for k, s in enumerate(states)]
    base.update(done=_shardset.EpochBatches.rank_done(nexts), next=None, num_workers=nw)
    return base


from .loader import Loader as Loader  # noqa: E402  (the input pipeline; it uses to_torch above)
