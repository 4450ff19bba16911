"""A filter selecting 10% of 1,000,000 rows: its first evaluation, a reopen
that reads the kept selection, and an epoch of the filtered view through
the input pipeline; pylance and pyarrow evaluating the same filter on the
same files as peers. One run.

    SHARDSET_WHEEL=/path/to/shardset-*.whl python3 benches/views.py

It runs in loaders.py's environment (benches/loaders-requirements.txt:
pyarrow, pylance and torch pinned) with the shardset package of
$SHARDSET_WHEEL, else a release wheel built from this checkout.

Content (chosen before any run; all of it is reported): 1,000,000 rows
{id int64, x float32, label class id of 10, text a 40-byte string}, as an
Arrow cache (shards of 64 MiB) and a Lance cache; the filter is
`label = 3 AND x >= 0` (100,000 rows).

Rows, each in a fresh process (the page cache holds the files):
  open + filter, first   `open_cache(path, filter=...)` with no kept
                         selection (shardset: evaluated on Arrow, pushed
                         down to Lance's scanner)
  open + filter, kept    the same call again: the selection kept in
                         `_selections/` is read back
  epoch                  the filtered view through `shardset.torch.Loader`
                         (random order, batches of 256 of id, x, label,
                         1 thread), after the open
  pylance                `lance.dataset(p).to_table(filter=..., columns=["id"])`
                         on the Lance cache (the row ids the filter keeps)
  pyarrow                the Arrow cache's shards read with pyarrow.ipc and
                         filtered with pyarrow.compute (the ids kept)
"""

import glob
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

CHILD = os.environ.get("SHARDSET_VIEWS_CHILD")
if CHILD:
    os.environ["SHARDSET_LOADERS_CHILD"] = "1"  # loaders.py: no re-exec in a child
import loaders  # noqa: E402  (its environment, made and entered when missing)

N = 1_000_000
FILTER = "label = 3 AND x >= 0"


def write(base):
    import shardset
    from shardset import ClassLabel, Features, Value
    f = Features({"id": Value("int64"), "x": Value("float32"),
                  "label": ClassLabel(names=[str(i) for i in range(10)]),
                  "text": Value("string")})

    def rows():
        for i in range(N):
            yield {"id": i, "x": float(i % 997), "label": (i * 7) % 10,
                   "text": f"{i:040d}"}
    shardset.write_cache(rows(), f, os.path.join(base, "arrow"), format="arrow",
                         shard_size=64 << 20)
    shardset.write_cache(rows(), f, os.path.join(base, "lance"), format="lance")


def child(base, layout, what):
    t0 = time.perf_counter()
    path = os.path.join(base, layout)
    if what == "pylance":
        import lance
        n = lance.dataset(path).to_table(filter=FILTER, columns=["id"]).num_rows
    elif what == "pyarrow":
        import pyarrow as pa
        import pyarrow.compute as pc
        n = 0
        for shard in sorted(glob.glob(os.path.join(path, "*.arrow"))):
            with pa.memory_map(shard) as src:
                try:
                    t = pa.ipc.open_file(src).read_all()
                except pa.ArrowInvalid:
                    src.seek(0)
                    t = pa.ipc.open_stream(src).read_all()
            mask = pc.and_(pc.equal(t["label"], 3), pc.greater_equal(t["x"], 0))
            n += t.filter(mask).num_rows
    else:
        import shardset
        from shardset.torch import Loader
        ds = shardset.open_cache(path, filter=FILTER)
        n = len(ds)
        if what == "epoch":
            t0 = time.perf_counter()
            p = Loader(ds, batch_size=256, columns=["id", "x", "label"], order="random", seed=0,
                       remainder="partial", threads=1, prefetch=2)
            n = sum(len(b["id"]) for b in p)
    print(json.dumps({"rows": n, "seconds": time.perf_counter() - t0}))


def run(base, layout, what):
    env = dict(os.environ, SHARDSET_VIEWS_CHILD=f"{base},{layout},{what}")
    out = subprocess.run([sys.executable, __file__], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def main():
    if CHILD:
        child(*CHILD.split(","))
        return
    pyenv.install_shardset(loaders.VENV)
    base = tempfile.mkdtemp(prefix="shardset-viewsbench-")
    write(base)
    table = []
    for layout in ("arrow", "lance"):
        shutil.rmtree(os.path.join(base, layout, "_selections"), ignore_errors=True)
        for what in ("first", "kept", "epoch", "pylance" if layout == "lance" else "pyarrow"):
            r = run(base, layout, what)
            table.append((layout, what, r))
            print(json.dumps([layout, what, r]), file=sys.stderr)
    commit = subprocess.run(["git", "-C", pyenv.ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d')}, commit {commit}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    print("\n| layout | what | rows | seconds | rows/s |")
    print("|---|---|---|---|---|")
    for layout, what, r in table:
        print(f"| {layout} | {what} | {r['rows']:,} | {r['seconds']:.3f} | "
              f"{r['rows'] / r['seconds']:,.0f} |")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
