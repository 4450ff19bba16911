"""Types of `shardset._shardset`, the native module built from python/src/*.rs.

The stub follows the bindings: `python/src/lib.rs` registers every name
below; `python -m mypy.stubtest shardset._shardset` (python/tests/test_typing.py)
checks that the two agree.
"""

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol, TypedDict, final, overload, type_check_only

import numpy as np
import torch
from numpy.typing import NDArray
from typing_extensions import CapsuleType, Self, TypeAlias

__all__ = [
    "ShardsetError",
    "CacheNotFoundError",
    "CorruptCacheError",
    "SchemaMismatchError",
    "BadInputError",
    "Dataset",
    "ArrowBatch",
    "BatchIter",
    "HostBuffer",
    "Staging",
    "EpochBatches",
    "ImageOps",
    "Pipeline",
    "Mixture",
    "MixtureBatches",
    "MixturePipeline",
    "_check_order",
    "write_options",
    "_check_write_options",
    "edit",
    "open_cache",
    "open_parquet",
    "open_hf",
    "convert",
    "report",
    "_reopen",
    "write_cache",
    "features_fingerprint",
    "_publish_part",
    "_commit_parts",
    "_gc_object_store",
    "_install_storage_options",
    "_storage_options",
]

# --------------------------------------------------------------- aliases ---

# A path the library opens: a str or an os.PathLike of str (an object
# store URI such as "s3://bucket/prefix" as a str).
_Path: TypeAlias = str | os.PathLike[str]

# The names the library parses (`Order::NAMES`, `Remainder`, `Layout`).
# An order is "sequential", "random", "shard-shuffle", "shard-sequential" or
# "block-shuffle:<rows>" (a number no type alias can spell, hence str).
_Order: TypeAlias = str
_Remainder: TypeAlias = Literal["drop_last", "pad", "partial"]
_Layout: TypeAlias = Literal["arrow", "lance", "video-frames", "lance-video-frames"]

# A decoded cell: its Python type follows the column's feature (None,
# bool, int, float, str, bytes, a numpy array, a list, or a dict for a
# video cell), which only the cache knows; `Any`, as a union would make
# every use of a row's value narrow it first.
_Cell: TypeAlias = Any

# A row (or a frames cache's window) as a dict of column name to cell.
_Row: TypeAlias = dict[str, _Cell]

# A batch of columns: stacked columns as numpy arrays in the column's
# dtype, the others (strings, bytes, images of several sizes) as lists.
_Columns: TypeAlias = dict[str, NDArray[Any] | list[_Cell]]

# An example to write: a dict of column name to value, or a (key, dict)
# pair (the key an int, else stored as its str()).
_Example: TypeAlias = dict[str, Any] | tuple[object, dict[str, Any]]

@type_check_only
class _ToList(Protocol):
    """Row positions as a numpy array or torch tensor: read through
    `tolist()`."""

    def tolist(self) -> Sequence[int]: ...

# Row positions (negative ones count from the end).
_Indices: TypeAlias = Sequence[int] | _ToList

# `open_cache`'s read modes: (verify_on_read, in_memory, memory_fraction,
# in_memory_fallback, version, trusted_roots).
# `open_cache`'s arguments, as a pickled dataset carries them: (path,
# columns, the library's OpenOptions as JSON).
_OpenArgs: TypeAlias = tuple[_Path, Sequence[str] | None, str, str]

@type_check_only
class _ArrayInterface(TypedDict):
    """numpy's `__array_interface__` (version 3) of a `HostBuffer`."""

    version: int
    shape: tuple[int, ...]
    typestr: str
    data: tuple[int, bool]

@type_check_only
class _EditPlan(TypedDict):
    """What a commit of staged edits would write."""

    base_version: int
    version: int
    rows_before: int
    rows_after: int
    rewritten: list[int]
    reused: list[int]
    removed: list[int]
    appended_rows: int
    bytes_estimate: int

@type_check_only
class _CommitReport(TypedDict):
    """What a commit of staged edits did."""

    version: int
    plan: _EditPlan
    rows: int
    bytes_written: int
    seconds: float

# ------------------------------------------------------------ exceptions ---

class ShardsetError(Exception):
    """Base of every error the library raises."""

class CacheNotFoundError(ShardsetError):
    """A cache, shard or input file is missing."""

class CorruptCacheError(ShardsetError):
    """A cache's files or metadata are damaged or unreadable."""

class SchemaMismatchError(ShardsetError):
    """A cache was written with other features than the ones given."""

class BadInputError(ShardsetError):
    """An argument, example or feature definition is not valid."""

# --------------------------------------------------------------- classes ---

