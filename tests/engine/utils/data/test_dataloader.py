"""Data loading: datasets, samplers, default_collate, DataLoader batching, shuffling, resuming and workers."""

import collections

import numpy as np
import pytest
import torch

import engine
from engine.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    get_worker_info,
    random_split,
)


def _ds(n=10):
    return TensorDataset(engine.arange(n * 2, dtype=engine.float32).reshape(n, 2), engine.arange(n))


def _labels(loader):
    return [b[1].tolist() for b in loader]


class Squares(Dataset):
    def __init__(self, n=9):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == 7 and getattr(self, "fail", False):
            raise ValueError("bad sample 7")
        return {"x": np.full(2, i, dtype=np.float32), "y": i * i, "name": f"s{i}"}


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))

    def __len__(self):
        return self.n


def test_batches_cover_the_dataset_in_order_with_a_short_last_batch():
    batches = list(DataLoader(_ds(), batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert (
        isinstance(batches[0], list)
        and batches[0][0].shape == (4, 2)
        and batches[0][0].dtype is engine.float32
    )
    assert len(DataLoader(_ds(), batch_size=4)) == 3


def test_drop_last_drops_the_short_batch():
    loader = DataLoader(_ds(), batch_size=4, drop_last=True)
    assert _labels(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]] and len(loader) == 2


def test_shuffle_with_a_seeded_generator_is_reproducible_and_differs_per_epoch():
    a = DataLoader(_ds(), batch_size=3, shuffle=True, generator=engine.Generator().manual_seed(5))
    b = DataLoader(_ds(), batch_size=3, shuffle=True, generator=engine.Generator().manual_seed(5))
    e1, e2 = _labels(a), _labels(a)
    assert e1 == _labels(b) and e2 == _labels(b)
    assert e1 != e2
    assert sorted(sum(e1, [])) == list(range(10))


def test_shuffle_without_generator_follows_the_global_seed():
    engine.manual_seed(3)
    first = _labels(DataLoader(_ds(), batch_size=5, shuffle=True))
    engine.manual_seed(3)
    assert _labels(DataLoader(_ds(), batch_size=5, shuffle=True)) == first


def test_fast_tensor_path_equals_per_sample_collation():
    ds = _ds(12)
    sub = Subset(ds, [11, 3, 5, 0, 7, 2])
    fast = list(DataLoader(sub, batch_size=4))
    slow = list(DataLoader(sub, batch_size=4, collate_fn=default_collate))
    for f, s in zip(fast, slow):
        for a, b in zip(f, s):
            assert a.dtype is b.dtype and np.array_equal(a.numpy(), b.numpy())
    assert fast[0][1].tolist() == [11, 3, 5, 0]


def test_default_collate_matches_torch_for_dicts_tuples_numbers_and_strings():
    Point = collections.namedtuple("Point", "a b")
    batch = [
        {
            "x": np.ones(2, np.float32) * i,
            "f": 0.5 * i,
            "i": i,
            "t": (i, "s"),
            "p": Point(i, 1.0),
            "s": str(i),
        }
        for i in range(3)
    ]
    ours = default_collate(batch)
    theirs = torch.utils.data.default_collate(batch)
    assert ours["x"].dtype is engine.float32 and ours["x"].shape == (3, 2)
    assert ours["f"].dtype is engine.float64 and str(theirs["f"].dtype) == "torch.float64"
    assert ours["i"].dtype is engine.int64 and ours["i"].tolist() == theirs["i"].tolist()
    assert (
        isinstance(ours["t"], list) and ours["t"][0].tolist() == [0, 1, 2] and ours["t"][1] == ["s", "s", "s"]
    )
    assert isinstance(ours["p"], Point) and ours["p"].b.dtype is engine.float64
    assert ours["s"] == theirs["s"] == ["0", "1", "2"]
    assert default_collate([True, False]).dtype is engine.bool


def test_default_collate_rejects_ragged_tensors_and_unknown_types():
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([engine.zeros(2), engine.zeros(3)])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([object(), object()])


def test_map_dataset_of_dicts_batches_through_default_collate():
    b = next(iter(DataLoader(Squares(), batch_size=4)))
    assert (
        b["x"].shape == (4, 2) and b["y"].tolist() == [0, 1, 4, 9] and b["name"] == ["s0", "s1", "s2", "s3"]
    )


def test_batch_size_none_disables_batching_and_converts_numpy():
    item = next(iter(DataLoader(Squares(), batch_size=None)))
    assert isinstance(item["x"], engine.Tensor) and item["y"] == 0


def test_concat_subset_and_random_split():
    ds = ConcatDataset([_ds(3), _ds(4)])
    assert len(ds) == 7 and ds[3][1].item() == 0 and ds[-1][1].item() == 3
    parts = random_split(_ds(10), [0.7, 0.3], generator=engine.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [7, 3]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    again = random_split(_ds(10), [7, 3], generator=engine.Generator().manual_seed(1))
    assert again[0].indices == parts[0].indices
    assert [len(p) for p in random_split(_ds(10), [0.33, 0.33, 0.34])] == [4, 3, 3]
    with pytest.raises(ValueError, match="does not equal the length"):
        random_split(_ds(10), [3, 3])


def test_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    g = engine.Generator().manual_seed(0)
    perm = list(RandomSampler(range(6), generator=g))
    assert sorted(perm) == list(range(6))
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=50, generator=g))
    assert len(drawn) == 50 and set(drawn) <= {0, 1, 2}
    assert sorted(SubsetRandomSampler([10, 20, 30], generator=g)) == [10, 20, 30]
    w = list(WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 100, generator=g))
    assert set(w) == {1, 3} and w.count(3) > w.count(1)
    assert list(BatchSampler(range(5), 2, drop_last=False)) == [[0, 1], [2, 3], [4]]
    assert len(BatchSampler(range(5), 2, drop_last=True)) == 2


