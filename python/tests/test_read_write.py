"""The Python package: round trips of every feature kind, the reference's
caches read with identical values, views, pickling, Arrow export, errors."""

import hashlib
import json
import os
import pickle

import numpy as np
import pyarrow as pa
import pytest

import shardset
from shardset import (Array3D, Array4D, ClassLabel, Features, Image, Sequence, Value, Video)

from conftest import GOLDEN

F = Features({
    "x": Value("int32"), "f": Value("float32"), "name": Value("string"), "flag": Value("bool"),
    "label": ClassLabel(names=["cat", "dog", "bird"]), "img": Image(),
    "arr": Array3D((2, 3, 4), "float32"), "seq": Sequence(Value("int64")),
})


def every_kind_rows(n):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        rows.append((f"k{i}", {
            "i8": -i % 128, "u64": 2**63 + i, "f16": i * 0.25, "f64": i / 3, "b": i % 2 == 0,
            "s": None if i % 5 == 0 else f"row {i} é", "bin": bytes([i % 256]) * (i % 7),
            "label": ["a", "b", "c"][i % 3] if i % 2 else i % 3,
            "img": rng.integers(0, 256, (4 + i % 3, 5, 3), dtype=np.uint8),
            "gray": rng.integers(0, 256, (3, 2), dtype=np.uint8),
            "a3": np.arange(24, dtype=np.int16).reshape(2, 3, 4) - i,
            "a4": np.full((1, 2, 1, 2), i, dtype=np.float64),
            "seq": [[float(j)] * j for j in range(i % 4)],
        }))
    return rows


EVERY = Features({
    "i8": Value("int8"), "u64": Value("uint64"), "f16": Value("float16"), "f64": Value("float64"),
    "b": Value("bool"), "s": Value("string"), "bin": Value("binary"),
    "label": ClassLabel(names=["a", "b", "c"]), "img": Image(), "gray": Image(),
    "a3": Array3D((2, 3, 4), "int16"), "a4": Array4D((1, 2, 1, 2), "float64"),
    "seq": Sequence(Sequence(Value("float32"))),
})


def check_every_kind(ds, rows):
    assert len(ds) == len(rows)
    for i, (_, want) in enumerate(rows):
        got = ds[i]
        assert got["i8"] == want["i8"] and got["u64"] == want["u64"]
        assert got["f16"] == want["f16"] and got["f64"] == want["f64"]
        assert got["b"] is want["b"] and got["s"] == want["s"] and got["bin"] == want["bin"]
        assert got["label"] == i % 3
        for col in ("img", "gray", "a3", "a4"):
            assert got[col].dtype == want[col].dtype, col
            np.testing.assert_array_equal(got[col], want[col])
        assert got["seq"] == want["seq"]


@pytest.mark.parametrize("fmt", ["arrow", "lance"])
def test_every_feature_kind_round_trips(tmp_path, fmt):
    rows = every_kind_rows(23)
    n = shardset.write_cache(rows, EVERY, tmp_path / "c", format=fmt)
    assert n == 23
    ds = shardset.open_cache(tmp_path / "c")
    assert ds.layout == ("arrow-shards" if fmt == "arrow" else "lance-rows")
    check_every_kind(ds, rows)
    # The cache describes its own features.
    assert ds.features.describe() == EVERY.describe()
    # Batched fetch and negative indices agree with single gets.
    got = ds.__getitems__([22, -1, 0, 0])
    assert [r["i8"] for r in got] == [rows[22][1]["i8"], rows[22][1]["i8"], 0, 0]


def test_rotated_zstd_shards_round_trip_and_iterate_in_order(tmp_path):
    rows = [{"x": i, "label": i % 3, "name": f"n{i}" * 20} for i in range(3000)]
    feats = Features({"x": Value("int64"), "label": ClassLabel(num_classes=3),
                      "name": Value("string")})
    shardset.write_cache(rows, feats, tmp_path / "c", shard_size=16_000, compression="zstd",
                         threads=2)
    ds = shardset.open_cache(tmp_path / "c")
    assert len(ds.shard_row_counts) > 1
    assert [r["x"] for r in ds] == list(range(3000))
    xs = [x for b in ds.iter_batches(700) for x in b.column("x").to_pylist()]
    assert xs == list(range(3000))


