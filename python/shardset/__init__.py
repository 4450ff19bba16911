"""shardset: typed, sharded, crash-safe dataset caches, read fast.

    import shardset
    ds = shardset.open_cache("/path/to/cache")      # any layout, ours or the reference's
    row = ds[0]                                     # a dict, as the reference returns it
    rows = ds.__getitems__([3, 1, 4])               # PyTorch's batched fetch
    for batch in ds.iter_batches():                 # pyarrow.RecordBatch, no copy
        ...

    shardset.write_cache(examples, features, "/path/to/cache", format="arrow")

Reads and decodes run in the Rust library with the GIL released.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal, overload

from . import _shardset, ops  # noqa: F401  (ops: the input pipeline's ops)
from ._shardset import (  # noqa: F401
    BadInputError,
    CacheNotFoundError,
    CorruptCacheError,
    SchemaMismatchError,
    ShardsetError,
)
from ._progress import ProgressLike, Reporter, total_of
from .mixture import Mixture  # noqa: F401
from .features import (  # noqa: F401
    Array2D,
    Array3D,
    Array4D,
    Array5D,
    ClassLabel,
    Features,
    Image,
    Sequence,
    Value,
    Video,
)

if TYPE_CHECKING:
    import numpy as np
    import pyarrow  # type: ignore[import-untyped]
    from numpy.typing import NDArray

    from ._shardset import _Columns, _Example, _Indices, _Layout, _Row
    from .features import FeaturesLike


def _pa() -> Any:
    """pyarrow, imported at first use: `import shardset` stays cheap (a
    fresh process, a Ray worker) for code that never asks for Arrow batches.
    (pyarrow ships no type information, hence `Any`.)"""
    import pyarrow
    return pyarrow


__all__ = ["open_cache", "open_parquet", "open_hf", "write_cache", "convert", "report", "edit", "Dataset", "Mixture", "Features", "Value", "ClassLabel",
           "Sequence", "Image", "Array2D", "Array3D", "Array4D", "Array5D", "Video", "ShardsetError",
           "CacheNotFoundError", "CorruptCacheError", "SchemaMismatchError", "BadInputError"]


class Dataset:
    """A cache opened for reading (see `open_cache`)."""

    __slots__ = ("_ds",)

    def __init__(self, inner: _shardset.Dataset) -> None:
        self._ds = inner

    def __len__(self) -> int:
        return len(self._ds)

    @overload
    def __getitem__(self, key: slice) -> Dataset: ...
    @overload
    def __getitem__(self, key: int) -> _Row: ...
    @overload
    def __getitem__(self, key: _Indices) -> list[_Row]: ...

    def __getitem__(self, key: slice | int | _Indices) -> Dataset | _Row | list[_Row]:
        out = self._ds[key]
        return Dataset(out) if isinstance(out, _shardset.Dataset) else out

    def __getitems__(self, indices: _Indices) -> list[_Row]:
        return self._ds.__getitems__(indices)

    def take_batch(self, indices: _Indices) -> _Columns:
        """The rows at `indices` as one batch of columns made in the library:
        `{name: numpy array}` for numbers and class ids (in the column's own
        dtype) and for images and arrays of one shape (stacked `[B, ...]`),
        `{name: list}` for values that do not stack (strings, bytes, images
        of several sizes). For a frames cache opened with a window: `video`
        `[B, T, H, W, 3]` uint8 with `video_idx`, `start_frame`,
        `frame_indices` `[B, T]` and `sample_idx`."""
        return self._ds.take_columns(indices)

    def __iter__(self) -> Iterator[_Row]:
        """Rows in view order, decoded by the library 256 at a time."""
        n = len(self._ds)
        for s in range(0, n, 256):
            yield from self._ds.__getitems__(list(range(s, min(n, s + 256))))

    def iter_batches(self, batch_size: int = 1024) -> Iterator[pyarrow.RecordBatch]:
        """`pyarrow.RecordBatch`es of the view in order, imported through the
        Arrow C Data interface without a copy."""
        for b in self._ds.iter_batches(batch_size):
            yield _pa().record_batch(b)

    def windows(self, indices: _Indices) -> NDArray[np.uint8]:
        """Windows of a frames cache, stacked `[B, T, H, W, 3]` uint8."""
        return self._ds.windows(indices)

    def select_columns(self, columns: Iterable[str]) -> Dataset:
        return Dataset(self._ds.select_columns(list(columns)))

    def select(self, indices: _Indices) -> Dataset:
        return Dataset(self._ds.select(indices))

    def shuffle(self, seed: int = 0) -> Dataset:
        return Dataset(self._ds.shuffle(seed))

    def filter(self, expr: str | Callable[[_Row], bool]) -> Dataset:
        """The rows for which `expr` is true, in view order, as a view.

        `expr` is SQL over the scalar columns (`Value`s and `ClassLabel`
        ids), evaluated in the library: comparisons, `IN`, `BETWEEN`,
        `LIKE`, `AND`/`OR`/`NOT`, `IS [NOT] NULL`; a row whose predicate is
        NULL is not kept. On a whole Lance cache it is pushed down to
        Lance's scanner; on a whole local cache the selection is kept in
        `_selections/` and the next open with the same filter reads it back.
        A bad filter is a BadInputError naming it and the reason, before
        any row is read. `expr` may also be a function of a row (as in
        Hugging Face `datasets`), called in Python on every row."""
        if callable(expr):
            keep = [i for i, row in enumerate(self) if expr(row)]
            return self.select(keep)
        return Dataset(self._ds.filter(expr)[0])

    def to_parquet(self, path: str | os.PathLike[str]) -> int:
        """Writes this view's rows, its columns as stored (images as their
        encoded bytes), as one Parquet file at `path`, replaced atomically;
        our features and Hugging Face's go in its metadata, so
        `open_parquet` and `datasets` read class names and images back.
        Returns the rows written."""
        return self._ds.to_parquet(str(path))

    def filter_report(self, expr: str) -> tuple[Dataset, dict[str, Any]]:
        """`filter(expr)` and what it did: the columns read, rows in and
        kept, `source` (`"kept"`, `"lance-scan"` or `"evaluated"`), where
        the selection is kept (`kept_at`) or why it is not (`not_kept`)."""
        view, report = self._ds.filter(expr)
        return Dataset(view), report

    def train_test_split(self, test_size: int | float, seed: int = 0,
                         stratify_by_column: str | None = None) -> dict[str, Dataset]:
        a, b = self._ds.train_test_split(test_size, seed, stratify_by_column)
        return {"train": Dataset(a), "test": Dataset(b)}

    @property
    def features(self) -> Features:
        return Features.from_json(self._ds.features_json)

    @property
    def column_names(self) -> list[str]:
        return self._ds.column_names

    @property
    def path(self) -> str:
        return self._ds.path

    @property
    def layout(self) -> str:
        return self._ds.layout

    @property
    def shard_row_counts(self) -> list[int]:
        return self._ds.shard_row_counts

    def __reduce__(self) -> tuple[type[Dataset], tuple[_shardset.Dataset]]:
        return (Dataset, (self._ds,))

    def __repr__(self) -> str:
        return repr(self._ds)


def open_cache(path: str | os.PathLike[str], columns: Iterable[str] | None = None,
               decode_images: bool = True, window: int | tuple[int, int, int] | None = None,
               lance_chunk_rows: int | None = None, features: FeaturesLike | None = None,
               verify_on_read: bool = False, in_memory: bool = False,
               memory_fraction: float | None = None, in_memory_fallback: bool = False,
               version: int | None = None,
               trusted_roots: Iterable[str | os.PathLike[str]] = (),
               max_image_pixels: int | None = None, max_frame_pixels: int | None = None,
               max_window_frames: int | None = None, filter: str | None = None) -> Dataset:
    """Opens a cache of any layout (`arrow-shards`, `lance-rows`,
    `lance-video-frames`), written by shardset or by stable-datasets.

    columns: read only these. decode_images: images as HxWxC uint8 arrays
    (else their stored bytes). window: for frames caches, the window spec
    as `length` or `(length, frame_skip, hop_size)`; rows are then windows,
    returned as the reference's samples (`video` a `[T, H, W, 3]` uint8
    array). lance_chunk_rows: rows a Lance random read brings in together
    (default 64). features: the features (ours, the reference's, or JSON)
    for a cache that does not describe its own, as the reference's caches
    do not; checked against the cache's schema fingerprint.

    verify_on_read: check every row read against the per-record checksums
    the cache was written with (`write_cache(record_checksums=True)`); a
    changed row raises CorruptCacheError naming the row, its columns and the
    file. in_memory: load the cache into RAM at open (arrow-shards and
    lance-rows), refused with an error naming both sizes when it needs more
    than `memory_fraction` (default 0.5) of the memory available, unless
    `in_memory_fallback` (then it is read mapped). version: open an older
    version of a cache edited by commits (`shardset log` lists them).

    trusted_roots: directories outside the cache whose files its video path
    cells may name (also `SHARDSET_TRUSTED_ROOTS`, separated by `:`). By
    default a cell may only name a regular file inside the cache: an
    absolute path elsewhere, a `..` escape, a symlink out, a device, a FIFO
    or a protocol string is a CorruptCacheError naming the path, before any
    file is opened. Caches the reference wrote with absolute paths open with
    the directory of their videos trusted.

    max_image_pixels, max_frame_pixels, max_window_frames: how large an
    image, a video frame or a window a read may decode (default: PIL's
    decompression-bomb limit, 178,956,970 pixels, for images and frames;
    4096 frames per window). A cache asking for more is a CorruptCacheError
    naming the limit, before anything is allocated.

    filter: only the rows for which this SQL predicate over scalar columns
    is true (see `Dataset.filter`), e.g. `"label IN (1, 2) AND score > 0.5"`."""
    if isinstance(window, int):
        window = (window, 0, 1)
    fjson = None if features is None else Features.coerce(features).to_json()
    ds = Dataset(_shardset.open_cache(
        str(path), None if columns is None else list(columns), decode_images=decode_images,
        window=window, lance_chunk_rows=lance_chunk_rows, features=fjson,
        verify_on_read=bool(verify_on_read), in_memory=bool(in_memory),
        memory_fraction=memory_fraction, in_memory_fallback=bool(in_memory_fallback),
        version=version, trusted_roots=[str(r) for r in trusted_roots],
        max_image_pixels=max_image_pixels, max_frame_pixels=max_frame_pixels,
        max_window_frames=max_window_frames))
    return ds if filter is None else ds.filter(filter)


def open_parquet(path: str | os.PathLike[str], columns: Iterable[str] | None = None,
                 features: FeaturesLike | None = None, decode_images: bool = True,
                 filter: str | None = None) -> Dataset:
    """Opens Parquet data read-only as a dataset, without converting it: a
    `.parquet` file, or a directory of them (read in name order as one
    dataset; every file has the same columns). Random access reads only the
    pages holding the rows asked for (the files' page index), iteration
    whole row groups; views, filters, samplers and `shardset.torch` work as
    on a cache.

    features: the features to read the columns as; by default those that
    Hugging Face `datasets` stores in the files' metadata (class names,
    images), else inferred from the Arrow types (a column of a type no
    feature holds is a BadInputError naming it: give `features` for the
    columns to read). A file that is not Parquet is a CorruptCacheError
    naming it. filter: as `open_cache`'s."""
    fjson = None if features is None else Features.coerce(features).to_json()
    ds = Dataset(_shardset.open_parquet(str(path), None if columns is None else list(columns),
                                        features=fjson, decode_images=decode_images))
    return ds if filter is None else ds.filter(filter)


def open_hf(path: str | os.PathLike[str], split: str | None = None,
            columns: Iterable[str] | None = None, features: FeaturesLike | None = None,
            decode_images: bool = True, filter: str | None = None) -> Dataset:
    """Opens a Hugging Face `datasets` directory written by `save_to_disk`
    read-only as a dataset, without converting it: a `Dataset` directory, or
    one split of a `DatasetDict` directory (split: default its only split,
    else `train`; another name is a BadInputError listing them). Its Arrow
    files are mapped and read in place, as `datasets.load_from_disk` reads
    them, with the same values; views, filters, samplers and
    `shardset.torch` work as on a cache.

    features: by default those of its `dataset_info.json` (Value,
    ClassLabel, Image, Sequence/List, Array2D to Array5D; another kind is a
    BadInputError naming the column). The directory is read as untrusted:
    file and split names must stay inside it, and an image cell that names a
    file instead of holding its bytes is a CorruptCacheError. filter: as
    `open_cache`'s."""
    fjson = None if features is None else Features.coerce(features).to_json()
    ds = Dataset(_shardset.open_hf(str(path), split,
                                   None if columns is None else list(columns),
                                   features=fjson, decode_images=decode_images))
    return ds if filter is None else ds.filter(filter)


def edit(path: str | os.PathLike[str]) -> _shardset.Staging:
    """Stages edits over the current version of the cache at `path`
    (`arrow-shards` or `lance-rows`) and returns the staging area:

        st = shardset.edit(path)
        st.set_cell(3, "label", 1)          # checked against the features now
        st.set_row(7, {...}); st.delete(10); st.append({...})
        st.get(3)                           # reads see the staged edits
        st.plan()                           # what a commit would write
        st.commit(message="fix labels")     # a new version, atomically

    Untouched shards (or Lance fragments) are kept as they are; readers of
    the old version keep reading it; `open_cache(path, version=N)` opens a
    kept version."""
    return _shardset.edit(str(path))


def write_cache(examples: Iterable[_Example], features: FeaturesLike,
                path: str | os.PathLike[str], format: _Layout = "arrow",
                progress: ProgressLike = None, **options: Any) -> int:
    """Writes a cache from `examples` (an iterable of dicts or `(key, dict)`
    pairs) with `features` (ours, the reference's, or a JSON description),
    published atomically at `path`. The encoding runs in Rust on all cores
    (`threads` to cap it) while Python only yields the examples. Returns the
    number of rows (frames for "video-frames") written.

    progress: None (default) shows a tqdm bar of the rows written when tqdm
    is installed and standard error is a terminal, and nothing otherwise;
    False shows nothing; True a bar anywhere; a callable is told
    `(rows written, total)` as the write goes (total is `len(examples)`, or
    None when the iterable has no length).

    format: "arrow" (Arrow IPC shards), "lance" (a Lance dataset of rows) or
    "video-frames" (a Lance video cache of WebP frames, or with `segments`,
    of encoded segments). The options, by name (None is the default), are
    the library's one table, the same as the CLI's flags; an option that
    does not apply to `format` is a `BadInputError` naming it:

"""
    feats = Features.coerce(features)
    report = Reporter(progress, total_of(examples), "writing", "rows")
    try:
        return _shardset.write_cache(iter(examples), feats.to_json(), str(path), format,
                                     json.dumps(options), report if report.active else None)
    finally:
        report.close()


write_cache.__doc__ = (write_cache.__doc__ or "") + "\n".join(
    f"    {name} ({', '.join(layouts)}): {help}"
    for name, layouts, help in _shardset.write_options())


def convert(kind: Literal["parquet", "hf", "webdataset"], path: str | os.PathLike[str],
            out: str | os.PathLike[str], format: _Layout = "arrow",
            features: FeaturesLike | None = None, rebuild: bool = False,
            **options: Any) -> dict[str, int]:
    """Converts data another tool wrote into a cache per split, at
    `out/<split>`, as `shardset build <kind>` does: "parquet" (a file or a
    directory of them: one `train` split), "hf" (a Hugging Face
    `save_to_disk` directory: each split of a DatasetDict) or "webdataset"
    (a tar, `.tar.gz` or a directory of them, or with `train/`,
    `validation/`, `test/` folders of them; a column per member extension,
    and `__key__`). Returns the rows of each split.

    features: by default those the data gives (Hugging Face's, the Arrow
    types', or by extension for WebDataset). A cache already built from the
    same files is kept (rebuild=True writes it again). format and options:
    as `write_cache`'s. Encoding runs in Rust on all cores."""
    fjson = None if features is None else Features.coerce(features).to_json()
    return dict(_shardset.convert(kind, str(path), str(out), format, json.dumps(options),
                                  fjson, rebuild))


def report(path: str | os.PathLike[str], output: str | os.PathLike[str], seed: int = 0,
           sample_rows: int = 20_000, images: int = 24, windows: int = 4,
           trusted_roots: Iterable[str | os.PathLike[str]] = ()) -> dict[str, int]:
    """Writes one self-contained HTML page about the cache at `path` to
    `output`, as `shardset report` does: its summary, per-column statistics
    with charts (from `sample_rows` rows drawn with `seed`, all of them when
    the cache has fewer), a grid of `images` sampled images per image column
    with their labels, `windows` animated video windows and, for a segments
    cache, the compression quality per video. `trusted_roots`: directories
    whose source videos may be read to show a source frame beside its
    decoded one. Returns the file's bytes, the rows read and the pictures
    shown."""
    b, rows, imgs, wins = _shardset.report(str(path), str(output), seed, sample_rows, images,
                                          windows, [str(r) for r in trusted_roots])
    return {"bytes": b, "rows_read": rows, "images": imgs, "windows": wins}


def configure_object_store(region: str | None = None, endpoint: str | None = None,
                           access_key_id: str | None = None,
                           secret_access_key: str | None = None,
                           session_token: str | None = None,
                           part_bytes: int | None = None) -> None:
    """Sets this process's object-store settings for `s3://` caches, over
    its `AWS_*` environment (a setting left None comes from there): region,
    endpoint (an S3-compatible server, `http://` or `https://`), credentials,
    and the upload part size. Checked now (a bad value is a BadInputError
    naming it); the process environment is not changed."""
    given = {"region": region, "endpoint": endpoint, "access_key_id": access_key_id,
             "secret_access_key": secret_access_key, "session_token": session_token,
             "part_bytes": part_bytes}
    _shardset._install_storage_options(json.dumps({k: v for k, v in given.items()
                                                   if v is not None}))
