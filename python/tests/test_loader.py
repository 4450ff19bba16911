"""shardset.torch.Loader, the input pipeline: batches as tensors made by the
library's threads; the same batches at any thread count; every row once
across ranks and DataLoader workers; exact resume (another thread count,
world size, StatefulDataLoader); no thread left when a loop stops early;
bad requests refused by name before the first batch."""

import gc
import weakref
import bisect
import itertools
import json
import os
import pickle
import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

import shardset
from shardset import ClassLabel, Value
from shardset.torch import Loader

N = 1000


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("loader") / "c"
    shardset.write_cache(
        ({"x": i, "y": float(i) / 2, "label": i % 3, "name": str(i)} for i in range(N)),
        {"x": Value("int64"), "y": Value("float32"), "label": ClassLabel(names=["a", "b", "c"]),
         "name": Value("string")}, d, shard_size=2048, batch_size=50)
    return str(d)


def ids(batches):
    return [x for b in batches for x in b["x"].tolist()]


def test_batches_are_tensors_of_the_columns_types(cache):
    loader = Loader(cache, batch_size=64, threads=2, remainder="partial")
    assert loader.columns_out == ["x", "y", "label"], "strings make no tensor: left out"
    batches = list(loader)
    assert len(batches) == len(loader) == 16
    b = batches[0]
    assert (b["x"].dtype, b["y"].dtype, b["label"].dtype) == (torch.int64, torch.float32,
                                                               torch.int64)
    assert torch.equal(b["y"], b["x"].float() / 2) and torch.equal(b["label"], b["x"] % 3)
    assert sorted(ids(batches)) == list(range(N))


def test_a_batch_outlives_its_loader_and_its_buffers_are_used_again(cache):
    # Each tensor owns the library's buffer (a DLPack capsule): it stays
    # valid after the loader is gone, and a freed batch's buffer is written
    # over by a later one (the pipeline's pool), not leaked.
    loader = Loader(cache, batch_size=100, threads=1, prefetch=1, remainder="partial")
    kept = next(iter(loader))
    want = kept["x"].clone()
    assert kept["x"].is_contiguous() and not kept["x"].requires_grad
    addresses = set()
    for b in loader:
        # x and label have the same size: their buffers swap between batches.
        addresses |= {b["x"].data_ptr(), b["label"].data_ptr()}
        del b
    del loader
    gc.collect()
    assert torch.equal(kept["x"], want) and torch.equal(kept["y"], want.float() / 2)
    assert kept["x"].data_ptr() not in addresses
    # 9 batches (18 buffers) through at most 1 thread + 1 prefetched + the
    # one in hand, each with 2 such buffers.
    assert len(addresses) <= 6, addresses


def test_the_loader_keeps_no_batch_it_handed_over(cache):
    # A batch the loop drops is freed at once, so its buffers go back to the
    # pool before the next batch is made (a generator between the loop and
    # the pipeline kept the last batch until the next one). With map_batch
    # the batch goes through the user's step and is likewise not kept.
    for step in (None, lambda b: b):
        loader = Loader(cache, batch_size=100, threads=1, prefetch=1, map_batch=step)
        it = iter(loader)
        b = next(it)
        if step is None:
            assert it is loader._pipeline()
        gone = weakref.ref(b["x"])
        del b
        assert gone() is None
        next(it)


def test_every_element_type_crosses_with_its_own_dtype(tmp_path):
    # Each column is a DLPack tensor of the column's type: bool, half and
    # unsigned types too (numpy's route had no bfloat16, DLPack has them all).
    d = str(tmp_path / "c")
    types = {"b": ("bool", torch.bool), "h": ("float16", torch.float16),
             "u16": ("uint16", torch.uint16), "i8": ("int8", torch.int8),
             "u64": ("uint64", torch.uint64), "f64": ("float64", torch.float64)}
    shardset.write_cache(({"b": i % 2 == 0, "h": float(i), "u16": i, "i8": i - 50, "u64": i,
                           "f64": i / 4} for i in range(100)),
                         {k: Value(t) for k, (t, _) in types.items()}, d)
    batch = next(iter(Loader(d, batch_size=10, threads=1, order="sequential")))
    for k, (_, dtype) in types.items():
        assert batch[k].dtype == dtype, k
    assert batch["b"].tolist() == [i % 2 == 0 for i in range(10)]
    assert batch["h"].tolist() == [float(i) for i in range(10)]
    assert batch["u16"].tolist() == batch["u64"].tolist() == list(range(10))
    assert batch["i8"].tolist() == [i - 50 for i in range(10)]
    assert batch["f64"].tolist() == [i / 4 for i in range(10)]


def test_the_same_seed_gives_the_same_batches_at_any_thread_count(cache):
    runs = [ids(Loader(cache, batch_size=50, seed=4, threads=t)) for t in (1, 2, 4)]
    assert runs[0] == runs[1] == runs[2]
    assert ids(Loader(cache, batch_size=50, seed=5, threads=2)) != runs[0]


def test_every_row_once_across_ranks(cache):
    seen = []
    for rank in range(3):
        seen += ids(Loader(cache, batch_size=32, rank=rank, world_size=3, remainder="partial"))
    assert sorted(seen) == list(range(N))


def test_iteration_goes_on_from_where_the_loader_stands(cache):
    loader = Loader(cache, batch_size=100, seed=1)
    e0 = ids(loader)
    e1 = ids(loader)
    assert sorted(e0) == sorted(e1) == list(range(N)) and e0 != e1
    loader.set_epoch(0)
    it = iter(loader)
    head = ids([next(it), next(it)])
    del it
    assert head + ids(loader) == e0, "after a break, the rest of the epoch"


