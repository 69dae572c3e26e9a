"""engine/backend/parallel.py: work split along a leading axis across real threads gives the serial result
bit for bit (odd sizes, piece boundaries, non-contiguous and broadcast operands), from two calling threads at
once too; at one thread nothing runs off the calling thread and no pool exists; a worker's nested call runs
serially; the BLAS cap held at one thread during parallel GEMMs comes back afterwards."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from engine.backend import parallel


@pytest.fixture
def two_threads(monkeypatch):
    """Every op large enough to split, over 2 threads (whatever this machine's CPU count)."""
    monkeypatch.setattr(parallel, "MIN_BYTES", 1)
    monkeypatch.setattr(parallel, "threads", lambda: 2)


def test_split_covers_the_range_once_in_pieces_that_do_not_depend_on_threads():
    for n, piece in ((10, 3), (9, 3), (1, 5), (7, 1), (0, 4)):
        pieces = parallel.split(n, piece)
        covered = [i for s, e in pieces for i in range(s, e)]
        assert covered == list(range(n))
        assert all(e - s == piece for s, e in pieces[:-1])


@pytest.mark.parametrize("n_threads", [2, 3, 5])
def test_run_gives_each_piece_once_in_order_with_a_setup_per_share(n_threads):
    pieces = parallel.split(23, 2)
    setups, seen = [], []
    lock = threading.Lock()

    def setup():
        scratch = {"thread": threading.get_ident()}
        with lock:
            setups.append(scratch["thread"])

        def piece(s, e):
            with lock:
                seen.append((s, e))
            return (s, e, scratch["thread"])
        return piece

    out = parallel.run(pieces, setup, n_threads)
    assert [(s, e) for s, e, _ in out] == pieces
    assert sorted(seen) == pieces
    assert 2 <= len(setups) <= n_threads  # one setup per share (a contiguous run of pieces)
    assert {t for _, _, t in out} == set(setups)
    assert out[0][2] == threading.get_ident()  # the caller does the first share itself
    assert len(set(setups)) > 1  # and a worker thread some other


def test_an_exception_in_a_workers_piece_reaches_the_caller():
    def setup():
        def piece(s, e):
            if s >= 10:
                raise ValueError(f"bad piece {s}")
            return s
        return piece

    with pytest.raises(ValueError, match="bad piece"):
        parallel.run(parallel.split(20, 5), setup, 2)


ODD_SHAPES = [(1001, 37), (3, 5, 7), (2, 1), (17,)]


@pytest.mark.parametrize("shape", ODD_SHAPES)
def test_copyto_matches_a_serial_copy_for_odd_sizes_and_non_contiguous_sources(shape, two_threads):
    rng = np.random.default_rng(0)
    base = rng.standard_normal(tuple(2 * s for s in shape)).astype(np.float32)
    src = base[tuple(slice(None, None, 2) for _ in shape)]  # every other element: not contiguous
    assert not src.flags.c_contiguous
    dst = np.empty(shape, np.float32)
    parallel.copyto(dst, src)
    assert np.array_equal(dst, src)
    transposed = np.empty(shape[::-1], np.float32)
    parallel.copyto(transposed, src.T)
    assert np.array_equal(transposed, src.T)


@pytest.mark.parametrize("shape", ODD_SHAPES)
def test_ufunc_is_bit_identical_to_numpy_with_broadcast_operands(shape, two_threads):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape).astype(np.float32)
    operands = [
        rng.standard_normal(shape).astype(np.float32)[..., ::-1],  # reversed last axis: negative strides
        np.float32(0.3),
        rng.standard_normal(shape[-1:]).astype(np.float32),  # broadcast along every leading axis
        rng.standard_normal((1,) + shape[1:]).astype(np.float32),  # a leading axis of one
    ]
    if len(shape) > 1:
        operands.append(rng.standard_normal((shape[0],) + (1,) * (len(shape) - 1)).astype(np.float32))
    for f in (np.multiply, np.add, np.maximum, np.divide):
        for b in operands:
            out = np.empty(shape, np.float32)
            assert parallel.ufunc(f, a, b, out=out) is out
            assert np.array_equal(out, f(a, b), equal_nan=True), (f, np.shape(b))


def test_map_rows_one_call_below_the_threshold_pieces_above():
    calls = []
    parallel.map_rows(lambda s, e: calls.append((s, e)), 10, 1)  # 10 bytes: under MIN_BYTES
    assert calls == [(0, 10)]


def test_map_rows_splits_above_the_threshold(two_threads):
    calls = []
    lock = threading.Lock()

    def fn(s, e):
        with lock:
            calls.append((s, e, threading.get_ident()))
        return e - s

    assert sum(parallel.map_rows(fn, 11, 4)) == 11
    assert sorted((s, e) for s, e, _ in calls) == [(0, 6), (6, 11)]
    assert len({t for _, _, t in calls}) == 2


