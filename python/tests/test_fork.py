"""Processes made after the parent used the library: DataLoader workers by
fork, spawn and forkserver, `os.fork()` and a `multiprocessing.Pool`. The
parent first uses one thing (decoding JPEG, PNG or WebP images, epoch
columns, frames and segments windows, `write_cache`, an `s3://` read, a
Lance read), then its children do all of them and must return the values a
process that used nothing first gets. Each case runs in a fresh interpreter
with a deadline, so a hang fails the case instead of hanging the suite."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

import shardset
from shardset import Value

from conftest import GOLDEN
from test_object_storage import s3  # noqa: F401 - the S3 server fixture

DEADLINE = 240

USES = ["jpeg", "png", "webp", "epoch", "frames", "segments", "write", "s3", "lance"]

# Every use, as a function of the caches' paths returning a digest.
OPS = textwrap.dedent('''
    import hashlib, os, tempfile
    import numpy as np
    import shardset
    from shardset import Value

    def digest(x):
        h = hashlib.sha256()
        def walk(v):
            if isinstance(v, dict):
                for k in sorted(v):
                    h.update(str(k).encode()); walk(v[k])
            elif isinstance(v, (list, tuple)):
                h.update(b"[")
                for e in v:
                    walk(e)
                h.update(b"]")
            elif isinstance(v, np.ndarray):
                h.update(str((v.dtype.str, v.shape)).encode()); h.update(np.ascontiguousarray(v).tobytes())
            elif hasattr(v, "numpy"):
                walk(v.numpy())
            else:
                h.update(repr(v).encode())
        walk(x)
        return h.hexdigest()

    def rows(path):
        ds = shardset.open_cache(path)
        return digest(ds.take_batch(list(range(len(ds)))))

    def windows(path):
        ds = shardset.open_cache(path, window=(4, 0, 2))
        # The first video's windows (the videos differ in size), and the last.
        return digest([ds.windows(list(range(8))), ds[len(ds) - 1]])

    def epoch(path):
        ds = shardset.open_cache(path)
        return digest([ds._ds.epoch_columns("random", 3, 1, s, s + 8) for s in range(0, 24, 8)])

    def write(out):
        d = os.path.join(out, f"written-{os.getpid()}-{np.random.randint(1 << 30)}")
        f = {"x": Value("int64"), "s": Value("string")}
        shardset.write_cache(({"x": i, "s": str(i)} for i in range(50)), f, d)
        shardset.write_cache(({"x": i, "s": str(i)} for i in range(50)), f, d + "-lance",
                             format="lance")
        return digest([rows(d), rows(d + "-lance")])

    def s3(uri):
        return rows(uri)

    def run(use, c):
        if use in ("jpeg", "png", "webp", "lance"):
            return rows(c[use])
        if use in ("frames", "segments"):
            return windows(c[use])
        if use == "epoch":
            return epoch(c["jpeg"])
        if use == "write":
            return write(c["tmp"])
        if use == "s3":
            return s3(c["s3"])
        raise ValueError(use)
''')

CHILD = OPS + textwrap.dedent('''
    import json, sys
    import torch
    from torch.utils.data import DataLoader, Dataset as TorchDataset

    class Ops(TorchDataset):
        def __init__(self, uses, c):
            self.uses, self.c = uses, c
        def __len__(self):
            return len(self.uses)
        def __getitem__(self, k):
            return run(self.uses[k], self.c)

    def by_pool(args):
        use, c = args
        return run(use, c)

    def main(uses, c, parent_use, how):
        if parent_use != "none":
            run(parent_use, c)
        if how in ("fork", "spawn", "forkserver"):
            loader = DataLoader(Ops(uses, c), batch_size=None, num_workers=2,
                                multiprocessing_context=how, timeout=200)
            return list(loader)
        if how == "os.fork":
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                os.write(w, json.dumps([run(u, c) for u in uses]).encode())
                os._exit(0)
            os.close(w)
            data = b""
            while chunk := os.read(r, 1 << 16):
                data += chunk
            _, status = os.waitpid(pid, 0)
            assert status == 0, status
            return json.loads(data)
        if how == "pool":
            import multiprocessing
            with multiprocessing.get_context("fork").Pool(2) as pool:
                return pool.map(by_pool, [(u, c) for u in uses])
        raise ValueError(how)

    if __name__ == "__main__":
        print(json.dumps(main(json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3],
                              sys.argv[4])))
''')


def _run(caches, parent_use, how):
    # A file, not `-c`: spawned workers import the main module by its path.
    script = os.path.join(caches["tmp"], "fork_child.py")
    if not os.path.exists(script):
        with open(script, "w") as f:
            f.write(CHILD)
    try:
        out = subprocess.run([sys.executable, script, json.dumps(USES), json.dumps(caches),
                              parent_use, how], capture_output=True, text=True,
                             timeout=DEADLINE, env=os.environ.copy())
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"parent used {parent_use}, then {how}: hung for {DEADLINE} s\n"
                    f"{(e.stderr or b'')[-3000:]!r}")
    assert out.returncode == 0, f"parent used {parent_use}, then {how}:\n{out.stderr[-5000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def _image_cache(tmp, fmt):
    """24 photographs-like 200x150 images stored as `fmt` (wide enough
    that the JPEG decoder splits a decode over threads)."""
    d = tmp / f"img-{fmt}"
    rng = np.random.default_rng(1)
    rows = []
    for i in range(24):
        a = (np.add.outer(np.arange(150), np.arange(200))[..., None] * (i + 1)
             + rng.integers(0, 40, (150, 200, 3))).astype(np.uint8)
        p = tmp / f"src-{fmt}-{i}.{fmt}"
        Image.fromarray(a).save(p, format={"jpeg": "JPEG", "png": "PNG", "webp": "WEBP"}[fmt])
        rows.append({"img": p.read_bytes(), "label": i})
    shardset.write_cache(rows, {"img": shardset.Image(), "label": Value("int64")}, d)
    return str(d)


@pytest.fixture(scope="module")
def caches(s3, tmp_path_factory):  # noqa: F811 - the fixture above
    tmp = tmp_path_factory.mktemp("fork")
    c = {f: _image_cache(tmp, f) for f in ("jpeg", "png", "webp")}
    clip = os.path.join(GOLDEN, "sources", "clip_a.mp4")
    clip_b = os.path.join(GOLDEN, "sources", "clip_b.mp4")
    for name, storage, extra in [("frames", "frames", {}),
                                 ("segments", "segments",
                                  {"segments": {"codec": "h264", "frames_per_segment": 8}})]:
        feats = shardset.Features({"video": shardset.Video(storage=storage)})
        shardset.write_cache([("a", {"video": clip}), ("b", {"video": clip_b})], feats,
                             tmp / name, format="video-frames", **extra)
        c[name] = str(tmp / name)
    f = {"x": Value("int64"), "s": Value("string")}
    shardset.write_cache(({"x": i, "s": str(i)} for i in range(40)), f, tmp / "lance",
                         format="lance")
    c["lance"] = str(tmp / "lance")
    shardset.write_cache(({"x": i, "s": str(i)} for i in range(40)), f, f"{s3}/fork-read")
    c["s3"] = f"{s3}/fork-read"
    c["tmp"] = str(tmp)
    return c


@pytest.fixture(scope="module")
def expected(caches):
    """What workers return when the parent used nothing first."""
    return _run(caches, "none", "spawn")


@pytest.mark.parametrize("how", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("parent_use", USES)
def test_dataloader_workers_after_the_parent_used_the_library(caches, expected, parent_use,
                                                              how):
    assert _run(caches, parent_use, how) == expected


@pytest.mark.parametrize("how", ["os.fork", "pool"])
def test_a_forked_child_and_a_pool_after_every_use(caches, expected, how):
    got = None
    for use in USES:
        got = _run(caches, use, how)
        assert got == expected, (use, how)


def test_the_reported_reproduction_returns_its_first_batch(caches):
    # A cache of JPEG images looked at in the parent, then a DataLoader of
    # forked workers over the iterable dataset.
    script = textwrap.dedent('''
        import sys
        import shardset
        from shardset.torch import IterableDataset
        from torch.utils.data import DataLoader
        path = sys.argv[1]
        ds = shardset.open_cache(path)
        ds.take_batch(list(range(24)))
        loader = DataLoader(IterableDataset(path, batch_size=8, order="sequential"),
                            batch_size=None, num_workers=2, multiprocessing_context="fork")
        b = next(iter(loader))
        print(tuple(b["img"].shape), b["label"].tolist())
    ''')
    try:
        out = subprocess.run([sys.executable, "-c", script, caches["jpeg"]],
                             capture_output=True, text=True, timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the first batch did not come within {DEADLINE} s")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "(8, 150, 200, 3) [0, 1, 2, 3, 4, 5, 6, 7]"
