"""The input pipeline against its peers, one run (over 600 lines: each of
the seven readers is a branch beside the others so they read alike, and a
run's data, measures and table are one script, as in loaders.py).

shardset's `Loader` decodes and augments on the library's threads; each peer
uses PIL decode and torchvision.transforms.v2 in a torch DataLoader.

    python3 benches/pipeline.py

It runs in the environment of benches/loaders.py (~/.cache/shardset/
loaders-venv from benches/loaders-requirements.txt, mosaic-streaming in its
second environment) and takes that script's writers, loaders and
measurements; the shardset package is installed the same way (the wheel of
$SHARDSET_WHEEL, else a release wheel built from this checkout).

Workloads (chosen before any run; all of them are reported):
  train   20,000 crops of 256x256 pixels from the eight colour photographs
          scikit-image ships (positions drawn once, seed 1), each encoded
          once by PIL as JPEG q90, with a label (the photograph's index) and
          an id; RandomResizedCrop(224), horizontal flip, float32 scaled
          to 0..1, ImageNet normalisation, CHW, batches of 256
  eval    the same images; Resize(256), CenterCrop(224), float32, normalised
  scalar  loaders.py's 1,000,000 scalar rows; the Loader (no ops), in
          shard-shuffle (the cache is one shard: every row shuffled) and in
          block-shuffle:62500 (blocks as long as pylance's 16 fragments,
          rows shuffled inside each), against each peer's best
          configuration in loaders.py's run, and pylance's LanceDataset
          iterated with no DataLoader around it

shardset: `Loader` over the reference's cache at threads 1 and 2, no
DataLoader. Peers: the reference (stable-datasets), HF datasets, litdata,
mosaicml-streaming, webdataset and pylance, each read its documented way
(loaders.py's), the image decoded by PIL and transformed by torchvision v2
in the loader's workers, `num_workers` 0 and 2. One epoch each, the last
batch kept (every id must come exactly once), in a fresh process.
Measured: the time from opening the data to the first batch, samples/s
after the first batch, CPU seconds per sample of the process tree (user +
system, the epoch from the open), and peak resident memory of the process
tree. Limits: PIL decode + the same transforms alone on one core (the
peers'), and the Loader at one thread (ours), each times the two cores.

SHARDSET_PIPELINE_SMOKE=1 runs a small copy (1,000 images, 20,000 rows; its
figures are not reported): a check of the script itself. A full run writes
its table into docs/benchmarks/pipeline.md.
"""

import argparse
import datetime
import io
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
SMOKE = bool(os.environ.get("SHARDSET_PIPELINE_SMOKE"))
# loaders.py's data lives in a directory of this script's own (its image
# content differs), set before it is imported.
os.environ["SHARDSET_LOADERS_DATA"] = os.environ.get(
    "SHARDSET_PIPELINE_DATA", os.path.expanduser("~/.cache/shardset/pipeline-data"))
if SMOKE:
    os.environ["SHARDSET_LOADERS_SMOKE"] = "1"
else:
    os.environ.pop("SHARDSET_LOADERS_SMOKE", None)
import loaders  # noqa: E402  (runs this script again in the loaders' environment)
import numpy as np  # noqa: E402
import pyenv  # noqa: E402

DATA = loaders.DATA
# Bump when the content changes: every library's copy is written again.
CONTENT = "pipeline-1"
loaders.CONTENT = CONTENT
PAGE = os.path.join(pyenv.ROOT, "docs", "benchmarks", "pipeline.md")

N_IMAGES = 1_000 if SMOKE else 20_000
SIDE = 256
QUALITY = 90
CROP = 224
BATCH = 256
SEED = 0
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
CORES = 2

PEERS = ["reference", "hf-datasets", "litdata", "mosaic-streaming", "webdataset", "pylance"]
# Each peer's fastest worker count on the scalar rows in loaders.py's run
# (docs/benchmarks/loaders.md).
SCALAR_BEST = {"reference": 0, "hf-datasets": 2, "litdata": 0, "mosaic-streaming": 2,
               "webdataset": 2, "pylance": 0}
