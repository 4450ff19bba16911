#!/usr/bin/env python3
"""WebP frame sizes and fidelity: shardset's frames builds against the
reference's encoder (OpenCV's `cv2.imencode('.webp', bgr, [quality])` on
frames decoded by `cv2.VideoCapture`, as `write_lance_video_frames_cache`
does), at the same quality, on every content of the video bench and more.

For each content: two 320x240 h264 clips of 50 frames (a hue shift each),
made with the ffmpeg CLI. The reference side encodes every frame with
OpenCV; shardset builds a frames cache with `shardset build videofolder
--storage frames` (`--webp-input rgb`, the default, and `yuv`), and its
frames are read back with pylance. Size: mean bytes per frame. PSNR: of
each WebP frame decoded by OpenCV against the frame OpenCV decoded from the
clip, over all pixels and channels (dB).

Usage: python3 benches/webp_sizes.py [--quality 65] [--bin PATH]
(the binary defaults to $SHARDSET_BIN, else target/debug/shardset under
$CARGO_TARGET_DIR or ~/.cache/shardset/target). Sizes do not depend on the
build profile.
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv  # noqa: E402

pyenv.reexec()

import cv2  # noqa: E402
import lance  # noqa: E402
import numpy as np  # noqa: E402

# The video bench's contents first (benches/compare.py), then the other
# synthetic contents tried there, then noise (where the sizes differed).
CONTENTS = [
    ("gradients", "gradients"),
    ("testsrc2", "testsrc2"),
    ("smptebars", "smptebars"),
    ("testsrc", "testsrc"),
    ("noisy testsrc2", "testsrc2,noise=alls=40:allf=t+u"),
]


def shardset_bin(arg):
    if arg:
        return arg
    if os.environ.get("SHARDSET_BIN"):
        return os.environ["SHARDSET_BIN"]
    target = os.environ.get("CARGO_TARGET_DIR",
                            os.path.expanduser("~/.cache/shardset/target"))
    return os.path.join(target, "debug", "shardset")


def make_clips(d, source, n=2, frames=50):
    os.makedirs(os.path.join(d, "c0"), exist_ok=True)
    out = []
    for i in range(n):
        p = os.path.join(d, "c0", f"v{i:02}.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                        f"{source.split(',')[0]}=size=320x240:rate=25"
                        + ("," + ",".join(source.split(",")[1:]) if "," in source else "")
                        + f",hue=h={i * 40}",
                        "-frames:v", str(frames), "-c:v", "libx264", "-pix_fmt", "yuv420p", p],
                       check=True)
        out.append(p)
    return out


def cv2_frames(path):
    cap = cv2.VideoCapture(path)
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(f)
    return frames


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def shardset_frames(binary, folder, out, quality, webp_input):
    subprocess.run([binary, "build", "videofolder", folder, "--storage", "frames",
                    "--webp-quality", str(quality), "--webp-input", webp_input,
                    "--out", out], check=True, stdout=subprocess.DEVNULL)
    ds = lance.dataset(os.path.join(out, "train"))
    t = ds.to_table(columns=["video_id", "frame_idx", "bytes"])
    rows = sorted(zip(t.column("video_id").to_pylist(), t.column("frame_idx").to_pylist(),
                      t.column("bytes").to_pylist()))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quality", type=int, default=65)
    ap.add_argument("--bin")
    a = ap.parse_args()
    binary = shardset_bin(a.bin)
    if not os.path.exists(binary):
        sys.exit(f"no shardset binary at {binary}: cargo build, or pass --bin")
    cv2.setNumThreads(1)
    print(f"WebP q{a.quality}, 2 clips x 50 frames of 320x240 per content; "
          f"opencv {cv2.__version__}")
    print(f"| content | reference bytes/frame | PSNR | shardset rgb bytes/frame | size vs ref | PSNR "
          f"| shardset yuv bytes/frame | size vs ref | PSNR |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for name, source in CONTENTS:
        with tempfile.TemporaryDirectory() as d:
            folder = os.path.join(d, "videos")
            clips = make_clips(folder, source)
            decoded = [cv2_frames(p) for p in clips]
            ref_sizes, ref_psnr = [], []
            for frames in decoded:
                for f in frames:
                    ok, buf = cv2.imencode(".webp", f, [int(cv2.IMWRITE_WEBP_QUALITY), a.quality])
                    assert ok
                    ref_sizes.append(len(buf))
                    ref_psnr.append(psnr(cv2.imdecode(buf, cv2.IMREAD_COLOR), f))
            row = [name, f"{np.mean(ref_sizes):,.0f}", f"{np.mean(ref_psnr):.2f}"]
            for webp_input in ["rgb", "yuv"]:
                rows = shardset_frames(binary, folder, os.path.join(d, webp_input), a.quality,
                                       webp_input)
                assert len(rows) == len(ref_sizes), (len(rows), len(ref_sizes))
                sizes = [len(b) for _, _, b in rows]
                ps = [psnr(cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR),
                           decoded[v][k]) for v, k, b in rows]
                ratio = np.mean(sizes) / np.mean(ref_sizes)
                if webp_input == "rgb":
                    worst = max(worst, abs(ratio - 1))
                row += [f"{np.mean(sizes):,.0f}", f"{ratio:.3f}x", f"{np.mean(ps):.2f}"]
            print("| " + " | ".join(row) + " |", flush=True)
    print(f"largest size difference of the default (rgb) from the reference: {worst * 100:.1f}% "
          f"(target: within 5%)")


if __name__ == "__main__":
    main()
