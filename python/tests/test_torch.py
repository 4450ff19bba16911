"""shardset.torch with real DataLoader workers: every row once across ranks
and workers, every start method, exact resume after a kill (also with
another number of workers or ranks), the epoch reaching persistent workers,
no shared-memory files left behind."""

import os
import pickle
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler
from torchdata.stateful_dataloader import StatefulDataLoader

import shardset
from shardset import Value
from shardset.torch import IterableDataset, Loader, MapDataset, rank_state

N = 1000


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("torch") / "c"
    # Several shards, so shard-aware orders have something to shuffle.
    shardset.write_cache(({"x": i, "y": float(i) / 2} for i in range(N)),
                         {"x": Value("int64"), "y": Value("float32")}, d, shard_size=2048,
                         batch_size=50)
    assert len(shardset.open_cache(d).shard_row_counts) > 3
    return str(d)


def ids(batches):
    return [x for b in batches for x in b["x"].tolist()]


def test_datasets_pickle_as_path_and_options(cache):
    m = MapDataset(cache)
    it = IterableDataset(cache, batch_size=10)
    m[0]  # opened in this process
    assert len(pickle.dumps(m)) < 512 and len(pickle.dumps(it)) < 1024
    assert pickle.loads(pickle.dumps(m))[5]["x"] == 5
    assert len(pickle.loads(pickle.dumps(it))) == N // 10


def test_two_ranks_of_two_workers_read_every_row_once(cache):
    seen = []
    for rank in range(2):
        m = MapDataset(cache)
        s = DistributedSampler(m, num_replicas=2, rank=rank, shuffle=True, seed=3)
        seen += ids(DataLoader(m, batch_size=32, sampler=s, num_workers=2))
    assert sorted(seen) == list(range(N))
    seen = []
    for rank in range(2):
        it = IterableDataset(cache, batch_size=25, seed=5, rank=rank, world_size=2)
        got = ids(DataLoader(it, batch_size=None, num_workers=2))
        assert len(got) == N // 2
        seen += got
    assert sorted(seen) == list(range(N))


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_every_start_method_reads_every_row_once(cache, method):
    m = MapDataset(cache)
    got = ids(DataLoader(m, batch_size=64, num_workers=2, shuffle=True,
                         multiprocessing_context=method))
    assert sorted(got) == list(range(N))
    it = IterableDataset(cache, batch_size=20, order="random", remainder="pad")
    got = ids(DataLoader(it, batch_size=None, num_workers=2, multiprocessing_context=method))
    assert sorted(got) == list(range(N))


def test_orders_are_the_librarys_and_remainders_are_explicit(cache):
    seq = IterableDataset(cache, batch_size=300, order="sequential")
    assert ids(iter(seq)) == list(range(900))  # drop_last: 3 full batches
    pad = IterableDataset(cache, batch_size=300, order="sequential", remainder="pad")
    assert ids(iter(pad)) == list(range(N)) + list(range(200))
    a = ids(iter(IterableDataset(cache, batch_size=100, order="shard-shuffle", seed=1)))
    b = ids(iter(IterableDataset(cache, batch_size=100, order="shard-shuffle", seed=1)))
    assert a == b and sorted(a) == list(range(N)) and a != list(range(N))
    with pytest.raises(shardset.BadInputError, match="order"):
        IterableDataset(cache, order="backwards")


CHILD = textwrap.dedent("""
    import sys, torch
    from torchdata.stateful_dataloader import StatefulDataLoader
    from shardset.torch import IterableDataset
    cache, out, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ds = IterableDataset(cache, batch_size=20, order="random", seed=9)
    ds.set_epoch(1)
    loader = StatefulDataLoader(ds, batch_size=None, num_workers=workers)
    seen = []
    for k, b in enumerate(loader):
        seen += b["x"].tolist()
        torch.save({"seen": seen, "state": loader.state_dict()}, out + ".tmp")
        import os; os.replace(out + ".tmp", out)
        if k == 13:
            print("checkpointed", flush=True)
            sys.stdin.read()  # killed here
""")