# Our scalar rows in two orders: the default (the scalar cache is one
# shard, so every row shuffled) and blocks as long as pylance's fragments
# (loaders.write_lance writes 16), shuffled, each block's rows shuffled: an
# order as coarse as pylance's fragment shuffle, finer inside a block.
SCALAR_ORDERS = ("shard-shuffle", f"block-shuffle:{1_000_000 // 16}")
# pylance's scalar rows also without a DataLoader: its LanceDataset is an
# iterable of finished batches, and the DataLoader around it (its docs'
# way, at workers=0 a loop in the same process) costs it a quarter to a
# third of its rate on this loop.
DIRECT = "direct"
# (workload, library, threads or workers, variant: our order, or DIRECT).
PLAN = ([(w, "shardset", t, None) for w in ("train", "eval") for t in (1, 2)]
        + [(w, lib, n, None) for w in ("train", "eval") for n in (0, 2) for lib in PEERS]
        + [("scalar", "shardset", t, o) for o in SCALAR_ORDERS for t in (1, 2)]
        + [("scalar", lib, SCALAR_BEST[lib], None) for lib in PEERS]
        + [("scalar", "pylance", 0, DIRECT)])


# --------------------------------------------------------------- data ---

def image_columns():
    """The JPEG crops, in the file loaders.columns("images") reads."""
    f = os.path.join(DATA, "images.npz")
    stamp = f + ".content"
    if os.path.exists(f) and os.path.exists(stamp) and open(stamp).read() == CONTENT:
        return
    from PIL import Image
    photos = loaders.photos()
    rng = np.random.default_rng(1)
    labels = rng.integers(0, len(photos), N_IMAGES)
    blobs = []
    for i in range(N_IMAGES):
        p = photos[labels[i]]
        y = rng.integers(0, p.shape[0] - SIDE + 1)
        x = rng.integers(0, p.shape[1] - SIDE + 1)
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(p[y:y + SIDE, x:x + SIDE])).save(
            buf, format="JPEG", quality=QUALITY)
        blobs.append(buf.getvalue())
    np.savez(f + ".tmp.npz", id=np.arange(N_IMAGES, dtype=np.int64),
             image=np.frombuffer(b"".join(blobs), dtype=np.uint8),
             image_len=np.array([len(b) for b in blobs], dtype=np.int64),
             label=labels.astype(np.int64))
    os.replace(f + ".tmp.npz", f)
    with open(stamp, "w") as fh:
        fh.write(CONTENT)


def kind(workload):
    return "scalar" if workload == "scalar" else "images"


def source(lib, workload):
    """Where `lib` reads `workload`: shardset reads the reference's cache."""
    return loaders.where(kind(workload), "reference" if lib == "shardset" else lib)


# ---------------------------------------------------------- transforms ---

def transform(workload):
    """torchvision.transforms.v2 of the workload, for one PIL image."""
    import torch
    from torchvision.transforms import v2 as T
    if workload == "train":
        head = [T.RandomResizedCrop(CROP, antialias=True), T.RandomHorizontalFlip()]
    else:
        head = [T.Resize(SIDE, antialias=True), T.CenterCrop(CROP)]
    return T.Compose([T.ToImage()] + head + [T.ToDtype(torch.float32, scale=True),
                                              T.Normalize(MEAN, STD)])


def shardset_ops(workload):
    from shardset import ops
    if workload == "train":
        head = [ops.RandomResizedCrop(CROP), ops.RandomHorizontalFlip()]
    else:
        head = [ops.Resize(SIDE), ops.CenterCrop(CROP)]
    return head + [ops.ToDtype("float32"), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]


class Pil:
    """PIL decode of JPEG bytes, then the torchvision transform."""

    def __init__(self, workload):
        self.tf = transform(workload)

    def __call__(self, b):
        from PIL import Image
        return self.tf(Image.open(io.BytesIO(b)))


class RefRow:
    """The reference's row transform: its decoded PIL image through the
    torchvision transform."""

    def __init__(self, workload):
        self.tf = transform(workload)

    def __call__(self, row):
        return {"id": row["id"], "label": row["label"], "image": self.tf(row["image"])}


