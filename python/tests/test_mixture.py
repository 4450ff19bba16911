"""Mixtures from Python: shares follow the weights, a state saved at any
step (weight changes included) continues the same sequence, also pickled
and in DataLoader workers, and StatefulDataLoader checkpoints resume
exactly with another number of workers; columns are checked by name."""

import itertools
import pickle

import pytest
import torch
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

import shardset
from shardset import ClassLabel, Features, Value
from shardset.torch import MixtureDataset, rank_state

FEATURES = Features({"id": Value("int64"), "label": ClassLabel(names=["a", "b"])})
SIZES = [40, 100, 25]


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    paths = []
    for s, n in enumerate(SIZES):
        p = str(root / f"s{s}")
        fmt = "lance" if s == 1 else "arrow"
        shardset.write_cache(({"id": s * 1000 + i, "label": i % 2} for i in range(n)),
                             FEATURES, p, format=fmt)
        paths.append(p)
    return paths


def mix(caches, **kw):
    kw.setdefault("batch_size", 10)
    kw.setdefault("seed", 3)
    return shardset.Mixture([(p, w) for p, w in zip(caches, [2.0, 1.0, 1.0])], **kw)


def ids(batches, n=None):
    """The ids of the first `n` batches (all without `n`), pulling no more."""
    return [[int(x) for x in b["id"]] for b in itertools.islice(batches, n)]


def test_shares_follow_the_weights_and_rows_come_in_epochs(caches):
    got = ids(mix(caches), 300)
    flat = [i for b in got for i in b]
    assert all(len(b) == 10 for b in got)
    for s, (n, share) in enumerate(zip(SIZES, [0.5, 0.25, 0.25])):
        rows = [i % 1000 for i in flat if i // 1000 == s]
        assert abs(len(rows) / len(flat) - share) < 0.04, s
        assert sorted(rows[:n]) == list(range(n)), f"source {s}: its first epoch, each row once"


def test_a_state_continues_the_same_sequence_after_a_weight_change(caches):
    m = mix(caches)
    m.set_weights(20, [0.0, 0.0, 1.0])
    whole = ids(m, 40)
    assert all(i // 1000 == 2 for b in whole[20:] for i in b)
    for stop in (0, 7, 20, 33):
        a = mix(caches)
        a.set_weights(20, [0.0, 0.0, 1.0])
        head = ids(a, stop)
        state = a.state_dict()
        b = mix(caches)
        b.load_state_dict(state)
        assert head + ids(b, 40 - stop) == whole, stop
        c = pickle.loads(pickle.dumps(a))
        assert ids(c, 40 - stop) == whole[stop:], f"pickled at {stop}"
    with pytest.raises(shardset.BadInputError, match="consumed"):
        a.set_weights(1, [1.0, 1.0, 1.0])
    progress = mix(caches).progress()
    assert [p["rows_consumed"] for p in progress] == [0, 0, 0]


def test_exhausted_sources_give_every_row_once(caches):
    m = mix(caches, end="exhaust", draw="batch")
    flat = sorted(i for b in ids(m) for i in b)
    want = sorted(s * 1000 + i for s, n in enumerate(SIZES) for i in range(n))
    assert flat == want
    assert all(p["exhausted"] for p in m.progress())


def test_dataloader_workers_yield_the_single_process_sequence(caches):
    whole = ids(MixtureDataset(mix(caches)), 30)
    loader = DataLoader(MixtureDataset(mix(caches)), batch_size=None, num_workers=2,
                        multiprocessing_context="fork")
    assert ids(loader, 30) == whole


@pytest.mark.parametrize("workers,resume_workers", [(2, 2), (2, 0), (0, 3)])
def test_a_stateful_dataloader_checkpoint_resumes_exactly(caches, workers, resume_workers):
    whole = ids(MixtureDataset(mix(caches)), 40)
    loader = StatefulDataLoader(MixtureDataset(mix(caches)), batch_size=None,
                                num_workers=workers)
    head, state = [], None
    for k, b in enumerate(loader):
        head.append([int(x) for x in b["id"]])
        if k == 12:
            state = loader.state_dict()
            break
    ds = MixtureDataset(mix(caches))
    resumed = StatefulDataLoader(ds, batch_size=None, num_workers=resume_workers)
    if resume_workers == workers:
        resumed.load_state_dict(state)
    else:
        ds.load_state_dict(rank_state(state))
    assert head + ids(resumed, 40 - len(head)) == whole


def test_columns_that_differ_name_the_source(caches, tmp_path):
    other = str(tmp_path / "other")
    shardset.write_cache(({"id": i, "label": "x"} for i in range(5)),
                         Features({"id": Value("int64"), "label": Value("string")}), other)
    with pytest.raises(shardset.BadInputError, match="label") as e:
        shardset.Mixture([(caches[0], 1.0), (other, 1.0)], names=["main", "other"])
    assert "'main'" in str(e.value) and "'other'" in str(e.value)
    m = shardset.Mixture([(caches[0], 1.0), (other, 1.0)], columns=[None, {"id": "id"}])
    assert m.column_names == ["id"]
    with pytest.raises(shardset.BadInputError, match="nope"):
        shardset.Mixture([(caches[0], 1.0), (other, 1.0)], columns=[None, {"id": "nope"}])
    assert torch.is_tensor(next(iter(MixtureDataset(m)))["id"])


def test_the_loader_reads_a_mixture_on_the_librarys_threads_and_resumes(caches):
    from shardset.torch import Loader
    whole = ids(mix(caches), 25)
    for threads in (1, 2):
        got = [[int(x) for x in b["id"]] for b in itertools.islice(Loader(mix(caches),
                                                                          threads=threads), 25)]
        assert got == whole, threads
    loader = Loader(mix(caches), threads=2)
    head = [[int(x) for x in b["id"]] for b in itertools.islice(loader, 9)]
    state = loader.state_dict()
    again = Loader(mix(caches), threads=1)
    again.load_state_dict(state)
    rest = [[int(x) for x in b["id"]] for b in itertools.islice(again, 16)]
    assert head + rest == whole
    with pytest.raises(TypeError, match="no length"):
        len(again)
    with pytest.raises(shardset.BadInputError, match="batch size"):
        Loader(mix(caches), batch_size=7)
    again.set_weights(again.state_dict()["base"]["step"] + 100, [0.0, 1.0, 0.0])
