"""The installed wheel on a bare machine, end to end: run by `./dev
wheel-test` inside a minimal Debian root (python3 and its venv module, no
compiler, no FFmpeg, no -dev package) with the wheel pip-installed into a
fresh virtual environment there.

Usage: python smoke.py CLIPS_DIR WORK_DIR

CLIPS_DIR holds the demo's clips (bars.mp4: H.264, cellauto.webm: VP9),
copied in from assets/demo/. With SHARDSET_SMOKE_S3 set to an `s3://bucket`
(and the AWS_* variables pointing at its server) the object-storage part
runs too. Every check that fails stops the script with a non-zero exit.
"""

import os
import sys
import time

t0 = time.perf_counter()
import shardset  # noqa: E402  (timed)

IMPORT_SECONDS = time.perf_counter() - t0

import json  # noqa: E402

import numpy as np  # noqa: E402

from shardset import Array3D, ClassLabel, Features, Image, Sequence, Value, Video  # noqa: E402

FEATURES = Features({
    "x": Value("int32"), "f": Value("float64"), "name": Value("string"),
    "flag": Value("bool"), "blob": Value("binary"),
    "label": ClassLabel(names=["cat", "dog", "bird"]), "img": Image(),
    "arr": Array3D((2, 3, 4), "float32"), "seq": Sequence(Value("int64")),
})


def rows(n):
    rng = np.random.default_rng(0)
    return [(f"k{i}", {
        "x": i - 50, "f": i / 7, "name": None if i % 9 == 0 else f"row {i} é",
        "flag": i % 2 == 0, "blob": bytes((i * k) % 251 for k in range(i % 40)),
        "label": i % 3, "img": rng.integers(0, 256, (6 + i % 4, 5, 3), dtype=np.uint8),
        "arr": rng.standard_normal((2, 3, 4)).astype(np.float32),
        "seq": list(range(i % 5)),
    }) for i in range(n)]


def check_rows(ds, want, what):
    assert len(ds) == len(want), f"{what}: {len(ds)} rows, wrote {len(want)}"
    for i, (_, w) in enumerate(want):
        got = ds[i]
        for col in ("x", "f", "name", "blob", "label", "seq"):
            assert got[col] == w[col], f"{what} row {i} {col}: {got[col]!r} != {w[col]!r}"
        assert got["flag"] is w["flag"], f"{what} row {i} flag"
        for col in ("img", "arr"):
            assert got[col].dtype == w[col].dtype, f"{what} row {i} {col} dtype"
            assert np.array_equal(got[col], w[col]), f"{what} row {i} {col} values"


def step(name, fn):
    t = time.perf_counter()
    detail = fn()
    print(f"ok  {name}: {detail} ({time.perf_counter() - t:.2f} s)", flush=True)


def main():
    clips, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    print(f"import shardset: {IMPORT_SECONDS:.3f} s", flush=True)
    import pyarrow
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"pyarrow {pyarrow.__version__}, shardset from {os.path.dirname(shardset.__file__)}",
          flush=True)
    want = rows(200)

    def local(fmt):
        def run():
            path = os.path.join(work, fmt)
            assert shardset.write_cache(want, FEATURES, path, format=fmt, progress=False) == 200
            ds = shardset.open_cache(path)
            check_rows(ds, want, fmt)
            batch = ds.take_batch([5, 0, 5])
            assert batch["x"].tolist() == [-45, -50, -45], batch["x"]
            return f"200 rows written and read back identical ({ds.layout})"
        return run

    step("arrow cache", local("arrow"))
    step("lance cache", local("lance"))

    vids = [("bars", {"video": os.path.join(clips, "bars.mp4"), "label": 0}),
            ("cellauto", {"video": os.path.join(clips, "cellauto.webm"), "label": 1})]

    def frames():
        path = os.path.join(work, "frames")
        n = shardset.write_cache(vids, Features({"video": Video(storage="frames"),
                                                 "label": Value("int64")}),
                                 path, format="video-frames", progress=False)
        assert n == 48 + 48, n
        ds = shardset.open_cache(path, window=4)
        assert len(ds) == 2 * (48 - 3), len(ds)
        w = ds.windows([0, 44, 45, 89])
        assert w.shape == (4, 4, 120, 160, 3) and w.dtype == np.uint8, (w.shape, w.dtype)
        row = ds[45]
        assert row["label"] == 1 and row["video"].shape == (4, 120, 160, 3)
        assert np.array_equal(row["video"], w[2])
        return f"{n} WebP frames of an H.264 and a VP9 clip; windows {w.shape}"

    def segments(codec, crf):
        def run():
            path = os.path.join(work, f"segments-{codec}")
            feats = Features({"video": Video(storage="segments"), "label": Value("int64")})
            n = shardset.write_cache(vids, feats, path, format="video-frames", progress=False,
                                     segments={"codec": codec, "crf": crf,
                                               "frames_per_segment": 16})
            assert n == 96, n
            seg = shardset.open_cache(path, window=4)
            ref = shardset.open_cache(os.path.join(work, "frames"), window=4)
            idx = list(range(0, 90, 7))
            a, b = seg.windows(idx), ref.windows(idx)
            assert a.shape == b.shape, (a.shape, b.shape)
            # The same frames as the WebP cache, up to the two codecs' losses.
            diff = float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())
            assert diff < 8, diff
            q = json.load(open(os.path.join(path, "_metadata.json")))["segments"]["quality"]
            return (f"{codec} crf {crf}: {len(idx)} windows, mean |diff| to the WebP frames "
                    f"{diff:.2f}, build PSNR mean {q['psnr_mean']:.1f} min {q['psnr_min']:.1f}")
        return run

    step("frames cache", frames)
    step("segments cache", segments("h264", 0))
    step("segments cache", segments("av1", 30))

    s3 = os.environ.get("SHARDSET_SMOKE_S3")
    if s3:
        def ready():
            # The server was just started outside: up once a cache can be
            # written (its bucket exists).
            deadline = time.time() + 90
            while True:
                try:
                    shardset.write_cache([{"x": 1}], {"x": Value("int64")}, f"{s3}/probe",
                                         progress=False)
                    return f"{s3} on {os.environ.get('AWS_ENDPOINT_URL')}"
                except Exception:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.3)
        step("s3 server up", ready)
        def remote(fmt):
            def run():
                uri = f"{s3}/smoke/{fmt}"
                assert shardset.write_cache(want, FEATURES, uri, format=fmt,
                                            progress=False) == 200
                ds = shardset.open_cache(uri)
                check_rows(ds, want, f"{fmt} on {uri}")
                return f"{uri}: 200 rows written and read back identical"
            return run
        step("s3 arrow cache", remote("arrow"))
        step("s3 lance cache", remote("lance"))
    else:
        print("--  s3: SHARDSET_SMOKE_S3 not set, not run", flush=True)

    try:
        import torch
    except ImportError:
        print("--  shardset.torch: torch is not installed here, not run", flush=True)
    else:
        def loader():
            from torch.utils.data import DataLoader

            from shardset.torch import MapDataset
            dl = DataLoader(MapDataset(os.path.join(work, "arrow"), columns=["x"]),
                            batch_size=32, num_workers=2)
            got = sorted(x for b in dl for x in b["x"].tolist())
            assert got == [r["x"] for _, r in want], got[:5]
            return f"torch {torch.__version__}: 200 rows through a DataLoader, 2 workers"
        step("shardset.torch", loader)
    print("smoke: all passed", flush=True)


if __name__ == "__main__":
    main()