# ------------------------------------------------------------ loaders ---

def image_loader(lib, workload, workers):
    """(DataLoader or Loader, how it shuffles) reading `workload`'s images."""
    import torch
    from torch.utils.data import DataLoader
    d = source(lib, workload)
    if lib == "shardset":
        from shardset.torch import Loader
        return Loader(d, batch_size=BATCH, seed=SEED, threads=workers, prefetch=2,
                      remainder="partial", ops={"image": shardset_ops(workload)}), \
            "shard-shuffle"
    kw = dict(num_workers=workers, persistent_workers=False)
    if workers:
        kw["prefetch_factor"] = 2
    pil = Pil(workload)
    if lib == "reference":
        cache, dataset, schema, _ = pyenv.reference_package()
        feats = loaders.ref_features("images")
        res = cache.open_cache(d, feats)
        ds = dataset.StableDataset(feats, schema.DatasetInfo(features=feats),
                                   backend=res.backend).with_transform(RefRow(workload))
        return DataLoader(ds, batch_size=BATCH, sampler=ds.make_sampler("shard_shuffle",
                                                                        seed=SEED), **kw), \
            "shard-shuffle (make_sampler)"
    if lib == "hf-datasets":
        import datasets

        def tf(batch):
            batch["image"] = [pil(b) for b in batch["image"]]
            return batch
        ds = datasets.load_from_disk(d).with_transform(tf)
        return DataLoader(ds, batch_size=BATCH, shuffle=True, generator=loaders.gen(), **kw), \
            "random (shuffle=True)"
    if lib == "litdata":
        import litdata

        class Lit(litdata.StreamingDataset):
            def __getitem__(self, index):
                s = super().__getitem__(index)
                s["image"] = pil(s["image"])
                return s

        return litdata.StreamingDataLoader(Lit(d, shuffle=True, seed=SEED), batch_size=BATCH,
                                           **kw), "chunk shuffle (shuffle=True)"
    if lib == "mosaic-streaming":
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory
        clean_stale_shared_memory()

        class Mds(StreamingDataset):
            def __getitem__(self, index):
                s = super().__getitem__(index)
                s["image"] = pil(s["image"])
                return s

        ds = Mds(local=d, shuffle=True, shuffle_seed=SEED, batch_size=BATCH)
        return DataLoader(ds, batch_size=BATCH, **kw), "shard shuffle (py1e, shuffle=True)"
    if lib == "webdataset":
        import glob

        import webdataset as wds
        urls = sorted(glob.glob(os.path.join(d, "*.tar")))

        def sample(s):
            out = {k: torch.tensor(v) for k, v in s["json"].items()}
            out["image"] = pil(s["jpg"])
            return out

        ds = (wds.WebDataset(urls, shardshuffle=len(urls), seed=SEED,
                             nodesplitter=wds.split_by_node, workersplitter=wds.split_by_worker,
                             empty_check=False)
              .shuffle(5000).decode().map(sample)
              .batched(BATCH, collation_fn=torch.utils.data.default_collate, partial=True))
        return DataLoader(ds, batch_size=None, **kw), "shard shuffle + 5,000-sample buffer"
    if lib == "pylance":
        import torch.utils.data as tud

        def to_tensor(batch, *args, **kwargs):
            return {"id": torch.tensor(batch.column("id").to_numpy()),
                    "label": torch.tensor(batch.column("label").to_numpy()),
                    "image": torch.stack([pil(b) for b in batch.column("image").to_pylist()])}

        class Lance(tud.IterableDataset):
            """LanceDataset with a fragment sampler per worker, as in
            loaders.py."""

            def __iter__(self):
                import lance
                from lance.sampler import ShardedFragmentSampler
                from lance.torch.data import LanceDataset
                info = tud.get_worker_info()
                wid, nw = (info.id, info.num_workers) if info else (0, 1)
                return iter(LanceDataset(
                    lance.dataset(d), batch_size=BATCH, columns=["id", "image", "label"],
                    sampler=ShardedFragmentSampler(rank=wid, world_size=nw, randomize=True,
                                                   seed=SEED),
                    to_tensor_fn=to_tensor))

        return DataLoader(Lance(), batch_size=None, **kw), "fragment shuffle (randomize=True)"
    raise ValueError(lib)


