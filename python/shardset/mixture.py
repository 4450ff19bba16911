"""Mixtures of datasets: batches drawn from several caches by weight, with
exact resume, also after the weights change.

    mix = shardset.Mixture([("cache/web", 0.7), ("cache/code", 0.2),
                            (shardset.open_cache("cache/books", filter="lang = 'en'"), 0.1)],
                           batch_size=256, seed=0)
    for batch in mix:                 # {column: numpy array or list}
        ...
    mix.set_weights(10_000, [0.5, 0.4, 0.1])   # from step 10,000 on
    state = mix.state_dict()          # the schedule included

The draws, the sources' epoch orders, resume and the column checks are the
library's (`shardset::Mixture`); see docs/guide/mixtures.md. For PyTorch,
`shardset.torch.MixtureDataset(mix)` splits the steps over ranks and
DataLoader workers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import _shardset

if TYPE_CHECKING:
    from typing_extensions import TypeAlias

    from . import Dataset
    from ._shardset import _Columns

    # name, dataset, weight, end, column mapping
    _Source: TypeAlias = tuple[str, Dataset, float, str, list[tuple[str, str]] | None]


def _dataset(source: Dataset | str | os.PathLike[str]) -> Dataset:
    from . import Dataset, open_cache
    return source if isinstance(source, Dataset) else open_cache(source)


class Mixture:
    """Batches of `batch_size` samples, each drawn from one of `sources`
    (`(dataset or path, weight)` pairs) by weight.

    draw: "sample" (each sample drawn: batches mix sources in proportion)
    or "batch" (each batch from one source). order: each source's epoch
    order ("random", "shard-shuffle", "shard-sequential", "sequential",
    "block-shuffle:<rows>").
    end: what a source does when its rows run out, one for all or one per
    source: "cycle" (its next epoch starts) or "exhaust" (it drops out, the
    others' weights renormalise, and iteration ends when all have).
    names: the sources' names (default `s0`, `s1`, ...). columns: the
    columns every source has, by name and feature (default), or per source
    a mapping `{output name: source column}` (rename and select), None for
    a source's own columns; checked now, a BadInputError naming the source
    and the column otherwise. rank / world_size: this consumer's share of
    the steps (global step `j` goes to rank `j % world_size`)."""

    def __init__(self, sources: Iterable[tuple[Dataset | str | os.PathLike[str], float]],
                 batch_size: int = 256, seed: int = 0, draw: str = "sample",
                 order: str = "random", end: str | Sequence[str] = "cycle",
                 names: Sequence[str] | None = None,
                 columns: Sequence[Mapping[str, str] | None] | None = None,
                 rank: int = 0, world_size: int = 1) -> None:
        pairs = list(sources)
        n = len(pairs)
        ends: list[str] = [end] * n if isinstance(end, str) else list(end)
        names = [f"s{i}" for i in range(n)] if names is None else list(names)
        maps: list[Mapping[str, str] | None] = [None] * n if columns is None else list(columns)
        for what, count in (("end", len(ends)), ("names", len(names)), ("columns", len(maps))):
            if count != n:
                raise _shardset.BadInputError(f"{what} has {count} entries for {n} sources")
        # What the mixture is made of, kept for pickling (datasets pickle
        # as their path, open options and view rows).
        self._args: tuple[list[_Source], dict[str, Any]] = ([(str(nm), _dataset(src), float(w), e,
                        None if m is None else [(str(k), str(v)) for k, v in m.items()])
                       for (src, w), nm, e, m in zip(pairs, names, ends, maps)],
                      {"batch_size": int(batch_size), "seed": int(seed), "draw": draw,
                       "order": order})
        self._m = self._make()
        self.batch_size = int(batch_size)
        self.rank, self.world_size = int(rank), int(world_size)
        self.names = names

    def _make(self) -> _shardset.Mixture:
        sources, kw = self._args
        return _shardset.Mixture([(n, d._ds, w, e, c) for n, d, w, e, c in sources], **kw)

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k != "_m"}
        state["_state"] = self._m.state_json()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        saved = state.pop("_state")
        self.__dict__.update(state)
        self._m = self._make()
        self._m.load_state_json(saved, json.loads(saved)["world_size"])

    @property
    def column_names(self) -> list[str]:
        return self._m.column_names

    @property
    def step(self) -> int:
        """The global step after the batches yielded."""
        return self._m.step

    def set_weights(self, step: int, weights: Sequence[float]) -> None:
        """Uses `weights` (one per source) from global step `step` on; a
        step already consumed is a BadInputError."""
        self._m.set_weights(int(step), [float(w) for w in weights])

    def progress(self) -> list[dict[str, Any]]:
        """Each source's `rows_consumed`, `epochs_completed` and whether it
        is `exhausted`, at the current step."""
        return self._m.progress()

    def batches(self, worker: int = 0, num_workers: int = 1,
                ) -> Iterator[tuple[int, int, _Columns, list[int]]]:
        """`(rank-local index, global step, columns, source of each row)`
        for this rank's worker `worker` of `num_workers`, from the current
        place on."""
        return self._m.batches(self.rank, self.world_size, worker, num_workers)

    def __iter__(self) -> Iterator[_Columns]:
        for local, _step, cols, _sources in self.batches():
            self._m.set_done(local + 1, self.world_size)
            yield cols

    def state_dict(self) -> dict[str, Any]:
        """The place (a step, the rows each source gave before it, the
        batches yielded since) and the weight schedule."""
        return {"mixture": json.loads(self._m.state_json())}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues from `state` (any world size: every rank at the same
        step, the steps consumed are a prefix of the sequence)."""
        self._m.load_state_json(json.dumps(state["mixture"]), self.world_size)