def run_until_killed(cache, tmp_path, workers):
    out = str(tmp_path / "ckpt.pt")
    p = subprocess.Popen([sys.executable, "-c", CHILD, cache, out, str(workers)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "checkpointed"
    p.send_signal(signal.SIGKILL)
    p.wait()
    return torch.load(out, weights_only=False)


def uninterrupted(cache):
    ds = IterableDataset(cache, batch_size=20, order="random", seed=9)
    ds.set_epoch(1)
    return ids(DataLoader(ds, batch_size=None, num_workers=0))


@pytest.mark.parametrize("workers,resume_workers", [(2, 2), (2, 0), (0, 3)])
def test_kill_then_resume_yields_exactly_the_rest(cache, tmp_path, workers, resume_workers):
    ck = run_until_killed(cache, tmp_path, workers)
    assert len(ck["seen"]) == 14 * 20
    ds = IterableDataset(cache, batch_size=20, order="random", seed=9)
    loader = StatefulDataLoader(ds, batch_size=None, num_workers=resume_workers)
    if resume_workers == workers:
        loader.load_state_dict(ck["state"])
    else:
        # Another number of workers: the rank's position, then a fresh loader.
        ds.load_state_dict(rank_state(ck["state"]))
    rest = ids(loader)
    whole = uninterrupted(cache)
    assert ck["seen"] + rest == whole
    assert sorted(whole) == list(range(N))


def test_resume_after_the_world_size_changes(cache):
    # Two ranks read 6 steps each, then the job restarts on one rank.
    states, seen = [], []
    for rank in range(2):
        ds = IterableDataset(cache, batch_size=25, seed=4, rank=rank, world_size=2)
        it = iter(ds)
        for _ in range(6):
            seen += next(it)["x"].tolist()
        states.append(ds.state_dict())
    assert states[0]["done"] == states[1]["done"] == 0 and states[0]["next"] == 6
    one = IterableDataset(cache, batch_size=25, seed=4, rank=0, world_size=1)
    one.load_state_dict(rank_state({"dataset_state": states[0]}))
    rest = ids(iter(one))
    assert len(seen) == 12 * 25 and sorted(seen + rest) == list(range(N))


def test_set_epoch_reaches_persistent_workers(cache):
    ds = IterableDataset(cache, batch_size=50, order="random", seed=2)
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
    epochs = []
    for e in range(3):
        ds.set_epoch(e)
        epochs.append(ids(loader))
    for e, got in enumerate(epochs):
        ref = IterableDataset(cache, batch_size=50, order="random", seed=2)
        ref.set_epoch(e)
        assert got == ids(DataLoader(ref, batch_size=None, num_workers=2)), e
        assert sorted(got) == list(range(N))
    assert epochs[0] != epochs[1] != epochs[2]


def test_no_shared_memory_files_are_left_behind(cache):
    import gc
    import time
    before = set(os.listdir("/dev/shm"))
    ds = IterableDataset(cache, batch_size=50)
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
    for _ in loader:
        pass
    m = MapDataset(cache)
    spawned = DataLoader(m, batch_size=64, num_workers=2, multiprocessing_context="spawn")
    for _ in spawned:
        pass
    # The input pipeline inside workers: one shared-memory block a batch.
    piped = DataLoader(Loader(cache, batch_size=50), batch_size=None, num_workers=2)
    for _ in piped:
        pass
    del loader, spawned, piped
    gc.collect()
    # The DataLoader's own queues (named semaphores under a spawn context)
    # are unlinked by multiprocessing's resource tracker, a separate process:
    # give it until nothing is left, for at most 30 s.
    extra = set(os.listdir("/dev/shm")) - before
    for _ in range(300):
        if not extra:
            break
        time.sleep(0.1)
        extra = set(os.listdir("/dev/shm")) - before
    assert extra == set()


def test_the_training_example_resumes_exactly(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, os.path.join(root, "examples", "train_torch.py"),
                          str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "resumed run read the same 1280 rows and reached the same weights" in out.stdout


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_frames_windows_decode_in_workers_after_the_parent_decoded(tmp_path, method):
    # The parent decodes first (its read pool and Lance runtime start), then
    # workers decode: a forked child must build its own, not wait forever
    # on the parent's threads, which it does not have.
    from conftest import GOLDEN
    clip = os.path.join(GOLDEN, "sources", "clip_a.mp4")
    feats = shardset.Features({"video": shardset.Video(storage="frames")})
    shardset.write_cache([("a", {"video": clip}), ("b", {"video": clip})], feats,
                         tmp_path / "v", format="video-frames")
    ds = MapDataset(tmp_path / "v", window=4)
    first = ds[0]["video"]
    assert first.shape == (4, 48, 64, 3)
    loader = DataLoader(ds, batch_size=6, num_workers=2, multiprocessing_context=method,
                        timeout=120)
    got = [b for b in loader]
    assert sum(len(b["video"]) for b in got) == len(ds) == 2 * (24 - 3)
    assert torch.equal(got[0]["video"][0], torch.from_numpy(first))


class _RssMap(MapDataset):
    """MapDataset whose batches also carry the worker's resident set size."""

    def __getitems__(self, indices):
        rows = super().__getitems__(indices)
        with open("/proc/self/status") as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        wid = torch.utils.data.get_worker_info().id
        for r in rows:
            r["rss_kb"], r["worker"] = rss, wid
        return rows


def test_worker_memory_does_not_grow_over_epochs(tmp_path):
    # Peers that keep index lists as Python objects in the dataset see each
    # worker's RSS grow as reference counts touch (and copy) their pages.
    # The dataset here keeps nothing but a path; orders live in Rust.
    n = 200_000
    shardset.write_cache(({"x": i} for i in range(n)), {"x": Value("int64")}, tmp_path / "c")
    ds = _RssMap(tmp_path / "c")
    loader = DataLoader(ds, batch_size=256, shuffle=True, num_workers=2, persistent_workers=True,
                        multiprocessing_context="fork")
    rss = []
    for epoch in range(3):
        first, last, seen = {}, {}, 0
        for b in loader:
            for w, r in zip(b["worker"].tolist(), b["rss_kb"].tolist()):
                first.setdefault(w, r)
                last[w] = r
            seen += len(b["x"])
        assert seen == n
        rss.append((first, last))
    # From the end of the first epoch to the end of the third, per worker.
    for w in (0, 1):
        grew = rss[2][1][w] - rss[0][1][w]
        assert grew < 16 * 1024, f"worker {w} grew {grew} KiB over two epochs"
