"""A mixture of three caches through the input pipeline against the same
rows in one cache, one run.

    SHARDSET_WHEEL=/path/to/shardset-*.whl python3 benches/mixtures.py

It runs in loaders.py's environment (benches/loaders-requirements.txt:
torch, for the Loader's tensors) with the shardset package of
$SHARDSET_WHEEL, else a release wheel built from this checkout.

Content (chosen before any run; all of it is reported): 1,000,000 scalar
rows {id int64, x float32, label class id of 10}, written as one Arrow
cache ("single") and as three Arrow caches of 400,000, 300,000 and 300,000
rows (the mixture's sources), shards of 64 MiB.

Reads: the input pipeline (`shardset.torch.Loader` over the single cache in
a random order, and over the `shardset.Mixture`, weights 0.4, 0.3, 0.3,
each source in its own random order), batches of 256 rows of the three
columns, the same 3,906 batches' worth of rows, consumed by Python (each
batch's tensors held, then dropped), at 1 and 2 threads. Cold: an epoch in
a fresh process from the open (the page cache holds the files, the
process holds nothing), one process a row. Warm: in one process a thread
count, the three read in turn, an epoch each with a fresh Loader, for
ROUNDS rounds; a row gives each one's median epoch. Why in turn: this
machine's speed drifts by more than the 5% target from one process (or
minute) to the next (one epoch a process moved rows by up to a third from
run to run), and epochs read in turn see the same drift. The mixture's
extra work is the draws (a few random numbers a row), each row's place
among its source's rows, and a location pass per source per batch
instead of one, before one copy in draw order; a third row ("mixture, a
source per batch": draw="batch") tells the draws from the rest.
"""

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pyenv  # noqa: E402

CHILD = os.environ.get("SHARDSET_MIX_CHILD")
if CHILD:
    os.environ["SHARDSET_LOADERS_CHILD"] = "1"  # loaders.py: no re-exec in a child
import loaders  # noqa: E402  (its environment, made and entered when missing)

N = 1_000_000
SIZES = [400_000, 300_000, 300_000]
BATCH = 256
STEPS = N // BATCH
ROUNDS = 7


def write(base):
    import shardset
    from shardset import ClassLabel, Features, Value
    f = Features({"id": Value("int64"), "x": Value("float32"),
                  "label": ClassLabel(names=[str(i) for i in range(10)])})

    def rows(lo, hi):
        for i in range(lo, hi):
            yield {"id": i, "x": float(i % 1000) / 7.0, "label": i % 10}
    shardset.write_cache(rows(0, N), f, os.path.join(base, "single"), format="arrow",
                         shard_size=64 << 20)
    lo = 0
    for k, n in enumerate(SIZES):
        shardset.write_cache(rows(lo, lo + n), f, os.path.join(base, f"s{k}"), format="arrow",
                             shard_size=64 << 20)
        lo += n


def open_input(base, what):
    """The single cache (a Dataset) or the mixture of `what`, opened."""
    import shardset
    if what == "single":
        return shardset.open_cache(os.path.join(base, "single"))
    # "mixture-batch": each batch from one source (one take a batch, no
    # mixing of columns), to tell the draws' cost from the takes'.
    return shardset.Mixture([(os.path.join(base, f"s{k}"), w)
                             for k, w in enumerate([0.4, 0.3, 0.3])],
                            batch_size=BATCH, seed=0,
                            draw="batch" if what == "mixture-batch" else "sample")


def epoch(base, what, threads, opened=None):
    """One epoch's rows and seconds, through a fresh Loader: from the open
    (cold), or over `opened` (warm; a Loader reads a mixture from where it
    stands, and reading it does not move it)."""
    from shardset.torch import Loader
    t0 = time.perf_counter()
    source = open_input(base, what) if opened is None else opened
    cols = ["id", "x", "label"]
    if what == "single":
        loader = Loader(source, batch_size=BATCH, columns=cols, order="random", seed=0,
                        remainder="drop_last", threads=threads, prefetch=2)
    else:
        loader = Loader(source, columns=cols, threads=threads, prefetch=2)
    rows = 0
    for k, b in enumerate(loader):
        rows += len(b["id"])
        if k + 1 == STEPS:
            break
    return {"rows": rows, "seconds": time.perf_counter() - t0}


def child(base, what, threads):
    if what == "warm":
        out = {w: [] for w in WHATS}
        opened = {w: open_input(base, w) for w in WHATS}
        for _ in range(ROUNDS):
            for w in WHATS:
                out[w].append(epoch(base, w, threads, opened[w]))
        print(json.dumps(out))
        return
    print(json.dumps(epoch(base, what, threads)))


WHATS = ("single", "mixture", "mixture-batch")


def run_child(base, what, threads):
    env = dict(os.environ, SHARDSET_MIX_CHILD=f"{base},{what},{threads}")
    return json.loads(subprocess.run([sys.executable, __file__], env=env, check=True,
                                     capture_output=True, text=True).stdout)


def median_rate(epochs):
    rates = sorted(e["rows"] / e["seconds"] for e in epochs)
    return rates[len(rates) // 2]


def main():
    if CHILD:
        base, what, threads = CHILD.split(",")
        child(base, what, int(threads))
        return
    pyenv.install_shardset(loaders.VENV)
    base = tempfile.mkdtemp(prefix="shardset-mixbench-")
    results = {}
    try:
        write(base)
        for threads in (1, 2):
            for what in WHATS:
                results[("cold", threads, what)] = [run_child(base, what, threads)]
                print(json.dumps(results[("cold", threads, what)]), file=sys.stderr)
            warm = run_child(base, "warm", threads)
            for what in WHATS:
                results[("warm", threads, what)] = warm[what]
            print(json.dumps(warm), file=sys.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    commit = subprocess.run(["git", "-C", pyenv.ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d')}, commit {commit}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"\nCold: one epoch from the open, a fresh process each. Warm: the median of "
          f"{ROUNDS} epochs, the three read in turn in one process.")
    print("\n| threads | run | single cache rows/s | mixture of 3 rows/s | overhead "
          "| mixture, a source per batch | overhead |")
    print("|---|---|---|---|---|---|---|")
    for threads in (1, 2):
        for run in ("cold", "warm"):
            a, b, c = (median_rate(results[(run, threads, w)]) for w in WHATS)
            print(f"| {threads} | {run} | {a:,.0f} | {b:,.0f} | {100 * (a / b - 1):+.1f}% "
                  f"| {c:,.0f} | {100 * (a / c - 1):+.1f}% |")
    print("\nEvery warm epoch, rows/s in the order read:\n")
    for threads in (1, 2):
        for what in WHATS:
            rates = ", ".join(f"{e['rows'] / e['seconds']:,.0f}"
                              for e in results[("warm", threads, what)])
            print(f"- {threads} thread(s), {what}: {rates}")


if __name__ == "__main__":
    main()