def expected_rows():
    with open(os.path.join(GOLDEN, "expected_rows.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("name", ["arrow_multi_shard", "arrow_single_zstd", "lance_rows"])
def test_reference_caches_read_identically(golden, name):
    ds = shardset.open_cache(golden(name), features=F)
    want = expected_rows()
    assert len(ds) == len(want)
    for i, w in enumerate(want):
        r = ds[i]
        for k in ("x", "f", "name", "flag", "label", "seq"):
            assert r[k] == w[k], (name, i, k)
        assert list(r["img"].shape) == w["img_shape"]
        assert hashlib.sha256(r["img"].tobytes()).hexdigest() == w["img_rgb_pixels_sha256"]
        assert r["arr"].shape == tuple(w["arr_shape"])
        assert r["arr"].ravel().tolist() == w["arr"]


def test_reference_frames_cache_windows_read_identically(golden):
    with open(os.path.join(GOLDEN, "expected_video_windows.json")) as f:
        want = json.load(f)
    p = want["params"]
    ds = shardset.open_cache(golden("lance_video_frames"),
                             window=(p["window_length"], p["frame_skip"], p["hop_size"]))
    assert len(ds) == want["num_windows"]
    for i, w in enumerate(want["windows"]):
        s = ds[i]
        assert s["video"].shape == tuple(w["shape"]) and s["video"].dtype == np.uint8
        assert hashlib.sha256(s["video"].tobytes()).hexdigest() == w["sha256"]
        for k in ("video_idx", "filename", "start_frame", "frame_indices", "label", "caption"):
            assert s[k] == w[k], (i, k)
        assert s["sample_idx"] == i
    # Stacked windows of one video's size, without a copy into Python.
    same = [i for i, w in enumerate(want["windows"]) if w["video_idx"] == 0]
    b = ds.windows(same)
    assert b.shape == (len(same), 4, 48, 64, 3)
    for k, i in enumerate(same):
        np.testing.assert_array_equal(b[k], ds[i]["video"])


def test_a_cache_written_from_python_reads_in_pyarrow_as_the_reference_reads_it(tmp_path):
    rows = [{"x": i, "f": i * 0.5, "name": None if i % 7 == 0 else f"row-{i}",
             "flag": i % 3 == 0, "label": i % 3,
             "img": np.zeros((6, 5, 3), np.uint8) + i,
             "arr": np.arange(24, dtype=np.float32).reshape(2, 3, 4) + i,
             "seq": list(range(i % 5))} for i in range(40)]
    shardset.write_cache(rows, F, tmp_path / "c")
    meta = json.load(open(tmp_path / "c" / "_metadata.json"))
    assert (meta["format"], meta["layout"]) == ("arrow", "arrow-shards")
    # The reference's fingerprint of F (golden fingerprints.json).
    fps = json.load(open(os.path.join(GOLDEN, "fingerprints.json")))
    assert meta["schema_fingerprint"] in json.dumps(fps)
    t = pa.concat_tables(pa.ipc.open_file(pa.memory_map(str(tmp_path / "c" / s))).read_all()
                         for s in meta["shard_filenames"])
    assert t.column("x").to_pylist() == list(range(40))
    assert t.column("name").to_pylist() == [r["name"] for r in rows]
    assert t.schema.field("img").type == pa.large_binary()


def test_views_compose_and_pickle_small(tmp_path):
    shardset.write_cache(({"x": i} for i in range(1000)), {"x": Value("int64")}, tmp_path / "c")
    ds = shardset.open_cache(tmp_path / "c")
    assert len(pickle.dumps(ds)) < 512
    v = ds[100:200][::-2]
    assert [r["x"] for r in v][:3] == [199, 197, 195] and len(v) == 50
    sh = ds.shuffle(7)
    order = [r["x"] for r in sh]
    assert sorted(order) == list(range(1000)) and order != list(range(1000))
    back = pickle.loads(pickle.dumps(sh))
    assert [r["x"] for r in back] == order
    split = ds.train_test_split(0.25, seed=3)
    tr, te = [r["x"] for r in split["train"]], [r["x"] for r in split["test"]]
    assert len(te) == 250 and sorted(tr + te) == list(range(1000))
    assert [r["x"] for r in ds.select([5, 3, 5])] == [5, 3, 5]
    sel = ds.select_columns(["x"])
    assert sel.column_names == ["x"] and sel[-1] == {"x": 999}


def test_iter_batches_hand_over_the_mapped_columns_without_a_copy(tmp_path):
    payload = np.random.default_rng(1).integers(0, 256, 4096 * 64, dtype=np.uint8)
    rows = ({"d": payload[i * 4096:(i + 1) * 4096].tobytes()} for i in range(64))
    shardset.write_cache(rows, {"d": Value("binary")}, tmp_path / "c")
    ds = shardset.open_cache(tmp_path / "c")
    batches = list(ds.iter_batches())
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    got = b"".join(v for b in batches for v in b.column("d").to_pylist())
    assert got == payload.tobytes()
    # The values buffer is the shard's own memory: mapped from the file, not
    # pyarrow's allocation (which would show in its allocated bytes).
    before = pa.total_allocated_bytes()
    again = list(ds.iter_batches())
    assert sum(b.nbytes for b in again) >= payload.size
    assert pa.total_allocated_bytes() - before < payload.size // 4


def test_arrays_own_the_library_buffer_and_are_writable(tmp_path):
    shardset.write_cache([{"a": np.ones((2, 3, 4), np.float32)}],
                         {"a": Array3D((2, 3, 4), "float32")}, tmp_path / "c")
    a = shardset.open_cache(tmp_path / "c")[0]["a"]
    assert a.flags.writeable and a.base is not None and not a.flags.owndata
    a += 1
    assert (a == 2).all()
    del a  # the buffer goes with the array's base


def test_bad_input_raises_typed_exceptions_and_publishes_nothing(tmp_path):
    with pytest.raises(shardset.CacheNotFoundError, match="does not exist"):
        shardset.open_cache(tmp_path / "nothing")
    c = tmp_path / "c"
    shardset.write_cache([{"x": 1}], {"x": Value("int32")}, c)
    with pytest.raises(shardset.SchemaMismatchError, match="fingerprint"):
        shardset.open_cache(c, features={"x": Value("int64")})
    with pytest.raises(shardset.BadInputError, match="column 'x'"):
        shardset.write_cache([{"x": 1}, {"x": object()}], {"x": Value("int32")}, tmp_path / "d")
    assert not (tmp_path / "d").exists()
    with pytest.raises(shardset.BadInputError, match="compression"):
        shardset.write_cache([{"x": 1}], {"x": Value("int32")}, tmp_path / "e", compression="gz")
    with pytest.raises(shardset.BadInputError, match="failed after 2 examples"):
        def gen():
            yield {"x": 1}
            yield {"x": 2}
            raise RuntimeError("source went away")
        shardset.write_cache(gen(), {"x": Value("int32")}, tmp_path / "f")
    assert not (tmp_path / "f").exists()
    with pytest.raises(ValueError):
        Value("int33")
    with pytest.raises(IndexError, match="out of range"):
        shardset.open_cache(c)[1]
    (c / "_metadata.json").write_text("{not json")
    with pytest.raises(shardset.CorruptCacheError, match="_metadata.json"):
        shardset.open_cache(c)
    assert issubclass(shardset.CorruptCacheError, shardset.ShardsetError)


def test_frames_caches_are_written_from_python(tmp_path):
    src = os.path.join(GOLDEN, "sources")
    vids = [("a", {"video": os.path.join(src, "clip_a.mp4"), "label": 0}),
            ("b", {"video": os.path.join(src, "clip_b.mp4"), "label": 1})]
    feats = Features({"video": Video(storage="frames"), "label": Value("int64")})
    frames = shardset.write_cache(vids, feats, tmp_path / "v", format="video-frames",
                                  threads=2)
    assert frames == 24 + 15
    ds = shardset.open_cache(tmp_path / "v", window=4)
    assert len(ds) == (24 - 3) + (15 - 3)
    s = ds[0]
    assert s["video"].shape == (4, 48, 64, 3) and s["filename"].endswith("clip_a.mp4")
    assert s["label"] == 0


def test_other_python_threads_run_while_the_library_reads(tmp_path):
    # A read of many PNG rows is one library call; another Python thread
    # counts while it runs. With the GIL held for the whole call it could
    # not run at all between the call's start and end.
    import threading
    import time
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
    shardset.write_cache(({"img": img} for _ in range(64)), {"img": Image()}, tmp_path / "c",
                         png_level=6)
    ds = shardset.open_cache(tmp_path / "c")
    ticks, stop = [], threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    t = threading.Thread(target=count)
    t.start()
    while not ticks:
        time.sleep(0.001)
    start = time.perf_counter()
    rows = ds.__getitems__(list(range(64)) * 4)
    end = time.perf_counter()
    stop.set()
    t.join()
    assert len(rows) == 256 and (rows[-1]["img"] == img).all()
    inside = [x for x in ticks if start < x < end]
    assert len(inside) > 100, f"{len(inside)} ticks of the other thread during the read"


def test_a_cache_written_from_python_is_byte_identical_to_one_written_from_rust(tmp_path):
    # The Rust side: examples/write_rows.rs, built by `cargo test` (which
    # builds the examples) into $CARGO_TARGET_DIR.
    import subprocess
    target = os.environ.get("CARGO_TARGET_DIR",
                            os.path.expanduser("~/.cache/shardset/target"))
    exe = os.path.join(target, "debug", "examples", "write_rows")
    assert os.path.exists(exe), (f"{exe} is missing: build it with `cargo test` or "
                                 "`cargo build --example write_rows`")
    n = 40
    subprocess.run([exe, str(tmp_path / "rust"), "fixed-build-id", str(n)], check=True)
    feats = Features({"x": Value("int32"), "name": Value("string"),
                      "label": ClassLabel(names=["a", "b", "c"]), "img": Image(),
                      "arr": Array3D((2, 3, 4), "float32")})
    rows = ({"x": i, "name": None if i % 4 == 0 else f"row {i}", "label": i % 3,
             "img": ((i * 7 + np.arange(60)) % 256).astype(np.uint8).reshape(4, 5, 3),
             "arr": np.arange(24, dtype=np.float32).reshape(2, 3, 4) + i} for i in range(n))
    shardset.write_cache(rows, feats, tmp_path / "py", batch_size=7, shard_size=4096,
                         build_id="fixed-build-id")
    rust, py = sorted(os.listdir(tmp_path / "rust")), sorted(os.listdir(tmp_path / "py"))
    assert rust == py and len([f for f in py if f.endswith(".arrow")]) > 1
    for f in py:
        a = open(tmp_path / "rust" / f, "rb").read()
        b = open(tmp_path / "py" / f, "rb").read()
        assert a == b, f


@pytest.mark.parametrize("fmt", ["arrow", "lance"])
def test_fixed_size_arrays_round_trip_without_offsets(tmp_path, fmt):
    import pyarrow as pa
    rng = np.random.default_rng(3)
    rows = [{"i": i, "a": None if i % 5 == 2 else rng.standard_normal((2, 3, 4)).astype("float32"),
             "b": rng.integers(0, 255, (1, 2, 2, 3), dtype=np.uint8)} for i in range(30)]
    feats = Features({"i": Value("int64"), "a": Array3D((2, 3, 4), "float32", fixed_size=True),
                      "b": Array4D((1, 2, 2, 3), "uint8", fixed_size=True)})
    shardset.write_cache(rows, feats, tmp_path / "c", format=fmt, batch_size=8)
    ds = shardset.open_cache(tmp_path / "c")
    assert ds.features.describe() == feats.describe()
    assert ds.features["a"].fixed_size and ds.features.describe()["a"]["fixed_size"] is True
    # The repr is the reference's: the storage choice is not in it.
    assert repr(ds.features["a"]) == "Array3D(shape=(2, 3, 4), dtype='float32')"
    for i, want in enumerate(rows):
        got = ds[i]
        if want["a"] is None:
            assert got["a"] is None
        else:
            np.testing.assert_array_equal(got["a"], want["a"])
        np.testing.assert_array_equal(got["b"], want["b"])
    batch = ds.take_batch([0, 29, 1])
    np.testing.assert_array_equal(batch["b"], np.stack([rows[k]["b"] for k in (0, 29, 1)]))
    if fmt == "arrow":
        import json
        import pyarrow.ipc as ipc
        meta = json.load(open(tmp_path / "c" / "_metadata.json"))
        t = ipc.open_file(pa.memory_map(str(tmp_path / "c" / meta["shard_filenames"][0])))
        assert t.schema.field("a").type == pa.binary(96)
        assert t.schema.field("b").type == pa.binary(12)


@pytest.mark.parametrize("fmt", ["arrow", "lance"])
def test_edits_from_python_commit_a_version(tmp_path, fmt):
    rows = [{"i": i, "label": i % 3, "a": np.full((2, 3, 4), i, dtype="float32")} for i in range(30)]
    feats = Features({"i": Value("int64"), "label": ClassLabel(names=["a", "b", "c"]),
                      "a": Array3D((2, 3, 4), "float32")})
    d = tmp_path / "c"
    # Several shards or data files: each option of the layout it applies to.
    per_layout = {"arrow": {"shard_size": 2048}, "lance": {"max_rows_per_file": 8}}[fmt]
    shardset.write_cache(rows, feats, d, format=fmt, batch_size=4, **per_layout)
    old = shardset.open_cache(d)
    st = shardset.edit(d)
    st.set_cell(3, "label", "c")
    st.set_row(4, {"i": -4, "label": 0, "a": np.zeros((2, 3, 4), "float32")})
    st.delete(10)
    st.append({"i": 100, "label": 1, "a": np.ones((2, 3, 4), "float32")})
    with pytest.raises(shardset.BadInputError):
        st.set_cell(0, "a", np.zeros((3, 3), "float32"))
    with pytest.raises(shardset.BadInputError):
        st.set_cell(0, "nope", 1)
    assert len(st) == 30 and st.get(3)["label"] == 2 and st.get(-1)["i"] == 100
    plan = st.plan()
    assert plan["version"] == 2 and plan["rows_after"] == 30 and plan["appended_rows"] == 1
    assert len(plan["rewritten"]) >= 1 and len(plan["reused"]) >= 1
    done = st.commit(message="from python")
    assert done["version"] == 2 and done["rows"] == 30
    with pytest.raises(shardset.BadInputError):
        st.commit()
    new = shardset.open_cache(d)
    want = [r["i"] for r in rows]
    want[4] = -4
    del want[10]
    want.append(100)
    assert [new[k]["i"] for k in range(len(new))] == want
    assert new[3]["label"] == 2
    np.testing.assert_array_equal(new[4]["a"], np.zeros((2, 3, 4), "float32"))
    np.testing.assert_array_equal(new[29]["a"], np.ones((2, 3, 4), "float32"))
    # The old handle and the old version still read version 1.
    assert old[10]["i"] == 10 and old[3]["label"] == 0
    v1 = shardset.open_cache(d, version=1)
    assert [v1[k]["i"] for k in range(len(v1))] == [r["i"] for r in rows]


@pytest.mark.parametrize("codec", ["h264", "av1"])
def test_segments_caches_are_written_and_read_from_python(tmp_path, codec):
    # The compact video layout through the same API: windows of the same
    # size as a frames cache's; a lossless (CRF 0) cache holds the source
    # frames exactly, and a lossy one stays close to them, frame for frame.
    src = os.path.join(GOLDEN, "sources")
    clip = os.path.join(src, "clip_a.mp4")
    vids = [("a", {"video": clip, "label": 0})]
    seg_feats = Features({"video": Video(storage="segments"), "label": Value("int64")})
    if codec == "av1":
        # SVT-AV1 takes frames of at least 64x64; the clip is 64x48.
        with pytest.raises(shardset.ShardsetError, match="64x64"):
            shardset.write_cache(vids, seg_feats, tmp_path / "s", format="video-frames",
                                 segments={"codec": "av1"})
        return
    for name, crf in [("exact", 0), ("lossy", 18)]:
        n = shardset.write_cache(vids, seg_feats, tmp_path / name, format="video-frames",
                                 segments={"codec": codec, "crf": crf, "frames_per_segment": 8})
        assert n == 24
    exact = shardset.open_cache(tmp_path / "exact", window=4)
    lossy = shardset.open_cache(tmp_path / "lossy", window=4)
    assert len(exact) == len(lossy) == 24 - 3
    a, b = exact.windows(list(range(21))), lossy.windows(list(range(21)))
    assert a.shape == b.shape == (21, 4, 48, 64, 3)
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).mean(axis=(2, 3, 4))
    assert diff.max() < 4, diff
    # Window i's first frame is frame i: window i+1 starts one frame later.
    assert np.array_equal(a[1:, 0], a[:-1, 1])
    row = lossy[5]
    assert row["video"].shape == (4, 48, 64, 3) and row["label"] == 0
    assert np.array_equal(row["video"], b[5])
    meta = json.load(open(tmp_path / "lossy" / "_metadata.json"))
    assert meta["layout"] == "lance-video-segments"
    assert meta["segments"]["crf"] == 18 and meta["segments"]["frames_per_segment"] == 8
    assert "tune" not in meta["segments"]  # x264's own tuning
    assert meta["segments"]["quality"]["psnr_mean"] > 35
    assert json.load(open(tmp_path / "exact" / "_metadata.json"))[
        "segments"]["quality"]["psnr_min"] == 100
    with pytest.raises(shardset.ShardsetError, match="unknown field `gop`"):
        shardset.write_cache(vids, seg_feats, tmp_path / "x", format="video-frames",
                             segments={"gop": 8})
    # A tuning asked for is recorded.
    shardset.write_cache(vids, seg_feats, tmp_path / "tuned", format="video-frames",
                         segments={"codec": codec, "tune": "psnr", "frames_per_segment": 8})
    assert json.load(open(tmp_path / "tuned" / "_metadata.json"))["segments"]["tune"] == "psnr"
    with pytest.raises(shardset.ShardsetError, match="crisp"):
        shardset.write_cache(vids, seg_feats, tmp_path / "y", format="video-frames",
                             segments={"codec": codec, "tune": "crisp"})
    # So are the encoder's own parameters; the layout's own keys and ones
    # the encoder does not take are refused, naming them.
    shardset.write_cache(vids, seg_feats, tmp_path / "params", format="video-frames",
                         segments={"codec": codec, "encoder_params": "bframes=0",
                                   "frames_per_segment": 8})
    assert json.load(open(tmp_path / "params" / "_metadata.json"))[
        "segments"]["encoder_params"] == "bframes=0"
    for params, match in [("keyint=250", "keyint"), ("frobnicate=1", "frobnicate"),
                          (5, "segments.encoder_params: invalid type: integer `5`, expected a string")]:
        with pytest.raises(shardset.ShardsetError, match=match):
            shardset.write_cache(vids, seg_feats, tmp_path / "z", format="video-frames",
                                 segments={"codec": codec, "encoder_params": params})
        assert not (tmp_path / "z").exists()


@pytest.mark.parametrize("fmt,option", [("lance", {"shard_size": 1024}),
                                         ("arrow", {"max_rows_per_file": 8}),
                                         ("lance", {"dedup": 4096}),
                                         ("arrow", {"no_such_option": 1})])
def test_an_option_that_does_not_apply_is_refused_by_name(tmp_path, fmt, option):
    name = next(iter(option))
    with pytest.raises(shardset.BadInputError, match=name):
        shardset.write_cache([{"x": 1}], {"x": Value("int64")}, tmp_path / "c", format=fmt,
                             **option)
    assert not (tmp_path / "c").exists(), "nothing written"


def test_shard_sizes_are_read_by_the_library(tmp_path):
    rows = [{"x": i} for i in range(2000)]
    shardset.write_cache(rows, {"x": Value("int64")}, tmp_path / "c", shard_size="1KB",
                         batch_size=100)
    assert len(list((tmp_path / "c").glob("*.arrow"))) > 1
    shardset.write_cache(rows, {"x": Value("int64")}, tmp_path / "d", shard_size="one",
                         batch_size=100)
    assert len(list((tmp_path / "d").glob("*.arrow"))) == 1
    with pytest.raises(shardset.BadInputError, match="shard_size"):
        shardset.write_cache(rows, {"x": Value("int64")}, tmp_path / "e", shard_size=0)