def test_invalid_option_combinations_raise():
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(_ds(), sampler=SequentialSampler(_ds()), shuffle=True)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(_ds(), prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers"):
        DataLoader(_ds(), persistent_workers=True)
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(Stream(4), shuffle=True)


def test_resume_mid_epoch_replays_the_rest_of_the_epoch_and_leaves_the_rng_alone():
    engine.manual_seed(11)
    loader = DataLoader(_ds(), batch_size=3, shuffle=True)
    it = iter(loader)
    seen = [next(it)[1].tolist() for _ in range(2)]
    state = loader.state_dict()
    rng = engine.get_rng_state()
    rest = [b[1].tolist() for b in it]
    after = engine.rand(3).tolist()

    resumed = DataLoader(_ds(), batch_size=3, shuffle=True)
    engine.manual_seed(999)  # a fresh process
    engine.set_rng_state(rng)
    resumed.load_state_dict(state)
    assert [b[1].tolist() for b in resumed] == rest
    assert engine.rand(3).tolist() == after
    assert state["batches_yielded"] == 2 and seen


def test_workers_give_the_same_batches_as_the_main_process():
    g = lambda: engine.Generator().manual_seed(4)  # noqa: E731
    ref = [b for b in DataLoader(Squares(), batch_size=2, shuffle=True, generator=g())]
    got = [b for b in DataLoader(Squares(), batch_size=2, shuffle=True, generator=g(), num_workers=2)]
    assert [b["y"].tolist() for b in got] == [b["y"].tolist() for b in ref]
    assert [b["name"] for b in got] == [b["name"] for b in ref]
    fast = [b[1].tolist() for b in DataLoader(_ds(), batch_size=4, num_workers=2, prefetch_factor=1)]
    assert fast == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_worker_exception_is_reraised_naming_the_worker():
    ds = Squares()
    ds.fail = True
    with pytest.raises(
        ValueError, match=r"Caught ValueError in DataLoader worker process \d[\s\S]*bad sample 7"
    ):
        list(DataLoader(ds, batch_size=2, num_workers=2))


def test_persistent_workers_serve_several_epochs_and_know_their_worker_info():
    def ids(_):
        info = get_worker_info()
        return engine.tensor([info.id, info.num_workers])

    loader = DataLoader(Squares(6), batch_size=None, num_workers=2, persistent_workers=True, collate_fn=ids)
    first = [b.tolist() for b in loader]
    procs = list(loader._workers._procs)
    second = [b.tolist() for b in loader]
    assert first == second == [[0, 2], [1, 2]] * 3
    assert loader._workers._procs == procs and all(p.is_alive() for p in procs)
    loader._workers._shutdown()
    assert not any(p.is_alive() for p in procs)
    assert get_worker_info() is None


def test_iterable_dataset_sharded_across_workers():
    single = sorted(sum(_as_lists(DataLoader(Stream(7), batch_size=2)), []))
    multi = sorted(sum(_as_lists(DataLoader(Stream(7), batch_size=2, num_workers=2)), []))
    assert single == multi == list(range(7))


def _as_lists(loader):
    return [b.tolist() for b in loader]


def test_spawned_workers_receive_tensor_datasets():
    loader = DataLoader(_ds(6), batch_size=4, num_workers=1, multiprocessing_context="spawn")
    assert [b[1].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5]]
