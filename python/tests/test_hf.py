"""Hugging Face `save_to_disk` directories from Python: `shardset.open_hf`
gives `datasets.load_from_disk`'s values for every feature kind both have,
on every split, through `get`, batched get, iteration and views; pickles
into DataLoader workers; a hostile directory is a typed error. (`shardset
build hf` is tested with the CLI, in tests/it/hf_dirs.rs.)"""

import json
import os
import pickle

import datasets
import numpy as np
import pyarrow as pa
import pytest
import torch
from PIL import Image

import shardset
from shardset.torch import MapDataset

N = 60


def _features():
    return datasets.Features({
        "i": datasets.Value("int64"), "s": datasets.Value("string"),
        "f": datasets.Value("float32"), "d": datasets.Value("float64"),
        "b": datasets.Value("bool"), "u8": datasets.Value("uint8"),
        "i16": datasets.Value("int16"), "by": datasets.Value("binary"),
        "label": datasets.ClassLabel(names=["cat", "dog", "bird"]),
        "seq": datasets.Sequence(datasets.Value("int32")),
        "fixed": datasets.Sequence(datasets.Value("float64"), length=2),
        "words": datasets.List(datasets.Value("string")),
        "nested": datasets.List(datasets.List(datasets.Value("int16"))),
        "img": datasets.Image(),
        "a2": datasets.Array2D(shape=(2, 3), dtype="float32"),
        "a3": datasets.Array3D(shape=(2, 1, 2), dtype="int64"),
    })


def _rows(n, seed):
    rng = np.random.default_rng(seed)
    return {
        "i": list(range(n)),
        "s": [None if i % 5 == 0 else f"s{i}" for i in range(n)],
        "f": [None if i % 7 == 0 else i / 3 for i in range(n)],
        "d": [i * 1e-3 for i in range(n)],
        "b": [i % 2 == 0 for i in range(n)],
        "u8": [i % 256 for i in range(n)],
        "i16": [-i for i in range(n)],
        "by": [bytes([i % 256, 1]) for i in range(n)],
        "label": [i % 3 for i in range(n)],
        "seq": [list(range(i % 4)) for i in range(n)],
        "fixed": [[i, i + 0.5] for i in range(n)],
        "words": [None if i % 6 == 0 else ["w"] * (i % 3) for i in range(n)],
        "nested": [[[i], [1, 2]] for i in range(n)],
        "img": [Image.fromarray(rng.integers(0, 255, (3 + i % 3, 4, 3), dtype=np.uint8))
                for i in range(n)],
        "a2": [rng.random((2, 3)).astype("float32") for _ in range(n)],
        "a3": [rng.integers(-9, 9, (2, 1, 2)) for _ in range(n)],
    }


@pytest.fixture
def hf_dir(tmp_path):
    """A DatasetDict of two splits, each in several data files."""
    f = _features()
    d = datasets.DatasetDict({
        "train": datasets.Dataset.from_dict(_rows(N, 0), features=f),
        "test": datasets.Dataset.from_dict(_rows(7, 1), features=f),
    })
    out = tmp_path / "hf"
    d.save_to_disk(str(out), max_shard_size="4KB")
    assert len(list((out / "train").glob("data-*.arrow"))) > 1
    return out


def _plain(v):
    """A cell as plain Python, images as their pixels."""
    if isinstance(v, Image.Image):
        return np.asarray(v).tolist()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _row(r):
    return {k: _plain(v) for k, v in r.items()}


