"""Read modes from Python: per-record checksums checked on read, in-memory
opens behind the memory guard, compression levels, versions."""

import json
import os
import pickle

import pytest

import shardset
from shardset import Features, Value

F = Features({"x": Value("int64"), "s": Value("string")})


def rows(n):
    return [{"x": i, "s": f"needle-{i:06d}"} for i in range(n)]


def flip(path, needle):
    data = bytearray(open(path, "rb").read())
    at = data.index(needle)
    data[at] ^= 0x20
    open(path, "wb").write(bytes(data))


def test_verify_on_read_names_the_changed_row_and_file(tmp_path):
    d = tmp_path / "c"
    shardset.write_cache(rows(300), F, d, batch_size=50, record_checksums=True)
    ds = shardset.open_cache(d, verify_on_read=True)
    assert [ds[i]["x"] for i in range(300)] == list(range(300))
    meta = json.load(open(d / "_metadata.json"))
    assert meta["row_checksums"] is True
    flip(d / meta["shard_filenames"][0], b"needle-000123")
    ds = shardset.open_cache(d, verify_on_read=True)
    assert ds[10]["x"] == 10  # another record batch still reads
    with pytest.raises(shardset.CorruptCacheError) as e:
        ds[123]
    msg = str(e.value)
    assert "123" in msg and meta["shard_filenames"][0] in msg and "s" in msg
    # Without the option the changed row reads, changed.
    assert shardset.open_cache(d)[123]["s"] == "Needle-000123"
    # A cache without per-record checksums cannot be opened this way.
    d2 = tmp_path / "plain"
    shardset.write_cache(rows(5), F, d2)
    with pytest.raises(shardset.BadInputError):
        shardset.open_cache(d2, verify_on_read=True)


def test_in_memory_reads_without_the_files_and_the_guard_names_both_sizes(tmp_path):
    d = tmp_path / "c"
    shardset.write_cache(rows(200), F, d, batch_size=50, compression="zstd")
    ds = shardset.open_cache(d, in_memory=True)
    meta = json.load(open(d / "_metadata.json"))
    for name in meta["shard_filenames"]:
        os.remove(d / name)
    assert [ds[i]["s"] for i in range(200)] == [r["s"] for r in rows(200)]
    d2 = tmp_path / "c2"
    shardset.write_cache(rows(200), F, d2)
    with pytest.raises(shardset.ShardsetError) as e:
        shardset.open_cache(d2, in_memory=True, memory_fraction=1e-12)
    assert "bytes" in str(e.value) and "available" in str(e.value)
    ds = shardset.open_cache(d2, in_memory=True, memory_fraction=1e-12, in_memory_fallback=True)
    assert ds[199]["x"] == 199
    # A pickled dataset opens again with the same modes.
    again = pickle.loads(pickle.dumps(ds))
    assert again[5]["x"] == 5
    with pytest.raises(shardset.BadInputError):
        shardset.open_cache(d2, in_memory=True, memory_fraction=1.5)


def test_compression_levels_are_recorded_or_refused(tmp_path):
    d = tmp_path / "l"
    shardset.write_cache(rows(100), F, d, format="lance", compression="zstd", compression_level=9)
    meta = json.load(open(d / "_metadata.json"))
    assert (meta["compression"], meta["compression_level"]) == ("zstd", 9)
    assert shardset.open_cache(d)[99]["x"] == 99
    d = tmp_path / "a"
    shardset.write_cache(rows(10), F, d, compression="zstd")
    assert json.load(open(d / "_metadata.json"))["compression_level"] == 3
    with pytest.raises(shardset.BadInputError, match="level 3"):
        shardset.write_cache(rows(10), F, tmp_path / "b", compression="zstd", compression_level=9)
    with pytest.raises(shardset.BadInputError):
        shardset.write_cache(rows(10), F, tmp_path / "b", compression_level=9)


def test_versions_open_by_id(tmp_path):
    d = tmp_path / "c"
    shardset.write_cache(rows(10), F, d)
    assert len(shardset.open_cache(d, version=1)) == 10
    with pytest.raises(shardset.ShardsetError, match="no version 2"):
        shardset.open_cache(d, version=2)


def test_dedup_stores_repeats_once_and_reads_the_same_arrays(tmp_path):
    import numpy as np
    from shardset import Array3D
    f = Features({"i": Value("int64"), "a": Array3D((16, 16, 16), "float32")})
    tensors = [np.full((16, 16, 16), k, dtype=np.float32) + np.arange(16, dtype=np.float32)
               for k in range(5)]
    rows = [{"i": i, "a": tensors[i % 5]} for i in range(100)]
    shardset.write_cache(rows, f, tmp_path / "d", dedup=4096)
    shardset.write_cache(rows, f, tmp_path / "p")
    d, p = shardset.open_cache(tmp_path / "d"), shardset.open_cache(tmp_path / "p")
    for i in (0, 5, 57, 99):
        np.testing.assert_array_equal(d[i]["a"], p[i]["a"])
    meta = json.load(open(tmp_path / "d" / "_metadata.json"))
    assert meta["cache_format_version"] == 2 and meta["requires"] == ["dedup"]
    assert meta["dedup"]["cells"] == 95
    size = lambda c: sum(json.load(open(tmp_path / c / "_metadata.json"))["shard_num_bytes"])
    assert size("d") * 10 < size("p")
