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
process holds nothing), COLD rounds of the three. Warm: in one process a
thread count, the three read in turn, an epoch each with a fresh Loader,
for ROUNDS rounds (each round in another order, see `rotated`); a row
gives each one's median epoch. Why in turn: this machine's speed drifts
by more than the 5% target from one process (or minute) to the next (one
epoch a process moved rows by up to a third from run to run), and epochs
read in turn see the same drift. So the overhead is also given paired:
each round's mixture epoch against that round's single-cache epoch, wall
and CPU seconds, the median over the rounds with a distribution-free 95%
interval (seven rounds a process, as in runs 18 and 19, moved the
medians' ratio from -5% to +12% between runs of one package). The mixture's
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
ROUNDS = 31
COLD = 5


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
    t0, c0 = time.perf_counter(), time.process_time()
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
    return {"rows": rows, "seconds": time.perf_counter() - t0,
            "cpu": time.process_time() - c0}


def child(base, what, threads):
    if what == "warm":
        out = {w: [] for w in WHATS}
        opened = {w: open_input(base, w) for w in WHATS}
        for r in range(ROUNDS):
            for w in rotated(r):
                out[w].append(epoch(base, w, threads, opened[w]))
        print(json.dumps(out))
        return
    print(json.dumps(epoch(base, what, threads)))


WHATS = ("single", "mixture", "mixture-batch")


def rotated(r):
    """The three in round `r`'s order: each goes first in a third of the
    rounds, so no one always reads right after another's threads stop."""
    return WHATS[r % 3:] + WHATS[:r % 3]


def run_child(base, what, threads):
    env = dict(os.environ, SHARDSET_MIX_CHILD=f"{base},{what},{threads}")
    return json.loads(subprocess.run([sys.executable, __file__], env=env, check=True,
                                     capture_output=True, text=True).stdout)


def median_rate(epochs):
    rates = sorted(e["rows"] / e["seconds"] for e in epochs)
    return rates[len(rates) // 2]


def paired(base, other, key):
    """The extra `key` (seconds or CPU seconds) of `other`'s epochs over
    `base`'s read in the same round, as a fraction: the median over the
    rounds and a distribution-free 95% interval for it (order statistics
    of the n pairs: ranks k and n + 1 - k, k the largest with
    P(Binomial(n, 1/2) < k) <= 2.5%)."""
    from math import comb
    d = sorted(o[key] / b[key] - 1 for b, o in zip(base, other))
    n = len(d)
    k, tail = 0, 0.0
    while tail + comb(n, k) / 2 ** n <= 0.025:
        tail += comb(n, k) / 2 ** n
        k += 1
    med = (d[(n - 1) // 2] + d[n // 2]) / 2
    return med, (d[k - 1], d[n - k]) if k else None


def pct(x):
    return f"{100 * x:+.1f}%"


def paired_cell(med, ci):
    return pct(med) + (f" [{pct(ci[0])}, {pct(ci[1])}]" if ci else "")


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
            for r in range(COLD):
                for what in rotated(r):
                    e = run_child(base, what, threads)
                    results.setdefault(("cold", threads, what), []).append(e)
                    print(json.dumps(e), file=sys.stderr)
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
    print(f"\nCold: one epoch from the open, a fresh process each, {COLD} rounds of the "
          f"three; a row is each one's median. Warm: the median of {ROUNDS} epochs, the "
          "three read in turn in one process.")
    def table(head, cells):
        """A row a thread count and run: `cells(threads, run)` after them."""
        print(head)
        print("|---" * (head.count("|") - 1) + "|")
        for threads in (1, 2):
            for run in ("cold", "warm"):
                print(f"| {threads} | {run} | " + " | ".join(cells(threads, run)) + " |")

    def rates(threads, run):
        a, b, c = (median_rate(results[(run, threads, w)]) for w in WHATS)
        return [f"{a:,.0f}", f"{b:,.0f}", f"{100 * (a / b - 1):+.1f}%", f"{c:,.0f}",
                f"{100 * (a / c - 1):+.1f}%"]

    def pairs(threads, run):
        single, mix, per_batch = (results[(run, threads, w)] for w in WHATS)
        return [str(len(single))] + [paired_cell(*paired(single, o, key))
                                     for o in (mix, per_batch) for key in ("seconds", "cpu")]

    table("\n| threads | run | single cache rows/s | mixture of 3 rows/s | overhead "
          "| mixture, a source per batch | overhead |", rates)
    print("\nPaired: each round's mixture epoch against the single cache's epoch of the "
          "same round (wall seconds, and CPU seconds of the process: its threads and "
          "the consumer), the median over the rounds with a 95% interval:")
    table("\n| threads | run | rounds | per sample: wall | per sample: CPU "
          "| a source per batch: wall | a source per batch: CPU |", pairs)
    print("\nEvery warm epoch, rows/s in the order read (each round in `rotated` order):\n")
    for threads in (1, 2):
        for what in WHATS:
            rates = ", ".join(f"{e['rows'] / e['seconds']:,.0f}"
                              for e in results[("warm", threads, what)])
            print(f"- {threads} thread(s), {what}: {rates}")


if __name__ == "__main__":
    main()