@final
class Dataset:
    """A cache opened for reading: rows as dicts, as the reference returns them."""

    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, key: slice, /) -> Dataset: ...
    @overload
    def __getitem__(self, key: int, /) -> _Row: ...
    @overload
    def __getitem__(self, key: _Indices, /) -> list[_Row]: ...
    def __getitems__(self, indices: _Indices) -> list[_Row]: ...
    def epoch_rows(
        self, order: _Order, seed: int, epoch: int, start: int, end: int
    ) -> list[_Row]: ...
    def take_columns(self, indices: _Indices) -> _Columns: ...
    def epoch_columns(
        self, order: _Order, seed: int, epoch: int, start: int, end: int
    ) -> _Columns: ...
    def windows(self, indices: _Indices) -> NDArray[np.uint8]: ...
    def iter_batches(self, batch_size: int = 1024) -> BatchIter: ...
    def select_columns(self, columns: Sequence[str]) -> Dataset: ...
    def select(self, indices: _Indices) -> Dataset: ...
    def shuffle(self, seed: int) -> Dataset: ...
    def filter(self, expr: str) -> tuple[Dataset, dict[str, Any]]: ...
    def to_parquet(self, path: _Path) -> int: ...
    def train_test_split(
        self, test_size: int | float, seed: int = 0, stratify_by_column: str | None = None
    ) -> tuple[Dataset, Dataset]: ...
    @property
    def column_names(self) -> list[str]: ...
    @property
    def features_json(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def layout(self) -> str: ...
    @property
    def shard_row_counts(self) -> list[int]: ...
    def __reduce__(
        self,
    ) -> tuple[Callable[[_OpenArgs, bytes | None], Dataset], tuple[_OpenArgs, bytes | None]]: ...

@final
class ArrowBatch:
    """A record batch offered to Arrow consumers (`pyarrow.record_batch(b)`)."""

    def __arrow_c_array__(
        self, requested_schema: CapsuleType | None = None
    ) -> tuple[CapsuleType, CapsuleType]: ...
    def __len__(self) -> int: ...

@final
class BatchIter:
    """Batches of a dataset, `batch_size` rows each."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> ArrowBatch: ...

@final
class HostBuffer:
    """Bytes handed to numpy without a copy."""

    @property
    def __array_interface__(self) -> _ArrayInterface: ...

@final
class Staging:
    """Edits staged over a cache's version (see `shardset.edit`)."""

    def __len__(self) -> int: ...
    def get(self, index: int) -> _Row: ...
    def set_row(self, index: int, row: dict[str, Any]) -> None: ...
    def set_cell(self, index: int, column: str, value: object) -> None: ...
    def delete(self, index: int) -> None: ...
    def append(self, row: dict[str, Any]) -> None: ...
    def plan(self) -> _EditPlan: ...
    def commit(self, message: str | None = None) -> _CommitReport: ...

@final
class EpochBatches:
    """The batches of an epoch of `num_rows` rows for `world_size` ranks."""

    def __new__(
        cls, num_rows: int, batch_size: int, remainder: _Remainder, world_size: int
    ) -> Self: ...
    def global_batches(self) -> int: ...
    def rank_total(self, rank: int, base: int) -> int: ...
    def span(self, rank: int, base: int, i: int) -> tuple[int, int]: ...
    def check(self, rank: int, base: int, done: int) -> None: ...
    @staticmethod
    def restate(base: int, done: int, from_world: int, to_world: int) -> tuple[int, int]: ...
    @staticmethod
    def rank_done(nexts: Sequence[int]) -> int: ...

@final
class ImageOps:
    """An image column's ops, checked; applied to one encoded image as the pipeline does."""

    def __new__(cls, ops: str, column: str = "image") -> ImageOps: ...
    def apply(self, encoded: bytes, seed: int = 0, epoch: int = 0, position: int = 0,
              layout: str = "CHW") -> torch.Tensor: ...

@final
class Pipeline:
    """Batches of finished tensors from a dataset, made on the library's threads."""

    def __new__(
        cls,
        dataset: Dataset,
        batch_size: int,
        ops: Sequence[tuple[str, str]],
        columns: Sequence[str] | None,
        order: _Order,
        seed: int,
        remainder: _Remainder,
        rank: int,
        world_size: int,
        worker: int,
        num_workers: int,
        threads: int,
        prefetch: int,
        layout: str,
    ) -> Self: ...
    def __iter__(self) -> Self: ...
    def __next__(self) -> dict[str, torch.Tensor]: ...
    @property
    def columns(self) -> list[str]: ...
    def state(self) -> str: ...
    def resume(self, state: str) -> None: ...
    def resume_at(self, epoch: int, base: int, done: int, world_size: int) -> None: ...
    def set_epoch(self, epoch: int) -> None: ...
    def epoch_batches(self) -> int: ...
    def remaining_batches(self) -> int: ...
    def max_bytes_in_flight(self) -> int: ...
    def elements(self) -> list[tuple[str, str]]: ...

# A mixture source: name, dataset, weight, end ("cycle" or "exhaust"),
# and an optional column mapping of (output name, source column) pairs.
_MixtureSource: TypeAlias = tuple[str, Dataset, float, str, Sequence[tuple[str, str]] | None]

@final
class Mixture:
    """Several datasets drawn by weight (the library's `Mixture`)."""

    def __new__(
        cls,
        sources: Sequence[_MixtureSource],
        batch_size: int = 256,
        seed: int = 0,
        draw: str = "sample",
        order: str = "random",
    ) -> Self: ...
    @property
    def column_names(self) -> list[str]: ...
    @property
    def step(self) -> int: ...
    def set_weights(self, step: int, weights: Sequence[float]) -> None: ...
    def set_done(self, done: int, world_size: int) -> None: ...
    def state_json(self) -> str: ...
    def load_state_json(self, state: str, world_size: int) -> None: ...
    def progress(self) -> list[dict[str, Any]]: ...
    def batches(
        self, rank: int, world_size: int, worker: int, num_workers: int
    ) -> MixtureBatches: ...

@final
class MixtureBatches:
    """One consumer's batches: (rank-local index, global step, columns,
    the source of each row)."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> tuple[int, int, _Columns, list[int]]: ...

@final
class MixturePipeline:
    """Batches of finished tensors from a mixture, made on the library's threads."""

    def __new__(
        cls,
        mixture: Mixture,
        batch_size: int,
        ops: Sequence[tuple[str, str]],
        columns: Sequence[str] | None,
        rank: int,
        world_size: int,
        worker: int,
        num_workers: int,
        threads: int,
        prefetch: int,
        layout: str,
    ) -> Self: ...
    def __iter__(self) -> Self: ...
    def __next__(self) -> dict[str, torch.Tensor]: ...
    @property
    def columns(self) -> list[str]: ...
    def state(self) -> str: ...
    def load_state(self, state: str) -> None: ...
    def set_weights(self, step: int, weights: Sequence[float]) -> None: ...
    def step(self) -> int: ...
    def max_bytes_in_flight(self) -> int: ...
    def elements(self) -> list[tuple[str, str]]: ...

# ------------------------------------------------------------- functions ---

def open_cache(
    path: _Path,
    columns: Sequence[str] | None = None,
    decode_images: bool = True,
    window: tuple[int, int, int] | None = None,
    lance_chunk_rows: int | None = None,
    features: str | None = None,
    verify_on_read: bool = False,
    in_memory: bool = False,
    memory_fraction: float | None = None,
    in_memory_fallback: bool = False,
    version: int | None = None,
    trusted_roots: Sequence[_Path] = ...,
    max_image_pixels: int | None = None,
    max_frame_pixels: int | None = None,
    max_window_frames: int | None = None,
) -> Dataset: ...
def open_parquet(
    path: _Path,
    columns: Sequence[str] | None = None,
    features: str | None = None,
    decode_images: bool = True,
) -> Dataset: ...
def open_hf(
    path: _Path,
    split: str | None = None,
    columns: Sequence[str] | None = None,
    features: str | None = None,
    decode_images: bool = True,
) -> Dataset: ...
def report(
    path: str,
    output: str,
    seed: int,
    sample_rows: int,
    images: int,
    windows: int,
    trusted_roots: list[str],
) -> tuple[int, int, int, int]: ...
def convert(
    kind: str,
    path: _Path,
    out: _Path,
    layout: str,
    options_json: str,
    features_json: str | None = None,
    rebuild: bool = False,
) -> list[tuple[str, int]]: ...
def _reopen(args: _OpenArgs, positions: bytes | None) -> Dataset: ...
def edit(path: _Path) -> Staging: ...
def write_cache(
    examples: Iterable[_Example],
    features_json: str,
    path: _Path,
    layout: _Layout,
    options_json: str,
    progress: Callable[[int], object] | None = None,
) -> int: ...
def write_options() -> list[tuple[str, list[str], str]]: ...
def _check_write_options(layout: _Layout, options_json: str) -> None: ...
def features_fingerprint(features_json: str) -> str: ...
def _check_order(order: str) -> None: ...
def _publish_part(local_dir: _Path, uri: _Path, build: str, unit: int) -> str: ...
def _commit_parts(uri: _Path, build: str, parts: Sequence[str]) -> tuple[str, int, bool]: ...
def _gc_object_store(uri: _Path, min_age_s: float = 3600.0, dry_run: bool = False) -> list[str]: ...
def _install_storage_options(options_json: str) -> None: ...
def _storage_options() -> str: ...
