"""Building one cache across a Ray cluster.

    import shardset.ray

    def generate(unit):                       # runs on the Ray workers
        for i in range(unit * 1000, unit * 1000 + 1000):
            yield {"x": i, "label": i % 10}

    report = shardset.ray.build(generate, range(64), features, "s3://bucket/prefix/train")
    ds = shardset.open_cache("s3://bucket/prefix/train")

Consecutive work units are grouped into Ray tasks (`units_per_task`,
default about four tasks per CPU of the cluster). A task runs
`generate(unit)` for its units in order, encodes the examples with the Rust
writer into a local arrow-shards cache stamped with the build's id, and
puts its files under the build's prefix on the object store (or in the
cache's directory on a file system all nodes share), named by its first
unit (`_builds/<build>/u00007-shard-00000.arrow`), so a task Ray retries
(its worker or node died) writes the same names and no row is stored
twice. The driver collects the parts' records as tasks finish
(calling `progress(units_done, units, rows_done)` as each task ends), then commits one
`_metadata.json` whose rows are the units' rows in unit order, with the
shard sizes and checksums the parts recorded: the same conditional commit
as any publish to object storage, so readers see the whole build or the
previous one. A build that fails leaves only uncommitted objects, which
`gc` removes.

The rows equal those of a single-process build of the same units in the
same order. Shards break at unit boundaries (each unit rotates its own by
the byte budget), so shard files equal a single build's only when each unit
fills exactly its shards.

Workers need the cache's object store: the driver's object-store settings
in effect (its `AWS_*` environment, or what `shardset.configure_object_store`
set) go with each task as typed settings the worker installs (the library
keeps one S3 client per configuration, so a worker that ran another build's
tasks before uses these); no process environment is changed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from . import _shardset, write_cache
from ._progress import Reporter
from .features import Features

if TYPE_CHECKING:
    from ray.util.scheduling_strategies import SchedulingStrategyT

    from ._shardset import _Example
    from .features import FeaturesLike

# A work unit: what `generate` takes (an int, a file name, ...).
_Unit = TypeVar("_Unit")


@dataclasses.dataclass
class BuildReport:
    """What `build` committed."""
    path: str
    build: str
    units: int
    rows: int
    shards: int
    replaced: bool


def _encode_units(generate: Callable[[Any], Iterable[_Example]], units: Sequence[Any],
                  first: int, features_json: str, path: str, build: str,
                  options: Mapping[str, Any], storage: str) -> tuple[str, int]:
    """Consecutive work units `first, first + 1, ...`, on a Ray worker: their
    examples in unit order written as one local part, put under the build
    prefix named by the first unit; returns (record JSON, rows). `storage`:
    the driver's object-store settings (JSON), installed in this worker."""
    def examples() -> Iterator[_Example]:
        for unit in units:
            yield from generate(unit)
    _shardset._install_storage_options(storage)
    with tempfile.TemporaryDirectory(prefix="shardset-ray-") as tmp:
        local = os.path.join(tmp, f"u{first:05d}")
        rows = write_cache(examples(), Features.from_json(features_json), local,
                           format="arrow", build_id=build, **options)
        record = _shardset._publish_part(local, path, build, first)
    return record, rows


def _units_per_task(n_units: int, units_per_task: int | None) -> int:
    if units_per_task is not None:
        if units_per_task < 1:
            raise ValueError("units_per_task must be at least 1")
        return units_per_task
    import ray
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))  # type: ignore[no-untyped-call]
    # About four tasks per CPU: enough to balance the load and to lose
    # little to a dead worker, few enough that Ray's cost per task stays small.
    return max(1, -(-n_units // (4 * cpus)))


def build(generate: Callable[[_Unit], Iterable[_Example]], units: Iterable[_Unit],
          features: FeaturesLike, path: str | os.PathLike[str], *, threads: int = 1,
          build_id: str | None = None, max_retries: int = 3, num_cpus: float = 1,
          units_per_task: int | None = None,
          progress: Callable[[int, int, int], object] | None = None,
          scheduling_strategy: SchedulingStrategyT = "SPREAD",
          **options: Any) -> BuildReport:
    """Builds the arrow-shards cache at `path` (`s3://bucket/prefix`, or a
    directory of a file system every node shares) from
    `generate(unit)` for each of `units` on the connected Ray cluster (see
    the module documentation). `generate` must be picklable (a function of
    an importable module, or a closure). `threads`: encode threads per task
    (1: Ray schedules `num_cpus` per task). `max_retries`: Ray's retries of
    a task whose worker died. `build_id`: the build's id (default: a new
    one). `units_per_task`: consecutive units one task encodes into one part
    (default: about four tasks per CPU of the cluster).
    `scheduling_strategy`: Ray's, for the tasks (default "SPREAD": across
    the nodes, rather than Ray's default of filling the driver's node
    first). `options`: the arrow layout's write options of
    `shardset.write_cache` (`shard_size`, `compression`, `batch_size`,
    `record_checksums`, ...; checked here, before any task starts).
    `progress`: a callable told `(units done, units, rows)` as tasks
    finish; without one, a tqdm bar of the units on a terminal (when tqdm
    is installed), nothing otherwise. Returns a `BuildReport`.

    Raises the task's exception when a unit fails for a reason other than a
    lost worker; nothing is committed then."""
    import ray

    path = str(path)
    if not path.startswith("s3://"):
        path = os.path.abspath(path)
    units = list(units)
    feats = Features.coerce(features)
    build = build_id or uuid.uuid4().hex[:16]
    options = dict(options, threads=threads)
    # Every option checked once, on the driver, by the library's table.
    _shardset._check_write_options("arrow", json.dumps(dict(options, build_id=build)))
    # The settings go with each task rather than as a Ray runtime_env: a
    # runtime_env gets worker processes of its own, started for the build,
    # where plain tasks run on the workers Ray has started already.
    task = ray.remote(_encode_units).options(max_retries=max_retries, num_cpus=num_cpus,
                                              scheduling_strategy=scheduling_strategy)
    storage = _shardset._storage_options()
    features_json = feats.to_json()
    per = _units_per_task(len(units), units_per_task)
    groups = [(k, units[k:k + per]) for k in range(0, len(units), per)]
    index = {}
    for g, (first, group) in enumerate(groups):
        ref = task.remote(generate, group, first, features_json, path, build, options, storage)
        index[ref] = g
    records: list[str | None] = [None] * len(groups)
    pending = list(index)
    rows = 0
    done_units = 0
    # Without a callable: a bar of the units built on a terminal (tqdm).
    bar = Reporter(None if progress is None else False, len(units), "building", "units")
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                record, n = ray.get(ref)
                g = index[ref]
                records[g] = record
                rows += n
                done_units += len(groups[g][1])
                if progress is not None:
                    progress(done_units, len(units), rows)
                bar(done_units)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        bar.close()
    # Every group's record is in: each task returned one, or this raised.
    built, shards, replaced = _shardset._commit_parts(path, build, cast("list[str]", records))
    return BuildReport(path=path, build=built, units=len(units), rows=rows, shards=shards,
                       replaced=replaced)


def gc(path: str | os.PathLike[str], min_age_s: float = 3600.0,
       dry_run: bool = False) -> list[str]:
    """Removes the build prefixes of the cache at `path` that its committed
    metadata does not name (failed or replaced builds) and that are older
    than `min_age_s`; returns them."""
    return _shardset._gc_object_store(str(path), float(min_age_s), bool(dry_run))