def scalar_loader(lib, par, variant):
    if lib == "shardset":
        from shardset.torch import Loader
        return Loader(source(lib, "scalar"), batch_size=BATCH, seed=SEED, threads=par,
                      prefetch=2, remainder="partial", order=variant), variant
    dl, shuffle, _ = loaders.loader(lib, "scalar", par, "-")
    if variant == DIRECT:
        # The dataset the DataLoader would iterate, iterated by the loop.
        return dl.dataset, shuffle + ", no DataLoader"
    return dl, shuffle


# ------------------------------------------------------------ measure ---

def cpu_self():
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_reaped():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Tree(loaders.PeakRss):
    """loaders.PeakRss, and the CPU time of every process below this one
    (the latest user + system seen of each, sampled every 20 ms)."""

    def __init__(self):
        super().__init__()
        self.cpu = {}

    def run(self):
        import psutil
        while not self.stop.is_set():
            total = 0
            try:
                procs = [self.me] + self.me.children(recursive=True)
            except psutil.Error:
                procs = [self.me]
            for p in procs:
                try:
                    with p.oneshot():
                        total += p.memory_info().rss
                        if p.pid != self.me.pid:
                            t = p.cpu_times()
                            self.cpu[p.pid] = t.user + t.system
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self.stop.wait(0.02)

    def children_cpu(self):
        return sum(self.cpu.values())


# Imported before the clock starts: the time to the first batch is the
# open and the read, not the import of a package.
IMPORTS = {"shardset": ["shardset.torch", "shardset.ops"], "reference": [],
           "hf-datasets": ["datasets"], "litdata": ["litdata"],
           "mosaic-streaming": ["streaming", "streaming.base.util"],
           "webdataset": ["webdataset"],
           "pylance": ["lance", "lance.sampler", "lance.torch.data"]}


def run_one(lib, workload, par, variant=None):
    import importlib

    import torch
    torch.set_num_threads(1)
    for m in IMPORTS[lib] + ["torch.utils.data", "PIL.Image", "torchvision.transforms.v2"]:
        importlib.import_module(m)
    if lib == "reference":
        pyenv.reference_package()
    n_ids = loaders.N_SCALAR if workload == "scalar" else N_IMAGES
    loaders.read_files(source(lib, workload))
    tree = Tree()
    tree.start()
    cpu0, reaped0 = cpu_self(), cpu_reaped()
    t0 = time.perf_counter()
    if workload == "scalar":
        dl, shuffle = scalar_loader(lib, par, variant)
    else:
        dl, shuffle = image_loader(lib, workload, par)
    it = iter(dl)
    first = next(it)
    t1 = time.perf_counter()
    seen = np.zeros(n_ids, dtype=np.int32)
    consume = consumer(workload, seen)
    rows_first = consume(first)
    total = rows_first
    progress = os.environ.get("SHARDSET_PIPELINE_PROGRESS")
    last = time.perf_counter()
    for b in it:
        total += consume(b)
        now = time.perf_counter()
        if progress and now - last > 2:
            # Where the epoch stands, for a run stopped at the time limit.
            last = now
            cpu = cpu_self() - cpu0 + max(cpu_reaped() - reaped0, tree.children_cpu())
            with open(progress + ".tmp", "w") as f:
                json.dump({"shuffle": shuffle, "first_s": t1 - t0, "rows": total - rows_first,
                           "s": now - t1, "cpu_per": cpu / total,
                           "peak_mib": tree.peak / 2**20}, f)
            os.replace(progress + ".tmp", progress)
    t2 = time.perf_counter()
    # The workers end with the iterator; their CPU is then the reaped one.
    del it, first
    dl = None
    time.sleep(0.1)
    tree.stop.set()
    tree.join()
    cpu = cpu_self() - cpu0 + max(cpu_reaped() - reaped0, tree.children_cpu())
    return {"lib": lib, "workload": workload, "par": par, "variant": variant,
            "shuffle": shuffle,
            "first_s": t1 - t0, "rate": (total - rows_first) / (t2 - t1), "epoch_s": t2 - t0,
            "rows": total, "cpu_per": cpu / total, "once": bool((seen == 1).all()),
            "dups": int((seen > 1).sum()), "missing": int((seen == 0).sum()),
            "peak_mib": tree.peak / 2**20}