def test_two_calling_threads_at_once_each_get_the_serial_result(two_threads):
    """A trainer thread and the main thread both splitting work over the one shared pool, many times over."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((301, 53)).astype(np.float32) for _ in range(2)]
    expected = [np.exp(a) * a for a in arrays]
    failures = []
    start = threading.Barrier(2)

    def caller(i):
        start.wait()
        for _ in range(50):
            out = np.empty_like(arrays[i])
            parallel.ufunc(np.exp, arrays[i], out=out)
            parallel.ufunc(np.multiply, out, arrays[i], out=out)
            if not np.array_equal(out, expected[i]):
                failures.append(i)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert failures == []


def test_a_nested_call_inside_a_worker_runs_in_that_worker(monkeypatch):
    monkeypatch.setattr(parallel, "threads", lambda: 2)
    inner_threads = {}

    def setup():
        def piece(s, e):
            seen = []
            parallel.run(parallel.split(4, 1), lambda: lambda a, b: seen.append(threading.get_ident()))
            inner_threads[s] = set(seen)
            return threading.get_ident()
        return piece

    outer = parallel.run([(0, 1), (1, 2)], setup)
    assert outer[0] != outer[1]
    assert inner_threads[1] == {outer[1]}  # the worker's nested call: serial, in the worker
    assert outer[0] in inner_threads[0]  # the caller's may use the pool (the caller is no worker)


def test_at_one_blas_thread_everything_runs_on_the_calling_thread():
    """The real thread count (not a stand-in): BLAS capped at 1 means one intra-op thread."""
    with threadpool_limits(1, user_api="blas"):
        assert parallel.threads() == 1
        seen = []
        parallel.run(parallel.split(8, 1), lambda: lambda s, e: seen.append(threading.get_ident()))
        assert set(seen) == {threading.get_ident()}


def test_single_blas_holds_blas_at_one_thread_and_restores_the_cap_after_overlapping_holders():
    with threadpool_limits(2, user_api="blas"):
        before = parallel._blas_controller().get_num_threads()
        with parallel.single_blas():
            assert parallel._blas_controller().get_num_threads() == 1
            with parallel.single_blas():  # a second caller overlapping the first
                assert parallel._blas_controller().get_num_threads() == 1
            assert parallel._blas_controller().get_num_threads() == 1
        assert parallel._blas_controller().get_num_threads() == before


def test_caps_from_two_threads_combine_and_the_first_to_leave_does_not_lift_the_others():
    """A trainer that ends its cap while another trainer (another thread) still runs under its own keeps the
    other's in effect; when both have left, the count from before is back. Each thread leaves in the other's
    order than it came (a plain threadpool_limits per thread restored the saved count of the first)."""
    blas = parallel._blas_controller()
    entered, leave_a, a_left, leave_b = (threading.Event() for _ in range(4))
    seen = {}

    def a():
        with parallel.blas_limit(3):
            entered.set()
            leave_a.wait(10)
        a_left.set()

    def b():
        entered.wait(10)
        with parallel.blas_limit(1):
            seen["b inside, a inside"] = blas.get_num_threads()
            leave_a.set()
            a_left.wait(10)
            seen["b inside, a gone"] = blas.get_num_threads()
            leave_b.wait(10)

    with threadpool_limits(2, user_api="blas"):  # the main thread sets it first, as a benchmark would
        threads = [threading.Thread(target=a), threading.Thread(target=b)]
        for t in threads:
            t.start()
        a_left.wait(10)
        seen["a gone"] = blas.get_num_threads()
        leave_b.set()
        for t in threads:
            t.join(10)
        seen["both gone"] = blas.get_num_threads()
    assert seen == {"b inside, a inside": 1, "b inside, a gone": 1, "a gone": 1, "both gone": 2}


def test_a_trainer_runs_at_its_cap_while_another_trainer_comes_and_goes():
    import engine
    from app.document import load_document
    from app.training import Trainer
    from app.training.metrics import TrainerCallback

    doc = load_document(Path(__file__).resolve().parents[3] / "assets" / "examples" / "spirals.json")
    doc.set_training("epochs", 1)
    counts = []

    class Watch(TrainerCallback):
        def on_batch_end(self, metrics):
            counts.append(engine.get_num_threads())

    with threadpool_limits(2, user_api="blas"):
        with parallel.blas_limit(2):  # another trainer's cap, left while this one trains
            trainer = Trainer(doc, blas_threads=1, callbacks=[Watch()], doctor=False)
            done = threading.Event()
            t = threading.Thread(target=lambda: (trainer.run(), done.set()))
            t.start()
            while not counts and t.is_alive():
                done.wait(0.01)
        t.join(120)
        after = engine.get_num_threads()
    assert counts and set(counts) == {1}
    assert after == 2


def test_a_conv_net_step_at_one_thread_starts_no_pool():
    """A fresh process at torch.set_num_threads(1): a conv, batch norm, relu, max pool training step runs and
    the engine never made its pool or a worker thread."""
    code = (
        "import threading, engine, engine.nn as nn\n"
        "from engine.backend import parallel\n"
        "engine.set_num_threads(1)\n"
        "m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))\n"
        "m(engine.randn(16, 3, 32, 32)).square().mean().backward()\n"
        "names = [t.name for t in threading.enumerate()]\n"
        "print(parallel._pool is None, any('intraop' in n for n in names))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.split() == ["True", "False"]


def _conv_net_step(x_np):
    """Forward and backward of conv (bias), batch norm, relu, max pool, instance norm, 3x3 conv on x: the
    output and every gradient, as arrays."""
    import engine
    import engine.nn.functional as F

    engine.manual_seed(0)
    x = engine.tensor(x_np, requires_grad=True)
    w1 = engine.randn(6, 3, 3, 3, requires_grad=True)
    b1 = engine.randn(6, requires_grad=True)
    g, b = engine.randn(6, requires_grad=True), engine.randn(6, requires_grad=True)
    w2 = engine.randn(4, 6, 3, 3, requires_grad=True)
    rm, rv = engine.zeros(6), engine.ones(6)
    h = F.conv2d(x, w1, b1, padding=1)
    h = F.relu(F.batch_norm(h, rm, rv, g, b, training=True))
    h = F.instance_norm(F.max_pool2d(h, 2))
    y = F.conv2d(h, w2, padding=1)
    y.backward(engine.tensor(np.cos(np.arange(y.numel(), dtype=np.float32)).reshape(y.shape)))
    return [t.detach().numpy() for t in (y, x.grad, w1.grad, b1.grad, g.grad, b.grad, w2.grad, rm, rv)]


def test_a_conv_net_step_gives_the_same_bits_on_one_thread_and_on_two(monkeypatch):
    """Every op that shares its work out (convolution's pieces of samples, batch and instance norm's pieces,
    relu and its backward, max pool and its backward) split into small pieces and run on 1 and on 2 threads:
    identical outputs, gradients and running statistics."""
    from engine.backend import windows as W
    from engine.nn.functional import normalization as NM

    monkeypatch.setattr(parallel, "MIN_BYTES", 64)
    monkeypatch.setattr(W, "PIECE_BYTES", 2000)
    monkeypatch.setattr(NM, "PIECE_BYTES", 300)
    x = np.random.default_rng(5).standard_normal((9, 3, 10, 12)).astype(np.float32)
    monkeypatch.setattr(parallel, "threads", lambda: 1)
    serial = _conv_net_step(x)
    monkeypatch.setattr(parallel, "threads", lambda: 2)
    handed_off = []
    real_executor = parallel._executor
    monkeypatch.setattr(parallel, "_executor", lambda n: handed_off.append(n) or real_executor(n))
    threaded = _conv_net_step(x)
    assert len(handed_off) >= 10  # the ops above did hand pieces to the pool
    for a, b in zip(serial, threaded):
        assert a.dtype == b.dtype == np.float32
        assert np.array_equal(a, b)


def test_a_forked_child_makes_its_own_pool(two_threads):
    """A DataLoader worker forked after the pool ran: the child has none of its threads, so it starts a pool
    of its own instead of waiting forever on the parent's."""
    import os
    import signal

    a = np.arange(4096, dtype=np.float32).reshape(64, 64)
    out = np.empty_like(a)
    parallel.ufunc(np.sqrt, a, out=out)  # the parent's pool now exists
    assert parallel._pool is not None
    pid = os.fork()
    if pid == 0:  # the child: a hang is killed by the alarm, a wrong result exits 1
        signal.alarm(30)
        try:
            res = np.empty_like(a)
            parallel.ufunc(np.sqrt, a, out=res)
            os._exit(0 if np.array_equal(res, np.sqrt(a)) else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_fewer_blas_pieces_than_threads_run_serially_leaving_blas_its_threads(monkeypatch):
    """Two samples' GEMMs on a 4-thread budget: sharing them out would hold BLAS at one thread and use 2 cores
    of 4, so they run on the calling thread and BLAS keeps its cap; at 2 threads they are shared out."""
    monkeypatch.setattr(parallel, "threads", lambda: 4)
    seen = []

    def setup():
        def piece(s, e):
            seen.append((threading.get_ident(), len(parallel._active)))
        return piece

    parallel.run(parallel.split(2, 1), setup, blas=True)
    assert seen == [(threading.get_ident(), 0)] * 2
    monkeypatch.setattr(parallel, "threads", lambda: 2)
    seen.clear()
    parallel.run(parallel.split(2, 1), setup, blas=True)
    assert len({t for t, _ in seen}) == 2 and all(p == 1 for _, p in seen)
