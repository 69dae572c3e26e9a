"""The conv/pool worker pool (engine/nn/_parallel.py): real threads that follow the BLAS thread count,
and kernels whose batch is split across them give torch's results."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from nn_helpers import backward_both, close, pair
from threadpoolctl import threadpool_limits

import engine
import engine.nn.functional as F
from engine.nn import _parallel as P
from engine.utils.data import DataLoader, Dataset


@pytest.fixture
def two_threads():
    with threadpool_limits(2, user_api="blas"):
        if P.num_threads() != 2:
            pytest.skip("NumPy's BLAS cannot run 2 threads here")
        yield


@pytest.fixture
def split_everything(two_threads, monkeypatch):
    """Every kernel splits its batch, however small the test's tensors."""
    monkeypatch.setattr(P, "MIN_CHUNK_ELEMENTS", 1)


def test_one_blas_thread_means_one_chunk():
    with threadpool_limits(1, user_api="blas"):
        assert P.num_threads() == 1
        assert P.chunks(64, 10**6) == [(0, 64)]


def test_chunks_cover_the_batch_in_order_and_small_work_stays_whole(two_threads):
    parts = P.chunks(7, 10**6)
    assert len(parts) == 2 * P.CHUNKS_PER_THREAD
    assert parts[0][0] == 0 and parts[-1][1] == 7
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    assert P.chunks(64, 10) == [(0, 64)]  # 640 elements: not worth waking a thread


def test_run_executes_parts_on_two_real_threads_at_once(two_threads):
    barrier = threading.Barrier(2, timeout=30)  # only passes if two parts run concurrently
    seen = set()

    def part(lo, hi):
        seen.add(threading.get_ident())
        barrier.wait()
        return lo

    assert P.run(part, [(0, 1), (1, 2)]) == [0, 1]
    assert len(seen) == 2


def test_run_reraises_after_every_part_has_finished(two_threads):
    done = []

    def part(lo, hi):
        if lo == 0:
            raise ValueError("bad chunk")
        done.append(lo)

    with pytest.raises(ValueError, match="bad chunk"):
        P.run(part, [(0, 1), (1, 2), (2, 3), (3, 4)])
    assert sorted(done) == [1, 2, 3]


def test_run_from_inside_a_part_does_not_wait_on_the_pool(two_threads):
    out = P.run(lambda lo, hi: sum(P.run(lambda a, b: b - a, [(0, 1), (1, 3)])) + lo, [(0, 1), (1, 2)])
    assert out == [3, 4]


CONV_CASES = [  # odd batch sizes, so the chunks differ in size
    dict(shape=(5, 3, 9, 8), w=(4, 3, 3, 3), stride=1, padding=1, dilation=1, groups=1),
    dict(shape=(5, 2, 6, 21), w=(3, 2, 3, 2), stride=1, padding=(0, 1), dilation=1, groups=1),
    dict(shape=(5, 3, 11, 9), w=(4, 3, 2, 3), stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=1),
    dict(shape=(5, 4, 9, 7), w=(6, 2, 3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_split_conv2d_matches_torch_and_the_unsplit_forward_exactly(case, split_everything):
    kw = {k: case[k] for k in ("stride", "padding", "dilation", "groups")}
    xe, xt = pair(*case["shape"], dtype=np.float32)
    we, wt = pair(*case["w"], seed=1, dtype=np.float32)
    be, bt = pair(case["w"][0], seed=2, dtype=np.float32)
    ye, yt = F.conv2d(xe, we, be, **kw), TF.conv2d(xt, wt, bt, **kw)
    with threadpool_limits(1, user_api="blas"):
        whole = F.conv2d(xe.detach(), we.detach(), be.detach(), **kw)
    np.testing.assert_array_equal(ye.detach().numpy(), whole.numpy())  # same GEMM per sample
    close(ye, yt, atol=1e-5, rtol=1e-5)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad, atol=1e-4, rtol=1e-4)


POOL_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)]


@pytest.mark.parametrize("kw", POOL_CASES)
def test_split_max_pool2d_matches_torch_including_nan_windows(kw, split_everything):
    a = np.random.default_rng(0).standard_normal((5, 3, 8, 9))
    a[1, 2, 0, 1] = a[3, 0, 4, 4] = np.nan
    xe, xt = engine.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ye, ie = F.max_pool2d(xe, return_indices=True, **kw)
    yt, it = TF.max_pool2d(xt, return_indices=True, **kw)
    close(ye, yt)
    np.testing.assert_array_equal(ie.numpy(), it.numpy())
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


def test_split_lenet_step_matches_torch(split_everything):
    def lenet(nn):
        return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 10))

    me, mt = lenet(engine.nn), lenet(torch.nn)
    with engine.no_grad():
        for pe, pt in zip(me.parameters(), mt.parameters()):
            pe.copy_(engine.tensor(pt.detach().numpy()))
    x = np.random.default_rng(1).standard_normal((6, 1, 28, 28)).astype(np.float32)
    y = np.arange(6) % 10
    le = F.cross_entropy(me(engine.tensor(x)), engine.tensor(y))
    lt = TF.cross_entropy(mt(torch.tensor(x)), torch.tensor(y))
    le.backward()
    lt.backward()
    close(le, lt, atol=1e-5)
    for pe, pt in zip(me.parameters(), mt.parameters()):
        close(pe.grad, pt.grad, atol=1e-5, rtol=1e-4)


class _ConvolvedImages(Dataset):
    """Each item is a conv2d of a fixed batch, so the DataLoader's forked workers run the split kernels."""

    def __init__(self):
        rng = np.random.default_rng(2)
        self.x = engine.tensor(rng.standard_normal((4, 2, 10, 10)).astype(np.float32))
        self.w = engine.tensor(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return F.conv2d(self.x, self.w)[i]


def test_forked_dataloader_workers_run_split_kernels_after_the_parent_used_the_pool(split_everything):
    ds = _ConvolvedImages()
    expected = F.conv2d(ds.x, ds.w).numpy()  # the parent's pool threads now exist
    loader = DataLoader(ds, batch_size=2, num_workers=2, timeout=60, multiprocessing_context="fork")
    got = np.concatenate([b.numpy() for b in loader])
    np.testing.assert_array_equal(got, expected)