def consumer(workload, seen):
    """The loop's work on a batch, the same for every library: count each
    id (every id once is checked from `seen`), check the image's shape."""
    import torch

    def consume(b):
        ids = np.asarray(b["id"]).reshape(-1).astype(np.int64)
        np.add.at(seen, ids, 1)
        if workload != "scalar":
            img = b["image"]
            assert tuple(img.shape[1:]) == (3, CROP, CROP) and img.dtype == torch.float32, \
                (tuple(img.shape), img.dtype)
            assert len(b["label"]) == len(ids)
        return len(ids)
    return consume


def consumer_ceiling():
    """Rows/s of the scalar loop's consumer alone, on one epoch of batches
    made beforehand (Arrow's take of the rows, as tensors): what the loop's
    own work costs, on batches of shuffled rows (ours) and on batches in
    pylance's order (its 16 fragments shuffled, each one's rows in order:
    the consumer's `np.add.at` then counts ids that lie together in
    `seen`, where shuffled ids miss the CPU's caches). Timed at another
    moment than the loops, on a machine whose speed moves over minutes, it
    is a guide, not a bound: a loop of ours passed it once (the eleventh
    scalar run)."""
    # pylance's order: the 16 fragments loaders.write_lance writes.
    chunks = np.array_split(np.arange(loaders.N_SCALAR), 16)
    in_fragments = np.concatenate([chunks[f] for f in np.random.default_rng(3).permutation(16)])
    out = []
    for order in (None, in_fragments):
        n, made = loaders.scalar_batches(order)
        batches = list(made)
        consume = consumer("scalar", np.zeros(n, dtype=np.int32))
        start = time.perf_counter()
        for b in batches:
            consume(b)
        out += [n / (time.perf_counter() - start),
                "the loop's consumer alone on batches held in memory, 1 core, "
                + ("shuffled rows" if order is None else "in pylance's order")]
    return out


def limit(workload):
    """Samples/s of one core doing the peers' per-sample work alone."""
    if workload == "scalar":
        return loaders.limits("scalar")
    import torch
    torch.set_num_threads(1)
    blobs = loaders.columns("images")["image"][:2000]
    pil = Pil(workload)
    start = time.perf_counter()
    for b in blobs:
        pil(b)
    return len(blobs) / (time.perf_counter() - start), \
        "PIL JPEG decode + the torchvision v2 transforms alone, 1 core"


def limit_ours(workload):
    """Samples/s of one core doing our decode + the same ops alone: the
    Loader's ops applied image by image (`shardset.ops.ImageOps`, the same
    code the Loader's threads run), no reading, batching or hand-over."""
    import torch
    from shardset import ops
    torch.set_num_threads(1)
    blobs = loaders.columns("images")["image"][:2000]
    one = ops.ImageOps(shardset_ops(workload))
    start = time.perf_counter()
    for k, b in enumerate(blobs):
        one(b, seed=SEED, epoch=0, position=k)
    return len(blobs) / (time.perf_counter() - start), \
        "our decode + the same ops alone (shardset.ops.ImageOps), 1 core"


# ------------------------------------------------------------- driver ---

