"""Samplers and the DataLoader draw indices lazily, as torch's do: an "infinite" loader
(RandomSampler(replacement=True, num_samples=10**10)) starts at once in bounded memory, len() materialises
nothing, and a resumed epoch keeps drawing the saved epoch's stream.

The engine's CPU generator is NumPy's PCG64 and torch's is MT19937, so no random index sequence can equal
torch's under the same seed; what is compared with torch is everything deterministic (SequentialSampler,
BatchSampler, len), the algorithm (each library's sampler equals torch's recipe written against that
library's own randint/randperm) and how much of the global stream a sampler consumes."""

import itertools
import math
import tracemalloc

import numpy as np
import pytest
import torch

import engine
from engine.utils.data import (
    DataLoader,
    RandomSampler,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
)

LIBS = pytest.mark.parametrize("T", [torch, engine], ids=["torch", "engine"])
HUGE = 10**10  # 80 GB of int64 indices if drawn up front


def _ds(n=1000):
    return TensorDataset(engine.arange(n))


def _first_batches(loader, k):
    """(the first k batches' indices, peak bytes traced) from iter(loader): memory, never wall-clock time, is
    what shows an up-front draw (10**10 int64 indices are 80 GB)."""
    tracemalloc.start()
    try:
        it = iter(loader)
        batches = [next(it)[0].tolist() for _ in range(k)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return batches, peak


# ---------------------------------------------------------------- bounded memory, quick start, len()


def test_infinite_loader_with_replacement_starts_at_once_in_bounded_memory():
    ds = _ds()
    g = engine.Generator().manual_seed(0)
    sampler = RandomSampler(ds, replacement=True, num_samples=HUGE, generator=g)
    loader = DataLoader(ds, sampler=sampler, batch_size=64)
    batches, peak = _first_batches(loader, 50)
    assert peak < 10 * 2**20, peak
    assert all(len(b) == 64 and 0 <= min(b) and max(b) < 1000 for b in batches)
    assert len(sampler) == HUGE and len(loader) == math.ceil(HUGE / 64)
    assert len(DataLoader(ds, sampler=sampler, batch_size=64, drop_last=True)) == HUGE // 64


def test_long_epoch_without_replacement_draws_one_permutation_per_pass():
    ds = _ds()
    n_samples = 10**8
    sampler = RandomSampler(ds, num_samples=n_samples, generator=engine.Generator().manual_seed(1))
    loader = DataLoader(ds, sampler=sampler, batch_size=100)
    batches, peak = _first_batches(loader, 30)  # three passes over the 1000 items
    assert peak < 10 * 2**20, peak
    flat = sum(batches, [])
    for p in range(3):
        assert sorted(flat[p * 1000 : (p + 1) * 1000]) == list(range(1000))
    assert len(loader) == n_samples // 100 and len(sampler) == n_samples


def test_infinite_weighted_sampler_is_lazy_and_never_draws_a_zero_weight():
    w = WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], HUGE, generator=engine.Generator().manual_seed(2))
    tracemalloc.start()
    try:
        drawn = list(itertools.islice(w, 40_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20, peak
    assert set(drawn) == {1, 3} and len(w) == HUGE
    assert abs(drawn.count(3) / len(drawn) - 0.75) < 0.02  # about 9 standard deviations


def test_a_pass_over_a_large_dataset_holds_the_permutation_not_a_list_of_it():
    n = 2 * 10**6
    for sampler in (
        RandomSampler(range(n), generator=engine.Generator().manual_seed(3)),
        SubsetRandomSampler(range(n), generator=engine.Generator().manual_seed(3)),
    ):
        tracemalloc.start()
        try:
            first = list(itertools.islice(iter(sampler), 10))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        # the int64 permutation is 16 MB, 32 with the copy Generator.permutation makes; turning all of it
        # into a list of Python ints (as before) peaked at 112 MB, 161 for SubsetRandomSampler
        assert peak < 3 * 8 * n, (type(sampler).__name__, peak)
        assert len(set(first)) == 10 and len(sampler) == n


# ---------------------------------------------------------------- lazy: iter() draws nothing


def _state(gen):
    return gen.get_state().tolist()


@LIBS
def test_iter_draws_nothing_and_next_draws_32_at_a_time_with_replacement(T):
    g = T.Generator().manual_seed(4)
    before = _state(g)
    it = iter(T.utils.data.RandomSampler(range(10), replacement=True, num_samples=100, generator=g))
    assert _state(g) == before
    drawn = [next(it) for _ in range(33)]  # two chunks of 32 drawn
    ref = T.Generator().manual_seed(4)
    chunks = [T.randint(0, 10, (32,), generator=ref).tolist() for _ in range(2)]
    assert drawn == sum(chunks, [])[:33] and _state(g) == _state(ref)


@LIBS
def test_samplers_follow_torchs_recipe_on_each_librarys_own_generator(T):
    d = T.utils.data
    g, ref = T.Generator().manual_seed(5), T.Generator().manual_seed(5)
    # with replacement: num_samples // 32 randint calls of 32, then one for the remainder
    got = list(d.RandomSampler(range(7), replacement=True, num_samples=70, generator=g))
    want = sum([T.randint(0, 7, (32,), generator=ref).tolist() for _ in range(2)], [])
    want += T.randint(0, 7, (6,), generator=ref).tolist()
    assert got == want
    # without replacement: a whole randperm per pass, then the head of one more
    got = list(d.RandomSampler(range(7), num_samples=17, generator=g))
    want = T.randperm(7, generator=ref).tolist() + T.randperm(7, generator=ref).tolist()
    want += T.randperm(7, generator=ref).tolist()[:3]
    assert got == want
    # SubsetRandomSampler: the indices in the order of one randperm
    idx = [10, 20, 30, 40, 50]
    assert list(d.SubsetRandomSampler(idx, generator=g)) == [
        idx[i] for i in T.randperm(5, generator=ref).tolist()
    ]
    assert _state(g) == _state(ref)


def test_with_replacement_the_engine_stream_is_the_same_in_chunks_as_in_one_draw():
    for n in (3, 1000, 2**31 + 1, 2**33 + 7):  # small ranges and ranges with many rejections
        got = list(RandomSampler(range(n), replacement=True, num_samples=1000,
                                 generator=engine.Generator().manual_seed(6)))
        assert got == engine.randint(0, n, (1000,), generator=engine.Generator().manual_seed(6)).tolist()


def test_weighted_sampler_with_a_generator_draws_numpys_choice_stream_in_chunks():
    w = [0.2, 1.0, 0.0, 3.0, 0.5]
    got = list(WeightedRandomSampler(w, 1001, generator=engine.Generator().manual_seed(7)))
    p = np.asarray(w) / sum(w)
    want = engine.Generator().manual_seed(7)._np.choice(5, size=1001, replace=True, p=p).tolist()
    assert got == want
    g = engine.Generator().manual_seed(7)
    no_repl = list(WeightedRandomSampler(w, 4, replacement=False, generator=g))
    assert len(set(no_repl)) == 4 and 2 not in no_repl


@LIBS
@pytest.mark.parametrize(
    "make",
    [
        lambda d: d.RandomSampler(range(9)),
        lambda d: d.RandomSampler(range(9), replacement=True, num_samples=1000),
        lambda d: d.RandomSampler(range(9), num_samples=100),
        lambda d: d.WeightedRandomSampler([1.0, 2.0, 3.0], 1000),
    ],
    ids=["permutation", "replacement", "passes", "weighted"],
)
def test_without_a_generator_an_epoch_takes_one_draw_from_the_global_stream(T, make):
    """RandomSampler, in both libraries: one global draw at the first next() seeds a private generator that
    draws the rest. torch's WeightedRandomSampler draws its whole epoch with one global multinomial call;
    the engine's, lazy, seeds a private generator like RandomSampler. Either way: one draw, at next()."""
    sampler = make(T.utils.data)
    T.manual_seed(8)
    it = iter(sampler)
    untouched = _state(T.default_generator)
    next(it)
    after_first = _state(T.default_generator)
    list(it)
    assert _state(T.default_generator) == after_first != untouched
    T.manual_seed(8)
    if T is engine:
        engine.randint(0, 2**63 - 1, ())
    elif isinstance(sampler, torch.utils.data.WeightedRandomSampler):
        torch.multinomial(sampler.weights, sampler.num_samples, True)
    else:
        torch.empty((), dtype=torch.int64).random_()
    assert _state(T.default_generator) == after_first


def test_without_a_generator_the_global_seed_reproduces_every_sampler():
    makers = [
        lambda: RandomSampler(range(9), replacement=True, num_samples=300),
        lambda: RandomSampler(range(9), num_samples=40),
        lambda: SubsetRandomSampler([3, 1, 4, 1, 5]),
        lambda: WeightedRandomSampler([1.0, 0.0, 2.0], 300),
    ]
    for make in makers:
        engine.manual_seed(9)
        a, b = list(make()), list(make())
        engine.manual_seed(9)
        assert list(make()) == a and list(make()) == b and a != b


# ---------------------------------------------------------------- structure, epochs, parity with torch


def test_every_pass_is_a_permutation_and_the_last_one_a_head_of_one():
    g = engine.Generator().manual_seed(10)
    for n, num in ((7, 7), (7, 20), (7, 21), (1, 5), (50, 30)):
        got = list(RandomSampler(range(n), num_samples=num, generator=g))
        assert len(got) == num
        for start in range(0, num, n):
            part = got[start : start + n]
            assert len(set(part)) == len(part) and set(part) <= set(range(n))
            if len(part) == n:
                assert sorted(part) == list(range(n))


def test_counts_with_replacement_are_uniform():
    got = list(RandomSampler(range(10), replacement=True, num_samples=100_000,
                             generator=engine.Generator().manual_seed(11)))
    counts = np.bincount(got, minlength=10)
    assert counts.size == 10 and np.all(np.abs(counts - 10_000) < 600)  # ~6 standard deviations


def test_epochs_differ_and_replay_with_the_same_seed():
    def epochs(seed, **kw):
        g = engine.Generator().manual_seed(seed)
        loader = DataLoader(_ds(20), batch_size=6, generator=g, **kw)
        return [[b[0].tolist() for b in loader] for _ in range(3)]

    for kw in (
        {"shuffle": True},
        {"shuffle": True, "drop_last": True},
    ):
        a = epochs(12, **kw)
        assert a == epochs(12, **kw) and a[0] != a[1] != a[2]
        assert [len(e) for e in a] == [3 if kw.get("drop_last") else 4] * 3
    g = engine.Generator().manual_seed(12)
    ds = _ds(20)
    loader = DataLoader(ds, batch_size=6, drop_last=True,
                        sampler=RandomSampler(ds, replacement=True, num_samples=50, generator=g))
    first, second = [b[0].tolist() for b in loader], [b[0].tolist() for b in loader]
    assert len(first) == len(second) == len(loader) == 8 and first != second


def _batching(T):
    """What a user sees of each library's BatchSampler and loader lengths: all deterministic."""
    d = T.utils.data
    out = []
    for n, bs, drop in itertools.product((0, 1, 7, 12), (1, 5, 12, 13), (False, True)):
        b = d.BatchSampler(d.SequentialSampler(range(n)), bs, drop)
        out.append((len(b), list(b)))
    endless = d.BatchSampler(itertools.count(), 4, drop_last=True)  # an endless iterable, pulled lazily
    out.append(list(itertools.islice(iter(endless), 3)))
    for drop in (False, True):
        loader = d.DataLoader(d.TensorDataset(T.arange(10)), batch_size=64, drop_last=drop,
                              sampler=d.RandomSampler(range(10), replacement=True, num_samples=HUGE))
        out.append((len(loader), len(loader.batch_sampler), len(loader.sampler)))
    return out


def test_batch_sampler_and_loader_lengths_match_torch():
    assert _batching(engine) == _batching(torch)


def test_worker_processes_serve_an_infinite_sampler_in_the_same_order():
    def first(workers):
        g = engine.Generator().manual_seed(13)
        ds = _ds(100)
        loader = DataLoader(ds, batch_size=8, num_workers=workers, generator=g,
                            sampler=RandomSampler(ds, replacement=True, num_samples=HUGE, generator=g))
        it = iter(loader)
        got = [next(it)[0].tolist() for _ in range(6)]
        it._shutdown_workers()
        return got

    assert first(2) == first(0)


# ---------------------------------------------------------------- resuming an epoch that draws lazily


def _loader(kind, g, workers):
    ds = _ds(10)
    if kind == "replacement":
        sampler = RandomSampler(ds, replacement=True, num_samples=200, generator=g)
    elif kind == "passes":
        sampler = RandomSampler(ds, num_samples=35, generator=g)
    else:
        return DataLoader(ds, batch_size=3, num_workers=workers, generator=g, shuffle=True)
    return DataLoader(ds, batch_size=5, num_workers=workers, generator=g, sampler=sampler)


@pytest.mark.parametrize("kind", ["replacement", "passes", "shuffle"])
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("restore_generator", [True, False])
def test_resume_replays_a_lazily_drawn_epoch_and_the_next_one(kind, workers, restore_generator):
    """The samplers draw from the loader's generator during the epoch (32 at a time, or a permutation per
    pass): the resumed epoch must go on with the saved epoch's stream, and end where it would have."""
    # 2 and 6 save just before a new permutation / a new chunk of 32 is drawn; with worker processes (each
    # pass over a loader starts them, ~0.4 s) only those two, the in-process loader takes every cut
    for k in (1, 2, 3, 6) if workers == 0 else (2, 6):
        g = engine.Generator().manual_seed(14)
        loader = _loader(kind, g, workers)
        if k >= len(loader):
            continue
        epoch = []
        for i, b in enumerate(loader):
            epoch.append(b[0].tolist())
            if i + 1 == k:
                saved, g_saved = loader.state_dict(), g.get_state()
        next_epoch = [b[0].tolist() for b in loader]

        g2 = engine.Generator().manual_seed(999)
        resumed = _loader(kind, g2, workers)
        if restore_generator:
            g2.set_state(g_saved)
        resumed.load_state_dict(saved)
        assert [b[0].tolist() for b in resumed] == epoch[k:], k
        assert [b[0].tolist() for b in resumed] == next_epoch, k


def test_resume_leaves_the_global_stream_to_what_else_draws_from_it():
    """Without generator= the epoch takes one global draw (its sampler's seed) at the start; after a resume
    the global generator goes on from the state it was given, whatever the sampler draws later."""
    ds = _ds(10)

    def make():
        return DataLoader(ds, batch_size=4, sampler=RandomSampler(ds, replacement=True, num_samples=100))

    engine.manual_seed(15)
    loader = make()
    it = iter(loader)
    for _ in range(2):
        next(it)
        engine.rand(2)  # e.g. dropout, between batches
    saved, rng = loader.state_dict(), engine.get_rng_state()
    rest = []
    for b in it:
        rest.append(b[0].tolist())
        rest.append(engine.rand(2).tolist())
    rest.append(engine.rand(2).tolist())  # after the epoch, too

    engine.manual_seed(0)
    resumed = make()
    engine.set_rng_state(rng)
    resumed.load_state_dict(saved)
    again = []
    for b in resumed:
        again.append(b[0].tolist())
        again.append(engine.rand(2).tolist())
    again.append(engine.rand(2).tolist())
    assert again == rest
