"""Parquet from Python: `shardset.open_parquet` gives pyarrow's values,
with Hugging Face's features when the files carry them, views and filters,
pickling into DataLoader workers, and typed errors."""

import json
import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import shardset
from shardset.torch import MapDataset

N = 300


@pytest.fixture
def files(tmp_path):
    d = tmp_path / "pq"
    d.mkdir()
    hf = {"info": {"features": {"id": {"dtype": "int64", "_type": "Value"},
                                "text": {"dtype": "string", "_type": "Value"},
                                "label": {"names": ["neg", "pos"], "_type": "ClassLabel"}}}}
    for part, (lo, hi) in enumerate([(0, 200), (200, N)]):
        t = pa.table({"id": list(range(lo, hi)),
                      "text": [None if i % 17 == 0 else f"t{i}" for i in range(lo, hi)],
                      "label": [i % 2 for i in range(lo, hi)]})
        pq.write_table(t.replace_schema_metadata({"huggingface": json.dumps(hf)}),
                       d / f"part-{part}.parquet", row_group_size=64)
    return d


def test_values_are_pyarrows(files):
    ds = shardset.open_parquet(files)
    want = pq.read_table(files).to_pylist()
    assert len(ds) == N and ds.layout == "parquet"
    assert [ds[i] for i in range(N)] == want
    assert ds.features["label"].names == ["neg", "pos"]
    idx = [299, 0, 64, 63, 200, 199, 5, 5]
    assert ds.__getitems__(idx) == [want[i] for i in idx]
    batch = ds.take_batch([3, 250])
    assert batch["id"].tolist() == [3, 250]


def test_filters_and_columns(files):
    ds = shardset.open_parquet(files, columns=["id"], filter="label = 1 AND id >= 250")
    assert [r["id"] for r in ds] == list(range(251, N, 2))
    assert list(ds[0]) == ["id"]


def test_pickles_into_dataloader_workers(files):
    ds = shardset.open_parquet(files, columns=["id"]).select(list(range(0, N, 3)))
    again = pickle.loads(pickle.dumps(ds))
    assert [r["id"] for r in again] == list(range(0, N, 3))
    for context in ("fork", "spawn"):
        loader = torch.utils.data.DataLoader(MapDataset(again), batch_size=20, num_workers=2,
                                             multiprocessing_context=context)
        assert [int(x) for b in loader for x in b["id"]] == list(range(0, N, 3)), context


def test_bad_input_names_the_file(tmp_path):
    bad = tmp_path / "x.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(shardset.CorruptCacheError, match="x.parquet"):
        shardset.open_parquet(bad)
    t = tmp_path / "t.parquet"
    pq.write_table(pa.table({"d": pa.array([1], pa.date32())}), t)
    with pytest.raises(shardset.BadInputError, match="'d'"):
        shardset.open_parquet(t)
    ds = shardset.open_parquet(t, features=shardset.Features({"d": shardset.Value("int32")}))
    assert ds[0] == {"d": 1}


def test_a_view_exports_to_parquet_and_reads_back(files, tmp_path):
    ds = shardset.open_parquet(files).select([5, 250, 3])
    out = tmp_path / "v.parquet"
    assert ds.to_parquet(out) == 3
    assert pq.read_table(out).column("id").to_pylist() == [5, 250, 3]
    back = shardset.open_parquet(out)
    assert [back[i] for i in range(3)] == [ds[i] for i in range(3)]
    assert back.features["label"].names == ["neg", "pos"]