def write_data(lib, workload):
    src = "reference" if lib == "shardset" else lib
    if kind(workload) == "images":
        image_columns()
    loaders.write(kind(workload), src)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="train,eval,scalar")
    ap.add_argument("--libs", default=None, help="comma-separated (shardset and peers)")
    ap.add_argument("--run", nargs=3, metavar=("LIB", "WORKLOAD", "PAR"))
    ap.add_argument("--variant", default=None,
                    help=f"with --run: our epoch order, or {DIRECT} (pylance, no DataLoader)")
    ap.add_argument("--write", nargs=2, metavar=("LIB", "WORKLOAD"))
    ap.add_argument("--limit", default=None)
    ap.add_argument("--limit-ours", default=None)
    ap.add_argument("--consumer-ceiling", action="store_true")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--limit-s", type=int, default=240,
                    help="stop an epoch after this many seconds and report its rate so far")
    ap.add_argument("--no-page", action="store_true", help="print the table only")
    a = ap.parse_args()
    if a.run:
        lib, workload, par = a.run
        print(json.dumps(run_one(lib, workload, int(par), a.variant)))
        return
    if a.write:
        os.makedirs(DATA, exist_ok=True)
        write_data(*a.write)
        return
    if a.limit:
        print(json.dumps(limit(a.limit)))
        return
    if a.limit_ours:
        print(json.dumps(limit_ours(a.limit_ours)))
        return
    if a.consumer_ceiling:
        print(json.dumps(consumer_ceiling()))
        return
    only = a.only.split(",")
    libs = a.libs.split(",") if a.libs else None
    if not libs or "shardset" in libs:
        pyenv.install_shardset(loaders.VENV)
    pyenv.reference_package()
    mosaic_py = loaders.mosaic_python()
    env = dict(os.environ, SHARDSET_LOADERS_CHILD="1")
    os.makedirs(DATA, exist_ok=True)

    def child(lib, args, timeout=None):
        """Runs this script in a process group of its own (ended whole at
        the time limit)."""
        py = mosaic_py if lib == "mosaic-streaming" else sys.executable
        p = subprocess.Popen([py, __file__] + args, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    plan = [e for e in PLAN if e[0] in only and (not libs or e[1] in libs)]
    for w, lib, _, _ in plan:
        src = "reference" if lib == "shardset" else lib
        p = child(src, ["--write", src, w])
        sys.stderr.write(p.stderr)
        if p.returncode != 0:
            sys.exit(f"writing {w} for {src} failed:\n{p.stderr[-3000:]}")
    results = []
    for w, lib, n, variant in plan:
        prog = os.path.join(tempfile.gettempdir(), f"shardset-pipeline-{os.getpid()}.json")
        env["SHARDSET_PIPELINE_PROGRESS"] = prog
        r = {"lib": lib, "workload": w, "par": n, "variant": variant}
        try:
            p = child(lib, ["--run", lib, w, str(n)] + (["--variant", variant] if variant else []),
                      timeout=a.limit_s)
            if p.returncode != 0:
                print(f"{w} {lib} {n} FAILED:\n{p.stderr[-3000:]}", file=sys.stderr)
                lines = p.stderr.strip().splitlines()
                r["failed"] = lines[-1] if lines else "failed"
            else:
                r = json.loads(p.stdout.strip().splitlines()[-1])
        except subprocess.TimeoutExpired:
            # Stopped at the time limit: the rate over the part read.
            r["failed"] = f"epoch not finished in {a.limit_s} s"
            if os.path.exists(prog):
                pr = json.load(open(prog))
                r = dict(r, shuffle=pr["shuffle"], first_s=pr["first_s"],
                         rate=pr["rows"] / pr["s"], cpu_per=pr["cpu_per"],
                         peak_mib=pr["peak_mib"], once=None, dups=0,
                         partial=f"stopped at {a.limit_s} s after {pr['rows']:,} rows")
                del r["failed"]
        finally:
            if os.path.exists(prog):
                os.remove(prog)
        results.append(r)
        if "rate" in r:
            print(f"{w:6} {name(r):26} first {r['first_s']:6.2f} s {r['rate']:9.0f}/s "
                  f"cpu {us(r['cpu_per']):>7} µs/sample peak {r['peak_mib']:6.0f} MiB "
                  f"once={r['once']}", file=sys.stderr)
        else:
            print(f"{w:6} {name(r):26} {r['failed']}", file=sys.stderr)
    lims, ours_lims = {}, {}
    for w in only:
        p = child("reference", ["--limit", w])
        if p.returncode == 0:
            lims[w] = json.loads(p.stdout.strip().splitlines()[-1])
        else:
            print(f"limit {w} FAILED:\n{p.stderr[-3000:]}", file=sys.stderr)
        if w == "scalar":
            p = child("reference", ["--consumer-ceiling"])
            if p.returncode == 0:
                ours_lims["scalar-consumer"] = json.loads(p.stdout.strip().splitlines()[-1])
            else:
                print(f"consumer ceiling FAILED:\n{p.stderr[-3000:]}", file=sys.stderr)
            continue
        if libs and "shardset" not in libs:
            continue
        p = child("shardset", ["--limit-ours", w])
        if p.returncode == 0:
            ours_lims[w] = json.loads(p.stdout.strip().splitlines()[-1])
        else:
            print(f"our limit {w} FAILED:\n{p.stderr[-3000:]}", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "limits": lims, "our_limits": ours_lims}, f,
                      indent=1)
    text = table(results, lims, ours_lims)
    print(text)
    if SMOKE or a.no_page or a.only != ap.get_default("only") or a.libs:
        print("(the page is filled by a full run only)", file=sys.stderr)
    else:
        fill_page(text, mosaic_py)


