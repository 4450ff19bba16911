"""Filters from Python: `open_cache(filter=)`, `Dataset.filter` (SQL or a
function of a row) and `filter_report`, on both row layouts, checked
against pyarrow's own evaluation of the same predicate; filtered views in
DataLoader workers and through pickling; typed errors."""

import pickle

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import torch

import shardset
from shardset import ClassLabel, Features, Image, Value
from shardset.torch import MapDataset

N = 500


def rows():
    for i in range(N):
        yield {
            "x": None if i % 11 == 5 else i,
            "score": (i * 37 % 100) / 10.0,
            "name": None if i % 13 == 0 else f"n{i % 6}",
            "label": i % 3,
            "image": None,
        }


FEATURES = Features({"x": Value("int64"), "score": Value("float64"), "name": Value("string"),
                     "label": ClassLabel(names=["a", "b", "c"]), "image": Image()})

# (SQL, the same predicate in pyarrow.compute)
CASES = [
    ("x > 250", lambda t: pc.greater(t["x"], 250)),
    ("label IN (0, 2) AND score >= 5.0", lambda t: pc.and_kleene(
        pc.is_in(t["label"], pa.array([0, 2])), pc.greater_equal(t["score"], 5.0))),
    ("NOT (name = 'n1') OR x IS NULL", lambda t: pc.or_kleene(
        pc.invert(pc.equal(t["name"], "n1")), pc.is_null(t["x"]))),
    ("x BETWEEN 10 AND 20", lambda t: pc.and_kleene(pc.greater_equal(t["x"], 10),
                                                    pc.less_equal(t["x"], 20))),
    ("name LIKE 'n%' AND label = 1", lambda t: pc.and_kleene(
        pc.starts_with(t["name"], "n"), pc.equal(t["label"], 1))),
]


@pytest.fixture(params=["arrow", "lance"])
def cache(request, tmp_path):
    path = str(tmp_path / request.param)
    shardset.write_cache(rows(), FEATURES, path, format=request.param)
    return path


def expected(path, predicate):
    table = pa.table({k: [r[k] for r in rows()] for k in ("x", "score", "name", "label")},
                     schema=pa.schema([("x", pa.int64()), ("score", pa.float64()),
                                       ("name", pa.string()), ("label", pa.int64())]))
    mask = predicate(table).fill_null(False)
    return [i for i, keep in enumerate(mask.to_pylist()) if keep]


@pytest.mark.parametrize("sql,predicate", CASES, ids=[c[0] for c in CASES])
def test_a_filter_keeps_what_pyarrow_keeps(cache, sql, predicate):
    want = expected(cache, predicate)
    ds = shardset.open_cache(cache, filter=sql)
    assert [r["x"] for r in ds] == [None if i % 11 == 5 else i for i in want]
    view, report = shardset.open_cache(cache).filter_report(sql)
    assert report["rows_kept"] == len(want) and report["rows_in"] == N
    assert report["source"] == "kept", report
    assert len(view) == len(want)


def test_the_first_filter_is_pushed_down_to_lance_and_kept(tmp_path):
    path = str(tmp_path / "c")
    shardset.write_cache(rows(), FEATURES, path, format="lance")
    _, report = shardset.open_cache(path).filter_report("label = 2")
    assert report["source"] == "lance-scan" and report["columns"] == ["label"]
    assert report["kept_at"].startswith(path) and report["not_kept"] is None


def test_a_function_filters_as_in_hugging_face_datasets(cache):
    ds = shardset.open_cache(cache)
    got = ds.filter(lambda r: r["label"] == 1 and r["x"] is not None)
    assert [r["x"] for r in got] == [i for i in range(N) if i % 3 == 1 and i % 11 != 5]


def test_bad_filters_name_themselves_and_the_reason(cache):
    ds = shardset.open_cache(cache)
    for bad, says in [("", "empty"), ("x >", "x >"), ("nope = 1", "nope"),
                      ("image IS NULL", "scalar"), ("x * 2", "not true or false")]:
        with pytest.raises(shardset.BadInputError) as e:
            ds.filter(bad)
        assert says in str(e.value), (bad, str(e.value))


def test_a_filtered_view_pickles_and_feeds_dataloader_workers(cache):
    sql = "label = 0 AND x IS NOT NULL"
    ds = shardset.open_cache(cache, filter=sql)
    want = [r["x"] for r in ds]
    assert want and [r["x"] for r in pickle.loads(pickle.dumps(ds))] == want
    m = MapDataset(cache, columns=["x"], filter=sql)
    assert len(m) == len(want)
    loader = torch.utils.data.DataLoader(m, batch_size=16, num_workers=2,
                                         multiprocessing_context="fork")
    assert [int(x) for b in loader for x in b["x"]] == want
