"""Random access on data users already have, read in place: a Hugging Face
`save_to_disk` directory (shardset.open_hf against datasets.load_from_disk)
and Parquet files (shardset.open_parquet against pyarrow.dataset). One run.

    SHARDSET_WHEEL=/path/to/shardset-*.whl python3 benches/formats.py

It runs in the benchmarks' environment (~/.cache/shardset/bench-venv,
bench-requirements.txt) with the shardset package of $SHARDSET_WHEEL, else a
release wheel built from this checkout.

Content (chosen before any run; all of it is reported): 1,000,000 rows
{id int64, x float32, label int64 (0..9), text a 40-byte string}, written
  hf          by `datasets` (Dataset.from_dict + save_to_disk, its defaults:
              one data file, record batches of 1,000 rows)
  parquet-rg  by pyarrow.parquet.write_table, row groups of 100,000 rows,
              with the page index (as a dataset meant for random access)
  parquet-1   by pyarrow.parquet.write_table with its defaults (one row
              group, no page index)
The page cache holds the files (they were just written).

Work, each library in a fresh process, one Python thread (shardset reads on
the calling thread):
  open   the open call (shardset.open_*, datasets.load_from_disk,
         pyarrow.dataset.dataset)
  get    20,000 rows at uniform random positions (seed 0), one at a time,
         each as a Python dict: `ds[i]`, `hf[i]`, `dataset.take([i])
         .to_pylist()[0]`; stopped after 30 s (the rows done are reported)
  take   200 batches of 256 random positions (seed 1), each as columns
         (numbers as numpy arrays, strings as a sequence): `ds.take_batch`,
         `hf.with_format("numpy")[idx]`, `dataset.take(idx)` then
         `to_numpy` per column
  cold is the first pass after the open; warm the same positions again.
  limit: the same take from a pyarrow Table already in memory (a gather of
         the columns, then `to_numpy`): what any reader's batch costs at
         least once the bytes are decoded.
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

CHILD = os.environ.get("SHARDSET_FORMATS_CHILD")
if not CHILD:
    pyenv.reexec()

N = 1_000_000
GETS = 20_000
GET_SECONDS = 30.0
BATCHES, BATCH = 200, 256


def write(base):
    import datasets
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    ids = np.arange(N, dtype=np.int64)
    t = pa.table({"id": ids, "x": (ids % 997).astype(np.float32),
                  "label": (ids * 7) % 10,
                  "text": pa.array([f"{i:040d}" for i in range(N)])})
    datasets.Dataset(t).save_to_disk(os.path.join(base, "hf"))
    pq.write_table(t, os.path.join(base, "parquet-rg.parquet"), row_group_size=100_000,
                   write_page_index=True)
    pq.write_table(t, os.path.join(base, "parquet-1.parquet"))


def positions(seed, n):
    import numpy as np
    return np.random.default_rng(seed).integers(0, N, n).tolist()


def child(base, data, lib):
    import numpy as np
    gets = positions(0, GETS)
    takes = [positions(1000 + k, BATCH) for k in range(BATCHES)]
    path = os.path.join(base, data if data == "hf" else data + ".parquet")
    t0 = time.perf_counter()
    if lib == "shardset":
        import shardset
        ds = shardset.open_hf(path) if data == "hf" else shardset.open_parquet(path)
        get = ds.__getitem__
        take = ds.take_batch
    elif lib == "datasets":
        import datasets
        ds = datasets.load_from_disk(path)
        get = ds.__getitem__
        numpy = ds.with_format("numpy")
        take = numpy.__getitem__
    elif lib == "pyarrow":
        import pyarrow.dataset as pads
        ds = pads.dataset(path)

        def get(i):
            return ds.take([i]).to_pylist()[0]

        def take(idx):
            t = ds.take(idx)
            return {c: t[c].to_numpy() for c in t.column_names}
    elif lib == "limit":
        import pyarrow.parquet as pq
        table = pq.read_table(os.path.join(base, "parquet-rg.parquet"))

        def get(i):
            return table.slice(i, 1).to_pylist()[0]

        def take(idx):
            t = table.take(idx)
            return {c: t[c].to_numpy() for c in t.column_names}
    opened = time.perf_counter() - t0
    out = {"open": opened}
    for label in ("cold", "warm"):
        t0 = time.perf_counter()
        done = 0
        for i in gets:
            row = get(i)
            assert row["id"] == i
            done += 1
            if done % 256 == 0 and time.perf_counter() - t0 > GET_SECONDS:
                break
        out[f"get {label}"] = (done, time.perf_counter() - t0)
        t0 = time.perf_counter()
        rows = 0
        for idx in takes:
            cols = take(idx)
            assert np.array_equal(np.asarray(cols["id"]), idx)
            rows += len(idx)
        out[f"take {label}"] = (rows, time.perf_counter() - t0)
    print(json.dumps(out))


def run(base, data, lib):
    env = dict(os.environ, SHARDSET_FORMATS_CHILD=f"{base},{data},{lib}")
    out = subprocess.run([sys.executable, __file__], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    if CHILD:
        child(*CHILD.split(","))
        return
    pyenv.install_shardset(pyenv.VENV)
    base = tempfile.mkdtemp(prefix="shardset-formatsbench-")
    write(base)
    plan = [("hf", "shardset"), ("hf", "datasets"),
            ("parquet-rg", "shardset"), ("parquet-rg", "pyarrow"),
            ("parquet-1", "shardset"), ("parquet-1", "pyarrow"),
            ("in memory", "limit")]
    table = []
    for data, lib in plan:
        r = run(base, data, lib)
        table.append((data, lib, r))
        print(json.dumps([data, lib, r]), file=sys.stderr)
    commit = subprocess.run(["git", "-C", pyenv.ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d')}, commit {commit}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    print("\n| data | library | open s | get cold rows/s | get warm rows/s "
          "| take cold rows/s | take warm rows/s |")
    print("|---|---|---|---|---|---|---|")
    for data, lib, r in table:
        rate = [r[k][0] / r[k][1] for k in ("get cold", "get warm", "take cold", "take warm")]
        note = "" if r["get cold"][0] == GETS else f" ({r['get cold'][0]:,} rows in 30 s)"
        print(f"| {data} | {lib} | {r['open']:.3f} | {rate[0]:,.0f}{note} | {rate[1]:,.0f} | "
              f"{rate[2]:,.0f} | {rate[3]:,.0f} |")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