# -------------------------------------------------------------- table ---

def name(r):
    return "shardset Loader" if r["lib"] == "shardset" else r["lib"]


def par_cell(r):
    if r.get("variant") == DIRECT:
        return "no DataLoader"
    return f"threads={r['par']}" if r["lib"] == "shardset" else f"workers={r['par']}"


def cores(r):
    """The cores a configuration can keep busy on this machine."""
    return min(CORES, max(1, r["par"]))


def limits_of(lims, ours_lims):
    """{workload: (ours per core, what, peers' per core, what)}."""
    out = {}
    for w, (rate, what) in lims.items():
        if w == "scalar":
            out[w] = (rate, what, rate, what)
        elif w in ours_lims:
            out[w] = (*ours_lims[w], rate, what)
        else:
            out[w] = (None, "", rate, what)
    return out


def secs(s):
    return f"{s:.3f}" if s < 0.1 else f"{s:.2f}"


def us(seconds):
    v = seconds * 1e6
    return f"{v:,.2f}" if v < 100 else f"{v:,.0f}"


def once_cell(r):
    if r.get("partial"):
        return f"not known ({r['partial']})"
    if r["once"]:
        return "yes"
    return f"NO ({r['dups']} twice, {r['missing']} missing)"


def table(results, lims, ours_lims):
    lim = limits_of(lims, ours_lims)
    out = ["| workload | library | parallelism | shuffle | first batch (s) | samples/s | "
           "CPU µs/sample | peak RSS (MiB) | every id once | × best peer | × limit (2 cores) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for w in ("train", "eval", "scalar"):
        rs = [r for r in results if r["workload"] == w]
        if not rs:
            continue
        peers = [r["rate"] for r in rs if "rate" in r and r["lib"] != "shardset"]
        best = max(peers) if peers else None
        for r in rs:
            if "rate" not in r:
                out.append(f"| {w} | {name(r)} | {par_cell(r)} | | failed: {r['failed']} "
                           "| | | | | | |")
                continue
            ours_l, _, peers_l, _ = lim.get(w, (None, "", None, ""))
            per_core = ours_l if r["lib"] == "shardset" else peers_l
            vs_best = f"{r['rate'] / best:.2f}" if best else ""
            vs_lim = f"{r['rate'] / (CORES * per_core):.2f}" if per_core else ""
            out.append(f"| {w} | {name(r)} | {par_cell(r)} | {r['shuffle']} | "
                       f"{secs(r['first_s'])} | {r['rate']:,.0f} | {us(r['cpu_per'])} | "
                       f"{r['peak_mib']:,.0f} | {once_cell(r)} | {vs_best} | {vs_lim} |")
    out.append("")
    for w, (ours, ours_what, peers_l, peers_what) in lim.items():
        if w == "scalar":
            out.append(f"- limit, scalar: {peers_l:,.0f} samples/s per core ({peers_what}); "
                       f"{CORES} cores: {CORES * peers_l:,.0f}/s (for every row).")
            if "scalar-consumer" in ours_lims:
                c, what, *frag = ours_lims["scalar-consumer"]
                out.append(f"- consumer alone, scalar: {c:,.0f} samples/s ({what}), timed "
                           "after the rows above: what the loop's own work costs, a guide "
                           "rather than a bound, as this machine's speed moves over minutes "
                           "(a loop passed it in the eleventh run).")
                if frag:
                    out.append(f"- consumer alone, scalar, pylance's order: {frag[0]:,.0f} "
                               f"samples/s ({frag[1]}): {frag[0] / c:.2f}x its rate on "
                               "shuffled rows.")
            continue
        out.append(f"- limit, {w}, peers: {peers_l:,.0f} samples/s per core ({peers_what}); "
                   f"{CORES} cores: {CORES * peers_l:,.0f}/s.")
        if ours:
            out.append(f"- limit, {w}, ours: {ours:,.0f} samples/s per core ({ours_what}); "
                       f"{CORES} cores: {CORES * ours:,.0f}/s; one thread of ours against "
                       f"one core of PIL + torchvision: {ours / peers_l:.2f}x.")
    for w in ("train", "eval", "scalar"):
        ours = [r for r in results if r["workload"] == w and r["lib"] == "shardset"
                and "rate" in r]
        peers = [r for r in results if r["workload"] == w and r["lib"] != "shardset"
                 and "rate" in r]
        if not (ours and peers):
            continue
        p = max(peers, key=lambda r: r["rate"])
        # One line an order of ours (the scalar rows have two).
        for shuffle in dict.fromkeys(r["shuffle"] for r in ours):
            o = max((r for r in ours if r["shuffle"] == shuffle), key=lambda r: r["rate"])
            out.append(f"- {w}: ours at its best in {shuffle} ({par_cell(o)}, "
                       f"{o['rate']:,.0f}/s) / the best peer's best configuration "
                       f"({p['lib']} {par_cell(p)}, {p['rate']:,.0f}/s): "
                       f"{o['rate'] / p['rate']:.2f}x.")
        if w == "scalar" and "scalar-consumer" in ours_lims:
            c = ours_lims["scalar-consumer"][0]
            out.append(f"- scalar: the consumer alone (shuffled rows) runs at "
                       f"{c / p['rate']:.2f}x the best peer's best configuration.")
    return "\n".join(out)


def versions(mosaic_py):
    from importlib.metadata import version
    v = {p: version(p) for p in ("torch", "torchvision", "pillow", "datasets", "litdata",
                                 "webdataset", "pylance")}
    v["mosaicml-streaming"] = subprocess.run(
        [mosaic_py, "-c", "from importlib.metadata import version; "
         "print(version('mosaicml-streaming'))"], capture_output=True, text=True).stdout.strip()
    return ", ".join(f"{k} {x}" for k, x in v.items())


def fill_page(text, mosaic_py):
    """Writes the run's header and table between the page's markers."""
    def git(*args):
        return subprocess.run(["git", "-C", pyenv.ROOT, *args], capture_output=True,
                              text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD")
    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--", "src",
                                                  "python") else ""
    head = "\n".join([
        f"- **Date:** {datetime.date.today().isoformat()}",
        f"- **Commit:** shardset {commit}{dirty}, its package built with "
        "`maturin build --release`.",
        f"- **Machine:** {os.cpu_count()} cores; Python {platform.python_version()}, "
        f"{versions(mosaic_py)}; the reference at {pyenv.reference_package()[3]}.",
        "- **Command:** `python3 benches/pipeline.py`"])
    page = open(PAGE).read()
    for marker, body in (("run", head), ("results", text)):
        page, n = re.subn(rf"(<!-- {marker} -->\n).*?(\n<!-- /{marker} -->)",
                          lambda m: m.group(1) + body + m.group(2), page, flags=re.S)
        if n != 1:
            sys.exit(f"{PAGE} lacks its <!-- {marker} --> ... <!-- /{marker} --> block; "
                     "the table is printed above")
    with open(PAGE, "w") as f:
        f.write(page)
    print(f"wrote the table into {PAGE}", file=sys.stderr)


if __name__ == "__main__":
    main()
