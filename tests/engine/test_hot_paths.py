"""Training hot paths: leaves adopt fresh gradients without a copy, fast kernels agree with torch."""

import numpy as np

import engine
from engine.autograd.function import Function
from engine.tensor import _wrap_array

_made = []


class _FreshGrads(Function):
    """y = a + b whose backward returns two brand-new gradient arrays (remembered in _made)."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        return a._arr + b._arr

    @staticmethod
    def backward(ctx, g):
        ga, gb = np.array(g._arr), np.array(g._arr)
        _made[:] = [ga, gb]
        return _wrap_array(ga), _wrap_array(gb)


def test_leaf_adopts_a_fresh_gradient_without_copying_it():
    a = engine.ones(3, requires_grad=True)
    b = engine.ones(3, requires_grad=True)
    _FreshGrads.apply(a, b).sum().backward()
    # both the first and the last gradient returned by the node are stolen, not cloned
    assert np.shares_memory(a.grad._arr, _made[0])
    assert np.shares_memory(b.grad._arr, _made[1])


def test_gradient_shared_by_two_leaves_is_copied_for_each():
    a = engine.ones(3, requires_grad=True)
    b = engine.ones(3, requires_grad=True)
    (a + b).sum().backward()  # add's backward hands the same gradient to both inputs
    assert not np.shares_memory(a.grad._arr, b.grad._arr)
    a.grad.add_(1.0)
    assert b.grad.tolist() == [1.0, 1.0, 1.0]


def test_importing_the_engine_keeps_freed_host_memory_for_reuse_on_glibc():
    import os
    import sys

    from engine.backend import host_allocator

    if sys.platform.startswith("linux") and os.environ.get("WIREGRAD_MALLOC_TUNING", "1") != "0":
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").mallopt  # noqa: B018 - glibc present?
        except (OSError, AttributeError):
            assert host_allocator.tune() is False
            return
        assert host_allocator.tuned
    else:
        assert not host_allocator.tuned
