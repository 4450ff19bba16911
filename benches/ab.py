"""Our side against itself: two builds of the `workloads` bench binary (A, an
older commit; B, the one under test) on the same files, the same operations,
alternated A, B, A, B, ... so that drift on a noisy machine hits both alike.
A regression check, not a comparison with the reference (that is
versus.py): it says whether B reads and writes as fast as A did.

Usage: python3 benches/ab.py A_BINARY B_BINARY [--rounds 3] [--scale 1.0]
(through benches/pyenv.py's environment, like versus.py).

Every content is the one versus.py uses (same generators, same seeds), the
caches are written once by B and read by both; writes are timed for both
into fresh directories. Each cell is the median of the rounds; the ratio is
B / A of rates (above 1: B is faster). Reads are cold (a fresh backend per
process), 1 thread.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import versus  # noqa: E402
import numpy as np  # noqa: E402


def run(binary, args):
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    out = subprocess.run([binary] + args, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def rate(j, key="cold"):
    if j is None:
        return None
    if "seconds" in j and key == "cold" and "cold" not in j:
        return j.get("count", j.get("rows", 1)) / j["seconds"]
    return j["count"] / j[key] if j.get(key) else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", default="scalar,binary,text,lance,video")
    a = ap.parse_args()
    only = a.only.split(",")
    sz = lambda n: max(1000, int(n * a.scale))  # noqa: E731
    results = []

    def measure(kind, title, make_args, n=None, key="cold"):
        ra, rb = [], []
        for _ in range(a.rounds):
            for side, acc in ((a.a, ra), (a.b, rb)):
                j = run(side, make_args(side))
                r = rate(j, key) if n is None else (n / j["seconds"] if j else None)
                if r is not None:
                    acc.append(r)
        ma = statistics.median(ra) if ra else None
        mb = statistics.median(rb) if rb else None
        results.append((kind, title, ma, mb))
        print(f"{kind:8} {title:40} A {fmt(ma):>10}  B {fmt(mb):>10}  B/A {ratio(ma, mb)}",
              flush=True)

    print(f"A: {a.a}\nB: {a.b}\nrounds: {a.rounds}, 1 thread, cold reads, median of rounds\n")
    with tempfile.TemporaryDirectory(prefix="ab-") as tmp:
        for kind in ["scalar", "binary", "text", "lance"]:
            if kind not in only:
                continue
            n = sz(1_000_000 if kind == "scalar" else 100_000)
            base = "binary" if kind in ("binary", "lance") else kind
            pfile = os.path.join(tmp, f"{kind}.payload")
            payload = None
            if base == "binary":
                payload = versus.payload_binary(n)
            elif base == "text":
                payload = versus.payload_text(n)
            if payload is not None:
                with open(pfile, "wb") as f:
                    f.write(payload)
            wk = "scalar" if kind == "scalar" else "binary"
            extra = (["--payload", pfile] if payload is not None else []) + \
                (["--zstd"] if kind == "text" else []) + (["--lance"] if kind == "lance" else [])
            counter = [0]

            def wargs(_side, wk=wk, n=n, extra=extra, counter=counter, kind=kind):
                counter[0] += 1
                d = os.path.join(tmp, f"{kind}-w{counter[0]}")
                return ["versus-write", "--kind", wk, "--rows", str(n), "--dir", d] + extra
            measure(kind, "write", wargs, n=n)
            d = os.path.join(tmp, f"{kind}-cache")
            run(a.b, ["versus-write", "--kind", wk, "--rows", str(n), "--dir", d] + extra)
            rng = np.random.default_rng(11)
            gets = 2_000 if kind == "lance" else 20_000
            for op, idx in [("get", rng.integers(0, n, gets)),
                            ("take128", rng.integers(0, n, 128 * 200)),
                            ("iterate", None)]:
                rargs = versus.read_args(tmp, d, op, idx)
                measure(kind, op, lambda _s, r=rargs: r)
        if "video" in only:
            src = os.path.join(tmp, "clips-gradients")
            versus.make_synthetic(src, "gradients", n=max(2, round(30 * a.scale)))
            counter = [0]

            def fargs(_side):
                counter[0] += 1
                return ["versus-frames-build", "--video-dir", src, "--dir",
                        os.path.join(tmp, f"frames-{counter[0]}"), "--threads", "2"]
            measure("video", "frames build, 2 threads (frames/s)", fargs)
            d = os.path.join(tmp, "frames-1")
            ifile = os.path.join(tmp, "widx.bin")
            probe = run(a.b, ["versus-windows", "--dir", d, "--indices", os.devnull])
            nwin = probe["num_windows"] if probe and "num_windows" in probe else None
            if nwin is None:
                # Windows of 16 frames over 100-frame clips: 85 a clip.
                nwin = 85 * max(2, round(30 * a.scale))
            np.random.default_rng(5).integers(0, nwin, 400).astype("<i8").tofile(ifile)
            measure("video", "16-frame windows, 1 thread", lambda _s: [
                "versus-windows", "--dir", d, "--indices", ifile])
    print("\n| workload | op | A | B | B/A |\n|---|---|---|---|---|")
    for kind, title, ma, mb in results:
        print(f"| {kind} | {title} | {fmt(ma)} | {fmt(mb)} | {ratio(ma, mb)} |")


def fmt(r):
    if r is None:
        return "n/a"
    return f"{r / 1e6:.2f} M/s" if r >= 1e6 else f"{r / 1e3:.1f} k/s" if r >= 1e3 else f"{r:.1f}/s"


def ratio(a, b):
    return f"{b / a:.2f}x" if a and b else "n/a"


if __name__ == "__main__":
    main()