@pytest.mark.parametrize("threads,world", [(1, 1), (3, 1), (2, 2)])
def test_a_resume_yields_exactly_the_rest(cache, threads, world):
    full = ids(Loader(cache, batch_size=40, seed=2, threads=2, remainder="partial"))
    loader = Loader(cache, batch_size=40, seed=2, threads=2, remainder="partial")
    it = iter(loader)
    head = ids([next(it) for _ in range(7)])
    state = json.loads(json.dumps(loader.state_dict()))
    del it, loader
    rest = []
    for rank in range(world):
        again = Loader(cache, batch_size=40, seed=2, threads=threads, rank=rank,
                       world_size=world, remainder="partial")
        again.load_state_dict(state)
        rest += ids(again)
    if world == 1:
        assert head + rest == full
    else:
        assert sorted(head + rest) == sorted(full), "every row once after a world change"


def test_a_block_shuffle_is_one_order_at_any_thread_count_and_resumes_exactly(cache):
    def loader(**kw):
        return Loader(cache, batch_size=16, seed=2, order="block-shuffle:64",
                      remainder="partial", **kw)
    runs = [ids(loader(threads=t)) for t in (1, 2, 4)]
    assert runs[0] == runs[1] == runs[2] and sorted(runs[0]) == list(range(N))
    assert runs[0] != ids(Loader(cache, batch_size=16, seed=2, order="shard-shuffle",
                                 remainder="partial"))
    # Each shard's rows cut into blocks of 64 from its start: a block's
    # rows are read together, once.
    starts = list(itertools.accumulate(shardset.open_cache(cache).shard_row_counts, initial=0))
    block = [(s, (i - starts[s]) // 64) for i in runs[0]
             for s in [bisect.bisect_right(starts, i) - 1]]
    runs_of_blocks = [k for k, _ in itertools.groupby(block)]
    assert len(runs_of_blocks) == len(set(block)) > len(starts) - 1
    it = iter(first := loader(threads=2))
    head = ids([next(it) for _ in range(5)])
    state = json.loads(json.dumps(first.state_dict()))
    again = loader(threads=1)
    again.load_state_dict(state)
    assert head + ids(again) == runs[0]
    for bad in ("block-shuffle:0", "block-shuffle", "block-shuffle:064"):
        with pytest.raises(shardset.BadInputError, match="block-shuffle:"):
            Loader(cache, batch_size=16, order=bad)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_in_dataloader_workers_every_row_once(cache, method):
    loader = Loader(cache, batch_size=25, seed=3, remainder="partial")
    next(iter(loader))  # the parent's threads ran before the workers start
    loader.set_epoch(0)
    got = ids(DataLoader(loader, batch_size=None, num_workers=2, multiprocessing_context=method))
    assert sorted(got) == list(range(N))


def test_stateful_dataloader_resumes_exactly(cache):
    def make():
        return StatefulDataLoader(Loader(cache, batch_size=20, seed=6), batch_size=None,
                                  num_workers=2)
    full = ids(make())
    dl = make()
    it = iter(dl)
    head = ids([next(it) for _ in range(9)])
    state = pickle.loads(pickle.dumps(dl.state_dict()))
    del it, dl
    dl = make()
    dl.load_state_dict(state)
    assert head + ids(dl) == full


def pipeline_threads():
    n = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                n += f.read().startswith("shardset-pipel")
        except FileNotFoundError:
            pass
    return n


def test_a_loop_that_stops_early_leaves_no_thread(cache):
    loader = Loader(cache, batch_size=10, threads=3)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    assert pipeline_threads() > 0, "the loader's threads wait for the rest of the epoch"
    del loader
    gc.collect()
    assert pipeline_threads() == 0


STATE_WHILE_ITERATING = """
import sys, threading
from shardset.torch import Loader
loader = Loader(sys.argv[1], batch_size=10, threads=1, prefetch=1, remainder="partial")
done = threading.Event()
states = []
def checkpoint():
    while not done.is_set():
        states.append(loader.state_dict())
t = threading.Thread(target=checkpoint)
t.start()
rows = 0
for epoch in range(20):
    rows += sum(len(b["x"]) for b in loader)
done.set()
t.join()
print(rows, len(states))
"""


def test_a_state_dict_from_another_thread_while_iterating_does_not_hang(cache):
    # A thread in __next__ waits for a batch holding the pipeline's lock
    # with the GIL released, and lets the lock go before it takes the GIL
    # back; a thread that asks for the state takes the lock with the GIL
    # held. Were the lock kept until the GIL is back, the two would wait
    # for each other for ever. In a process of its own, so a hang fails the
    # test instead of the suite.
    out = subprocess.run([sys.executable, "-c", STATE_WHILE_ITERATING, cache],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows, states = map(int, out.stdout.split())
    assert rows == 20 * N and states > 0


def test_map_batch_runs_on_whole_batches(cache):
    loader = Loader(cache, batch_size=100, map_batch=lambda b: b["x"].sum().item())
    assert sum(loader) == N * (N - 1) // 2


def test_bad_requests_are_refused_by_name(cache):
    with pytest.raises(shardset.BadInputError, match="threads"):
        Loader(cache, threads=0)
    with pytest.raises(shardset.BadInputError, match="'name'.*strings"):
        Loader(cache, columns=["x", "name"])
    with pytest.raises(shardset.BadInputError, match="'x'.*not an image"):
        Loader(cache, ops={"x": [shardset.ops.CenterCrop(4)]})
    with pytest.raises(shardset.BadInputError, match="layout"):
        Loader(cache, layout="WHC")
