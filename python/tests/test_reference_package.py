"""Caches written from Python, read by the reference package itself (not an
emulation): the same values. Marked `reference`: the reference is not on
PyPI, so they import it from the checkout STABLE_DATASETS_REPO names, by
default the pinned snapshot in ../shared (conftest's `ref`), and fail when
it is missing; `pytest -m reference python/tests` runs them alone."""

import os

import numpy as np
import pytest

import shardset
from shardset import ClassLabel, Features, Image, Sequence, Value

pytestmark = pytest.mark.reference


@pytest.mark.parametrize("fmt", ["arrow", "lance"])
def test_the_reference_reads_a_cache_written_from_python(tmp_path, ref, fmt):
    cache, dataset, s = ref
    rng = np.random.default_rng(0)
    rows = [{"x": i - 5, "f": i / 4, "name": f"r{i}", "label": i % 3,
             "img": rng.integers(0, 256, (6, 7, 3), dtype=np.uint8), "seq": list(range(i % 4))}
            for i in range(40)]
    ours = Features({"x": Value("int32"), "f": Value("float32"), "name": Value("string"),
                     "label": ClassLabel(names=["a", "b", "c"]), "img": Image(),
                     "seq": Sequence(Value("int64"))})
    theirs = s.Features({"x": s.Value("int32"), "f": s.Value("float32"),
                         "name": s.Value("string"),
                         "label": s.ClassLabel(names=["a", "b", "c"]), "img": s.Image(),
                         "seq": s.Sequence(s.Value("int64"))})
    d = tmp_path / "c"
    # Several shards (arrow) or data files (lance): each layout's own option.
    several = {"arrow": {"shard_size": 4096}, "lance": {"max_rows_per_file": 16}}[fmt]
    shardset.write_cache(rows, ours, d, format=fmt, **several)
    res = cache.open_cache(d, theirs)
    ds = dataset.StableDataset(theirs, s.DatasetInfo(features=theirs),
                               backend=res.backend).with_format("numpy")
    assert len(ds) == 40
    for i, want in enumerate(rows):
        got = ds[i]
        assert got["x"] == want["x"] and got["f"] == want["f"] and got["name"] == want["name"]
        assert got["label"] == want["label"] and list(got["seq"]) == want["seq"]
        np.testing.assert_array_equal(got["img"], want["img"])
    # And shardset reads it back with the reference's own Features classes.
    back = shardset.open_cache(d, features=theirs)
    assert back[7]["name"] == "r7" and back.take_batch([1, 2])["x"].tolist() == [-4, -3]


@pytest.mark.parametrize("fmt", ["arrow", "lance"])
def test_the_reference_reads_fixed_size_arrays(tmp_path, ref, fmt):
    """Arrays stored as fixed_size_binary: the reference opens the cache
    with its own Array3D (same repr, same fingerprint) and reads the same
    arrays as from its large_binary storage."""
    cache, dataset, s = ref
    from shardset import Array3D
    rng = np.random.default_rng(1)
    rows = [{"i": i, "a": rng.standard_normal((2, 3, 4)).astype("float32")} for i in range(25)]
    ours = Features({"i": Value("int64"), "a": Array3D((2, 3, 4), "float32", fixed_size=True)})
    theirs = s.Features({"i": s.Value("int64"), "a": s.Array3D((2, 3, 4), "float32")})
    d = tmp_path / "c"
    shardset.write_cache(rows, ours, d, format=fmt, batch_size=8)
    res = cache.open_cache(d, theirs)
    for form in ("numpy", "torch"):
        ds = dataset.StableDataset(theirs, s.DatasetInfo(features=theirs),
                                   backend=res.backend).with_format(form)
        assert len(ds) == 25
        for i, want in enumerate(rows):
            np.testing.assert_array_equal(np.asarray(ds[i]["a"]), want["a"])
        got = ds.__getitems__([24, 0, 7])
        for g, k in zip(got, (24, 0, 7)):
            np.testing.assert_array_equal(np.asarray(g["a"]), rows[k]["a"])


@pytest.mark.parametrize("fmt", ["arrow", "lance"])
def test_the_reference_reads_an_edited_cache(tmp_path, ref, fmt):
    """After a commit the directory is a plain cache the reference opens:
    it reads the new version's rows."""
    cache, dataset, s = ref
    rows = [{"x": i, "name": f"r{i}"} for i in range(40)]
    ours = Features({"x": Value("int64"), "name": Value("string")})
    theirs = s.Features({"x": s.Value("int64"), "name": s.Value("string")})
    d = tmp_path / "c"
    several = {"arrow": {"shard_size": 512}, "lance": {"max_rows_per_file": 8}}[fmt]
    shardset.write_cache(rows, ours, d, format=fmt, batch_size=4, **several)
    st = shardset.edit(d)
    st.set_cell(5, "name", "five")
    st.delete(20)
    st.append({"x": 99, "name": "new"})
    st.commit()
    res = cache.open_cache(d, theirs)
    ds = dataset.StableDataset(theirs, s.DatasetInfo(features=theirs), backend=res.backend)
    want = [r["x"] for r in rows]
    del want[20]
    want.append(99)
    assert len(ds) == 40
    assert [ds[i]["x"] for i in range(40)] == want
    assert ds[5]["name"] == "five" and ds[39]["name"] == "new"


def test_the_reference_names_the_segments_layout_it_does_not_read(tmp_path, ref):
    # Our compact video layout is ours alone: the reference's open_cache
    # refuses it by name rather than misreading it; its frames layout next
    # to it still opens in the reference.
    cache, _, s = ref
    from conftest import GOLDEN
    clip = os.path.join(GOLDEN, "sources", "clip_a.mp4")
    seg = Features({"video": shardset.Video(storage="segments")})
    shardset.write_cache([("a", {"video": clip})], seg, tmp_path / "s", format="video-frames")
    with pytest.raises(ValueError, match="lance-video-segments"):
        cache.open_cache(tmp_path / "s", s.Features({"video": s.Video(storage="frames")}))
    frames = Features({"video": shardset.Video(storage="frames")})
    shardset.write_cache([("a", {"video": clip})], frames, tmp_path / "f", format="video-frames")
    res = cache.open_cache(tmp_path / "f", s.Features({"video": s.Video(storage="frames")}))
    assert res.layout == "lance-video-frames"


def test_the_reference_reads_a_cache_published_under_build_prefixes(tmp_path, ref):
    """A cache committed from parts (as a Ray build, or a copy of one on
    object storage) names its shards `_builds/<id>/u00000-shard-*.arrow`:
    the reference joins them to the directory and reads the same rows."""
    cache, dataset, s = ref
    from shardset import _shardset
    ours = Features({"x": Value("int64"), "name": Value("string")})
    theirs = s.Features({"x": s.Value("int64"), "name": s.Value("string")})
    build = "0123456789abcdef"
    records = []
    for k in range(3):
        part = tmp_path / f"part{k}"
        shardset.write_cache(({"x": i, "name": f"r{i}"} for i in range(k * 30, k * 30 + 30)),
                             ours, part, build_id=build, batch_size=10, shard_size=600)
        records.append(_shardset._publish_part(str(part), str(tmp_path / "c"), build, k))
    _shardset._commit_parts(str(tmp_path / "c"), build, records)
    res = cache.open_cache(tmp_path / "c", theirs)
    ds = dataset.StableDataset(theirs, s.DatasetInfo(features=theirs), backend=res.backend)
    assert len(ds) == 90
    assert [ds[i]["x"] for i in range(90)] == list(range(90))
    assert ds[45]["name"] == "r45"