def test_values_are_those_of_load_from_disk(hf_dir):
    theirs = datasets.load_from_disk(str(hf_dir))
    for split in ("train", "test"):
        want = [_row(r) for r in theirs[split]]
        ds = shardset.open_hf(hf_dir, split=split)
        assert ds.layout == "hf-datasets" and len(ds) == len(want)
        assert [_row(ds[i]) for i in range(len(ds))] == want, split
        assert [_row(r) for r in ds] == want, split
        idx = [len(want) - 1, 0, 3, 3, len(want) // 2]
        assert [_row(r) for r in ds.__getitems__(idx)] == [want[i] for i in idx]
    ds = shardset.open_hf(hf_dir)  # the default split of a dict: train
    assert len(ds) == N
    assert ds.features["label"].names == ["cat", "dog", "bird"]
    assert type(ds.features["a2"]).__name__ == "Array2D"
    # A Dataset directory (one split) opens without a split.
    one = shardset.open_hf(hf_dir / "test")
    assert [_row(r) for r in one] == [_row(r) for r in theirs["test"]]


def test_views_filters_and_dataloader_workers(hf_dir):
    ds = shardset.open_hf(hf_dir, columns=["i", "label"], filter="label = 2 AND i >= 10")
    assert [r["i"] for r in ds] == [i for i in range(10, N) if i % 3 == 2]
    again = pickle.loads(pickle.dumps(ds))
    loader = torch.utils.data.DataLoader(MapDataset(again), batch_size=4, num_workers=2,
                                         multiprocessing_context="spawn")
    assert [int(x) for b in loader for x in b["i"]] == [r["i"] for r in ds]


def test_hostile_directories_are_typed_errors(hf_dir, tmp_path):
    with pytest.raises(shardset.BadInputError, match="'valid' is not one of them"):
        shardset.open_hf(hf_dir, split="valid")
    with pytest.raises(shardset.BadInputError, match="not a directory written by"):
        shardset.open_hf(tmp_path)
    state = hf_dir / "train" / "state.json"
    s = json.loads(state.read_text())
    outside = tmp_path / "outside.arrow"
    outside.write_bytes((hf_dir / "train" / s["_data_files"][0]["filename"]).read_bytes())
    for name in ("../../outside.arrow", str(outside)):
        s["_data_files"][0]["filename"] = name
        state.write_text(json.dumps(s))
        with pytest.raises(shardset.CorruptCacheError, match="not a plain name"):
            shardset.open_hf(hf_dir)
    os.symlink(outside, hf_dir / "train" / "link.arrow")
    s["_data_files"][0]["filename"] = "link.arrow"
    state.write_text(json.dumps(s))
    with pytest.raises(shardset.CorruptCacheError, match="outside"):
        shardset.open_hf(hf_dir)
    # save_to_disk embeds images given by path: they read without the file.
    img = tmp_path / "x.png"
    Image.new("RGB", (2, 3)).save(img)
    by_path = datasets.Dataset.from_dict({"img": [str(img)]}).cast_column("img", datasets.Image())
    by_path.save_to_disk(str(tmp_path / "paths"))
    img.unlink()
    assert np.asarray(shardset.open_hf(tmp_path / "paths")[0]["img"]).shape == (3, 2, 3)
    # A crafted cell that names a file instead of holding its bytes.
    f = next((tmp_path / "paths").glob("data-*.arrow"))
    t = pa.table({"img": pa.array([{"bytes": None, "path": "/etc/hostname"}],
                                   pa.struct([("bytes", pa.binary()), ("path", pa.string())]))})
    with pa.ipc.new_stream(f, t.schema) as w:
        w.write_table(t)
    ds = shardset.open_hf(tmp_path / "paths")
    with pytest.raises(shardset.CorruptCacheError, match="names a file"):
        ds[0]
    # A truncated data file.
    t = tmp_path / "trunc"
    datasets.Dataset.from_dict({"x": list(range(100))}).save_to_disk(str(t))
    f = next(t.glob("data-*.arrow"))
    f.write_bytes(f.read_bytes()[:-40])
    with pytest.raises(shardset.CorruptCacheError, match=f.name):
        shardset.open_hf(t)


def test_convert_writes_every_split_with_load_from_disks_values(hf_dir, tmp_path):
    theirs = datasets.load_from_disk(str(hf_dir))
    for layout in ("arrow", "lance"):
        out = tmp_path / layout
        assert shardset.convert("hf", hf_dir, out, format=layout) == {"train": N, "test": 7}
        for split in ("train", "test"):
            ds = shardset.open_cache(out / split)
            assert [_row(r) for r in ds] == [_row(r) for r in theirs[split]], (layout, split)
    with pytest.raises(shardset.BadInputError, match="not an input kind"):
        shardset.convert("csv", hf_dir, tmp_path / "x")


def test_convert_reads_webdataset_tars_as_webdataset_yields_them(tmp_path):
    import webdataset as wds
    src = tmp_path / "wds"
    src.mkdir()
    with wds.TarWriter(str(src / "a.tar")) as w:
        for k in range(5):
            img = Image.new("RGB", (3, 2), (k, 0, 0))
            w.write({"__key__": f"k{k}", "png": img, "cls": k % 2, "txt": f"t{k}"})
    assert shardset.convert("webdataset", src, tmp_path / "out") == {"train": 5}
    ds = shardset.open_cache(tmp_path / "out" / "train")
    theirs = list(wds.WebDataset(str(src / "a.tar"), shardshuffle=False).decode("rgb8"))
    assert [r["__key__"] for r in ds] == [s["__key__"] for s in theirs]
    for r, s in zip(ds, theirs):
        assert r["cls"] == s["cls"] and r["txt"] == s["txt"]
        assert np.array_equal(np.asarray(r["png"]), s["png"])
