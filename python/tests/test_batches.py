"""Batches made in the library as columns (`Dataset.take_batch`, the torch
datasets' collated batches): the same values as the rows, in the columns'
own dtypes, stacked where they stack; the "partial" remainder reads every
row exactly once."""

import json
import os

import numpy as np
import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

import shardset
from shardset.torch import IterableDataset, MapDataset

from conftest import GOLDEN
from test_read_write import EVERY, every_kind_rows


@pytest.mark.parametrize("fmt", ["arrow", "lance"])
def test_a_batch_of_columns_holds_the_rows_values(tmp_path, fmt):
    rows = every_kind_rows(23)
    shardset.write_cache(rows, EVERY, tmp_path / "c", format=fmt)
    ds = shardset.open_cache(tmp_path / "c")
    idx = [22, 0, 5, 5, -1]
    b = ds.take_batch(idx)
    want = ds[idx]
    assert list(b) == list(EVERY.keys())
    # Numbers and class ids: one array in the column's own dtype.
    for col, dtype in [("i8", np.int8), ("u64", np.uint64), ("f64", np.float64),
                       ("b", np.bool_), ("label", np.int64)]:
        assert isinstance(b[col], np.ndarray) and b[col].dtype == dtype, col
        assert b[col].tolist() == [r[col] for r in want], col
    # Same-shape arrays stack [B, ...]; same-shape images too.
    for col in ("a3", "a4", "gray"):
        assert b[col].shape == (5,) + want[0][col].shape, col
        for k, r in enumerate(want):
            np.testing.assert_array_equal(b[col][k], r[col])
    # What does not stack stays a list of the rows' values: images of
    # several sizes, strings with nulls, bytes, ragged sequences, float16.
    for col in ("img", "s", "bin", "seq", "f16"):
        assert isinstance(b[col], list), col
        for k, r in enumerate(want):
            if isinstance(r[col], np.ndarray):
                np.testing.assert_array_equal(b[col][k], r[col])
            else:
                assert b[col][k] == r[col], col
    # Sequences of numbers, all of one length: [B, L] in the inner dtype.
    shardset.write_cache(({"s": [i, i + 1, i + 2], "c": [i % 2]} for i in range(10)),
                         {"s": shardset.Sequence(shardset.Value("int16")),
                          "c": shardset.Sequence(shardset.ClassLabel(names=["a", "b"]))},
                         tmp_path / "seq", format=fmt)
    b = shardset.open_cache(tmp_path / "seq").take_batch([4, 9])
    assert b["s"].dtype == np.int16 and b["s"].tolist() == [[4, 5, 6], [9, 10, 11]]
    assert b["c"].dtype == np.int64 and b["c"].tolist() == [[0], [1]]
    with pytest.raises(IndexError):
        ds.take_batch([23])


def test_a_frames_cache_batch_is_its_windows_stacked(golden):
    with open(os.path.join(GOLDEN, "expected_video_windows.json")) as f:
        want = json.load(f)
    p = want["params"]
    ds = shardset.open_cache(golden("lance_video_frames"),
                             window=(p["window_length"], p["frame_skip"], p["hop_size"]))
    same = [i for i, w in enumerate(want["windows"]) if w["video_idx"] == 0][:5]
    b = ds.take_batch(same)
    np.testing.assert_array_equal(b["video"], ds.windows(same))
    for k, i in enumerate(same):
        s = ds[i]
        assert b["video_idx"][k] == s["video_idx"] and b["start_frame"][k] == s["start_frame"]
        assert b["frame_indices"][k].tolist() == s["frame_indices"]
        assert b["sample_idx"][k] == i


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("batches") / "c"
    shardset.write_cache(({"id": i, "x": i / 4} for i in range(1000)),
                         {"id": shardset.Value("int64"), "x": shardset.Value("float32")}, d,
                         shard_size=4096, batch_size=50)
    return str(d)


@pytest.mark.parametrize("order", ["sequential", "random", "shard-shuffle", "block-shuffle:48"])
def test_the_partial_remainder_reads_every_row_once_over_ranks_and_workers(cache, order):
    seen = []
    lengths = []
    for rank in range(3):
        it = IterableDataset(cache, batch_size=64, order=order, seed=1, remainder="partial",
                             rank=rank, world_size=3)
        batches = list(DataLoader(it, batch_size=None, num_workers=2))
        assert len(batches) == len(it)
        lengths += [len(b["id"]) for b in batches]
        for b in batches:
            assert b["x"].dtype == torch.float32
            assert torch.equal(b["x"], b["id"].to(torch.float32) / 4)
        seen += [i for b in batches for i in b["id"].tolist()]
    assert sorted(seen) == list(range(1000))
    # 16 batches: 15 full, the last of 1000 - 15 * 64 = 40 rows.
    assert sorted(lengths) == [40] + [64] * 15


def test_a_map_dataset_takes_a_batch_samplers_batches_whole(cache):
    m = MapDataset(cache)
    s = BatchSampler(RandomSampler(m, generator=torch.Generator().manual_seed(0)), 128, False)
    batches = list(DataLoader(m, sampler=s, batch_size=None, num_workers=2))
    assert [len(b["id"]) for b in batches] == [128] * 7 + [104]
    ids = torch.cat([b["id"] for b in batches])
    assert sorted(ids.tolist()) == list(range(1000)) and ids.tolist() != list(range(1000))
    assert all(b["x"].dtype == torch.float32 for b in batches)
