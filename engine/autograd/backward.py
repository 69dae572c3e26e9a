"""The backward scheduler: dependency counting over the graph, iterative (no recursion limit)."""
from __future__ import annotations

import heapq
import itertools
import sys
import warnings

import numpy as np

from .. import _strides as S
from .._memory_format import contiguous_format
from . import function as _function  # its Tensor and _wrap_array are bound once engine.tensor is imported
from .function import AccumulateGrad
from .grad_mode import state
from .inplace import bump

_LEAF_FIRST = float("-inf")  # a ready AccumulateGrad's heap key: before every op (whose key is -_seq)


def _sum_to(grad, shape):
    """Reduce a broadcast gradient back to an input's shape (differentiable)."""
    from ..ops.reduce import sum_to_size

    return sum_to_size(grad, shape)


def _obeys_layout(grad, var) -> bool:
    """torch's gradient layout contract: a leaf's .grad has the leaf's strides (wherever a dim is not of size
    1) when the leaf is non-overlapping and dense, else it is contiguous."""
    if var._arr.flags.c_contiguous:  # the common case: a contiguous leaf wants a contiguous gradient
        return grad._arr.flags.c_contiguous
    shape, vs = var._shape, var._strides
    if S.is_non_overlapping_and_dense(shape, vs):
        return all(g == v if n != 1 else g != 0 for n, g, v in zip(shape, grad._strides, vs))
    return S.is_contiguous(grad._shape, grad._strides)


def _relaid(grad, var):
    """A copy of `grad` (no graph) laid out as the contract asks: like `var` when dense, else contiguous."""
    if var._arr.__class__ is np.ndarray and S.is_non_overlapping_and_dense(var._shape, var._strides):
        from ..tensor import _copy_preserving_layout

        return _copy_preserving_layout(grad._arr, var)
    return grad.detach().clone(memory_format=contiguous_format)


def _accumulate_into_leaf(node: AccumulateGrad, grad, create_graph: bool, refs: int = 3, fresh: bool = False):
    """Add `grad` into the leaf's .grad. `refs` is how many references to `grad` the caller's frames hold
    (the scheduler's buffer list, this call's argument, getrefcount's own): one more means somebody else can
    still see it, so it is copied rather than stolen. `fresh`: the caller vouches that `grad` was just made
    over an array nothing else references, in the leaf's shape and dtype (an array-passing node's result)."""
    var = node._variable()
    if var is None or grad is None:
        return
    # the leaf's tensor hooks already ran in run_backward (as this node's pre-hooks), before capture
    vg = var._grad
    if vg is None:
        if create_graph:
            var.grad = grad
        elif fresh:
            var._grad = grad if _obeys_layout(grad, var) else _relaid(grad, var)
        elif (not grad.__dict__ and grad._shape == var._shape and grad._dtype is var._dtype
              and grad._storage.device is var._storage.device and grad._arr.flags.c_contiguous
              and var._arr.flags.c_contiguous
              and sys.getrefcount(grad) <= refs and sys.getrefcount(grad._storage) <= 2):
            # A fresh op result (no autograd fields, hooks or base in its __dict__) that nothing else can
            # see, over a storage nothing else views: adopt the tensor itself, as torch's AccumulateGrad does.
            var._grad = grad
        else:
            # Steal a freshly computed gradient; copy one that anything else could still see or write.
            g = grad.detach()
            if (grad._base is not None or not grad.is_contiguous() or sys.getrefcount(grad) > refs
                    or sys.getrefcount(grad._storage) > 3 or g._shape != var._shape):
                g = (
                    grad.detach().clone(memory_format=contiguous_format)
                    if g._shape == var._shape
                    else grad.detach().expand(var._shape).clone(memory_format=contiguous_format)
                )
            if not _obeys_layout(g, var):
                g = _relaid(g, var)
            var.grad = g
    elif create_graph or vg._rg:
        var.grad = vg + grad
    elif (vg._arr.__class__ is np.ndarray and grad._arr.__class__ is np.ndarray and vg._dtype is grad._dtype
          and vg._shape == grad._shape and vg._arr.flags.c_contiguous):
        # what add_ does under no_grad, without its dispatch (this runs once per parameter per step)
        np.add(vg._arr, grad._arr, out=vg._arr)
        bump(vg)
    else:
        from .grad_mode import no_grad

        with no_grad():
            var.grad.add_(grad.detach())
    if node._hooks:
        for fn in list(node._hooks):
            fn((), (grad,))


def _as_tensors(buf):
    """`buf` with the arrays an array-passing node left in it wrapped as tensors (for hooks, capture, leaves
    and nodes that take tensors). Each such array is fresh and referenced only here, so it is adopted."""
    Tensor = _function.Tensor
    for i, g in enumerate(buf):
        if g is not None and not isinstance(g, Tensor):
            buf[i] = _function._wrap_array(g)
    return buf


def _sum_grads(a, b):
    """Two gradients for the same output, each a tensor or an array-passing node's array."""
    Tensor = _function.Tensor
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return a + b  # NumPy (or CuPy) arrays of one shape and dtype: a fresh array
    wrap = _function._wrap_array
    return (a if isinstance(a, Tensor) else wrap(a)) + (b if isinstance(b, Tensor) else wrap(b))


def run_backward(
    roots,
    grad_roots,
    retain_graph: bool,
    create_graph: bool,
    inputs=None,
    allow_unused: bool = False,
    accumulate: bool = True,
):
    """roots: list of (node, output_nr); grad_roots: their gradients, tensors or (from Tensor.backward's fast
    path) arrays. Returns the captured gradients for `inputs` (or None).

    Gradients normally travel between nodes as tensors. Without create_graph or anomaly mode, a single-output
    node whose class defines `_backward_arrays` (Function's docstring) takes and gives NumPy/CuPy arrays
    instead, so a chain of such nodes (Linear, ReLU, cross-entropy: the training step) passes arrays and
    wraps only what a leaf's .grad, a hook, a capture or another node sees."""
    # Where to capture: a non-leaf input's grad is what arrives at (grad_fn, output_nr).
    capture = {}
    if inputs is not None:
        from ..tensor import Tensor

        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise TypeError("inputs to autograd.grad must be Tensors")
            if not t.requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            capture.setdefault(t._grad_edge(), []).append(i)
    captured = [None] * (len(inputs) if inputs is not None else 0)

    root_nodes = {roots[0][0]} if len(roots) == 1 else {n for n, _ in roots}  # (one root: loss.backward())
    # Scheduling. A node's _seq is larger than its inputs' nodes' (it is made after them), so taking the node
    # with the largest _seq among those that have been handed a gradient runs every node after all its
    # consumers: torch's order, without counting dependencies first. Leaves (AccumulateGrad, whose _seq says
    # nothing) take their gradient when it arrives: a first one is adopted as .grad and later ones in this
    # pass added to it, the sum torch's input buffer makes; a leaf whose .grad was already set gets its
    # gradients summed and added once at the end (torch adds the whole sum once too). Hooks on a leaf can see
    # when that happens, so once a leaf has a hook, and for autograd.grad and create_graph, the dependency-
    # counting schedule below runs instead.
    by_seq = (inputs is None and accumulate and not create_graph and not AccumulateGrad._hooked
              and all(n.__class__ is not AccumulateGrad for n in root_nodes))
    deps: dict = {}
    # 1. dependency counts over every node reachable from the roots
    stack = [] if by_seq else list(root_nodes)
    while stack:
        for nx in filter(None, stack.pop()._next):  # filter drops the None edges in C
            nxn = nx[0]
            c = deps.get(nxn)
            if c is None:
                deps[nxn] = 1
                if nxn._next and nxn not in root_nodes:  # leaves (AccumulateGrad) lead nowhere
                    stack.append(nxn)
            else:
                deps[nxn] = c + 1

    # 2. with explicit inputs, only nodes on a path to one of them run
    needed = None
    if inputs is not None:
        targets = {n for n, _ in capture}
        needed = set()
        # reverse topological: process in an order where children come before parents
        pending = dict(deps)
        ready = [n for n in root_nodes if pending.get(n, 0) == 0]
        topo = []
        seen_r = set()
        while ready:
            n = ready.pop()
            if n in seen_r:
                continue
            seen_r.add(n)
            topo.append(n)
            for nx in n._next:
                if nx is None:
                    continue
                pending[nx[0]] -= 1
                if pending[nx[0]] == 0:
                    ready.append(nx[0])
        for n in reversed(topo):
            if n in targets or any(nx is not None and nx[0] in needed for nx in n._next):
                needed.add(n)

    Tensor, wrap = _function.Tensor, _function._wrap_array
    any_arrays = False  # has an array reached the buffers (then tensor-taking nodes wrap their inputs)
    buffers: dict = {}
    for (node, nr), g in zip(roots, grad_roots):
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node._n_outputs
        buf[nr] = g if buf[nr] is None else _sum_grads(buf[nr], g)
        if g is not None and not isinstance(g, Tensor):
            any_arrays = True

    heap = []
    for n in root_nodes:
        if n not in deps:
            heap.append((-n._seq, n))
    heapq.heapify(heap)
    started: set = set()  # (by_seq) leaves whose .grad this pass set
    done: list = []  # (by_seq) the nodes that have run, for _settle_leaves_after_error
    late: dict = {}  # (by_seq) leaves whose .grad was set before: their gradients' sum, added at the end
    heappop, heappush = heapq.heappop, heapq.heappush
    leaf_order = itertools.count()  # (counted) ties among ready leaves: first ready, first run
    check_nan = state.anomaly
    # A leaf whose AccumulateGrad has this one incoming edge, no hooks and nothing to capture is accumulated
    # as soon as its gradient is made, without a trip through the buffers and the heap. torch runs
    # AccumulateGrad first among ready nodes too, so the order of .grad writes is the same.
    inline_leaves = accumulate and not capture
    selective = bool(capture) or needed is not None
    trust_exact = not create_graph  # Function._exact_grads vouches for the NumPy (no create_graph) backward
    arrays_ok = trust_exact and not check_nan and not selective  # may nodes pass arrays (see the docstring)

    prev_mode = state.grad_enabled
    state.grad_enabled = create_graph
    try:
        while heap:
            node = heappop(heap)[-1]
            buf = buffers.pop(node, None) or [None] * node._n_outputs
            bwa = node._backward_arrays if arrays_ok else None
            if bwa is not None and (node._hooks or node._pre_hooks):
                bwa = None  # hooks see tensors
            if bwa is not None:  # an array-passing node (single output, no hooks): arrays in, arrays out
                nexts = node._next
                g = buf[0]
                if g is None:
                    grads = (None,) * len(nexts)
                    bwa = None
                else:
                    grads = bwa(node, g._arr if g.__class__ is Tensor or isinstance(g, Tensor) else g)
                    any_arrays = True
            else:
                if any_arrays:
                    buf = _as_tensors(buf)

                # tensor hooks registered on outputs of this node, then retain_grad
                if node._pre_hooks:
                    for nr, fn in list(node._pre_hooks):
                        if nr is None:
                            r = fn(tuple(buf))
                            if r is not None:
                                buf = list(r)
                        elif buf[nr] is not None:
                            r = fn(buf[nr])
                            if r is not None:
                                buf[nr] = r

                if selective:  # autograd.grad(inputs=...): capture, and skip nodes on no path to an input
                    for nr in range(len(buf)):
                        idxs = capture.get((node, nr))
                        if idxs:
                            for i in idxs:
                                captured[i] = buf[nr]
                    if needed is not None and node.__class__ is not AccumulateGrad and node not in needed:
                        _release_children(node, deps, heap)
                        continue

                if node.__class__ is AccumulateGrad:  # final class: no subclasses to test for
                    if accumulate:
                        _accumulate_into_leaf(node, buf[0], create_graph)
                    continue

                nexts = node._next
                single = len(buf) == 1  # most nodes: skip the generic all()/materialize passes
                if (buf[0] is None) if single else all(g is None for g in buf):
                    grads = (None,) * len(nexts)
                else:
                    if not single and node.__dict__.get("_materialize", True):
                        buf = _materialize(node, buf)
                    grads = type(node).backward(node, *buf)
                    if grads.__class__ is not tuple or not trust_exact or not node._exact_grads:
                        grads = _check_grads(node, grads if isinstance(grads, tuple) else (grads,))
                    if check_nan or node._trace is not None:
                        _anomaly_check(node, grads)
                    if node._hooks:
                        grads = _run_post_hooks(node, grads, tuple(buf))
            if not retain_graph:  # free what forward saved; saved_tensors now raises FREED_MSG
                nd = node.__dict__
                nd["_freed"] = True
                nd.pop("_saved", None)
                nd.pop("_out", None)

            if by_seq:
                done.append(node)
                for nx, g in zip(nexts, grads):
                    if nx is None:
                        continue
                    nxn = nx[0]
                    if nxn.__class__ is AccumulateGrad:
                        if g is not None:
                            var = nxn._variable()
                            if var is None:
                                continue
                            if var._grad is None:  # its first gradient: adopted (a fresh array) or stolen
                                if bwa is not None and var._arr.flags.c_contiguous:
                                    var._grad = wrap(g)  # (no leaf has hooks: _accumulate_into_leaf's work)
                                elif bwa is not None:
                                    _accumulate_into_leaf(nxn, wrap(g), False, 0, True)
                                else:
                                    # grads, zip's reused result tuple, g: a reference each beyond a buffer's
                                    _accumulate_into_leaf(nxn, g, False, 5)
                                started.add(nxn)
                            elif nxn in started:  # .grad is this pass's sum so far: add in place
                                _accumulate_into_leaf(nxn, wrap(g) if bwa is not None else g, False, 5)
                            else:  # .grad from before: add this pass's sum once, at the end
                                d = late.get(nxn)
                                late[nxn] = g if d is None else _sum_grads(d, g)
                        continue
                    b = buffers.get(nxn)
                    if b is None:
                        b = buffers[nxn] = [None] * nxn._n_outputs
                        heappush(heap, (-nxn._seq, nxn))
                    if g is not None:
                        nr = nx[1]
                        b[nr] = g if b[nr] is None else _sum_grads(b[nr], g)
                buf = grads = g = None
                continue

            leaf_queued = False  # a leaf of an earlier edge waits in the heap: later ones queue behind it
            for nx, g in zip(nexts, grads):
                if nx is None:
                    continue
                nxn, nr = nx
                if (inline_leaves and not leaf_queued and nxn.__class__ is AccumulateGrad and deps[nxn] == 1
                        and not nxn._pre_hooks and nxn not in buffers):  # the last edge, none buffered
                    if g is not None:
                        if bwa is not None:  # a fresh array, the leaf's shape and dtype: its .grad adopts it
                            var = nxn._variable()
                            if (var is not None and var._grad is None and not nxn._hooks
                                    and var._arr.flags.c_contiguous):
                                var._grad = wrap(g)  # _accumulate_into_leaf's first-gradient case, inline
                            else:
                                _accumulate_into_leaf(nxn, wrap(g), False, 0, True)
                        else:
                            # grads, zip's reused result tuple, g: a reference each beyond the buffer path's
                            _accumulate_into_leaf(nxn, g, create_graph, 5)
                    continue
                if g is not None:
                    b = buffers.get(nxn)
                    if b is None:
                        if nxn._n_outputs == 1:
                            buffers[nxn] = [g]
                        else:
                            b = buffers[nxn] = [None] * nxn._n_outputs
                            b[nr] = g
                    else:
                        b[nr] = g if b[nr] is None else _sum_grads(b[nr], g)
                c = deps[nxn] - 1
                deps[nxn] = c
                if not c:
                    if nxn.__class__ is AccumulateGrad:  # torch runs a ready leaf before any ready op, in
                        heappush(heap, (_LEAF_FIRST, next(leaf_order), nxn))  # the order they became ready
                        leaf_queued = True
                    else:
                        heappush(heap, (-nxn._seq, nxn))
            # Drop this frame's references to the gradients just handed on, so a leaf can steal its
            # gradient (refcount test in _accumulate_into_leaf) instead of cloning it.
            buf = grads = g = None
        for acc in list(late):  # (by_seq) leaves whose .grad was set before this pass: add each sum once
            _add_late_sum(acc, late.pop(acc))
    except BaseException:
        if by_seq:
            try:
                _settle_leaves_after_error(root_nodes, done, started, late)
            except Exception:  # noqa: BLE001, S110 - the error that stopped backward is the one to report
                pass
        raise
    finally:
        state.grad_enabled = prev_mode

    if inputs is not None:
        for g in captured:
            if g is None and not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
        return tuple(captured)
    return None


def _run_post_hooks(node, grads: tuple, grad_outputs: tuple) -> tuple:
    """Run node's post-hooks on torch's view of its gradients: grad_inputs has one entry per edge of
    next_functions (`_next` keeps one per forward argument: the dims and numbers torch has no edge for are
    left out). A hook's returned tuple, in that view, replaces the gradients it shows."""
    pos = node._torch_positions()
    for fn in list(node._hooks):
        shown = grads if pos is None else tuple(None if i is None else grads[i] for i in pos)
        r = fn(shown, grad_outputs)
        if r is None:
            continue
        r = tuple(r)
        if len(r) != len(shown):
            raise RuntimeError(f"hook '{getattr(fn, '__name__', fn)}' has returned an incorrect number of "
                               f"values (got {len(r)}, but expected {len(shown)})")
        if pos is None:
            grads = r
        else:
            out = list(grads)
            for i, g in zip(pos, r):
                if i is not None:
                    out[i] = g
            grads = tuple(out)
    return grads


def _settle_leaves_after_error(root_nodes, done, started, late) -> None:
    """A backward by sequence number failed part-way: leave each leaf's .grad as torch's would be. torch adds
    a leaf's gradient once every node feeding it in this graph has run; the by_seq schedule adopts a first
    gradient as it arrives and keeps the sums for leaves with an older .grad. So: count each leaf's edges
    from the graph's nodes and from the nodes that ran; a leaf this pass gave a .grad loses it unless all its
    feeders ran, and a kept sum is added only for a leaf whose feeders all ran."""
    need: dict = {}
    seen = set(root_nodes)
    stack = list(root_nodes)
    while stack:
        for nx in stack.pop()._next:
            if nx is None:
                continue
            m = nx[0]
            if m.__class__ is AccumulateGrad:
                need[m] = need.get(m, 0) + 1
            elif m not in seen:
                seen.add(m)
                stack.append(m)
    got: dict = {}
    for n in done:
        for nx in n._next:
            if nx is not None and nx[0].__class__ is AccumulateGrad:
                got[nx[0]] = got.get(nx[0], 0) + 1
    for acc in started:
        var = acc._variable()
        if var is not None and got.get(acc, 0) < need.get(acc, 0):
            var._grad = None  # (it was None before this pass: that is how it got into `started`)
    for acc in list(late):
        g = late.pop(acc)
        if got.get(acc, 0) >= need.get(acc, 0):
            _add_late_sum(acc, g)


def _add_late_sum(acc, g) -> None:
    """(by_seq) Add a pass's summed gradient, a tensor or an array-passing node's array, to a leaf whose .grad
    was set before the pass."""
    if isinstance(g, _function.Tensor):
        _accumulate_into_leaf(acc, g, False)
    else:
        _accumulate_into_leaf(acc, _function._wrap_array(g), False, 0, True)


def _release_children(node, deps, heap):
    for nx in node._next:
        if nx is None:
            continue
        deps[nx[0]] -= 1
        if deps[nx[0]] == 0:
            heapq.heappush(heap, (-nx[0]._seq, nx[0]))


def _materialize(node, buf):
    """Missing output gradients become zeros (PyTorch's materialize_grads default)."""
    if all(g is not None for g in buf):
        return buf
    from ..tensor import Tensor  # noqa: F401

    out = list(buf)
    ref = next(g for g in buf if g is not None)
    shapes = node.__dict__.get("_out_shapes")
    for i, g in enumerate(out):
        if g is None and shapes is not None:
            from .. import zeros

            out[i] = zeros(shapes[i], dtype=ref.dtype, device=ref.device)
    return out


def _check_grads(node, grads: tuple) -> tuple:
    """One gradient per forward input: None where no gradient flows, reduced to the input's shape, in its
    dtype. Returns `grads` itself when it already is all that (the common case)."""
    nexts = node._next
    n_in = len(nexts)
    if len(grads) != n_in:
        if len(grads) < n_in:
            grads = tuple(grads) + (None,) * (n_in - len(grads))
        elif any(g is not None for g in grads[n_in:]):
            raise RuntimeError(
                f"function {node.name()} returned an incorrect number of gradients "
                f"(expected {n_in}, got {len(grads)})"
            )
        else:
            grads = grads[:n_in]
    out = None
    meta = node._input_meta
    for i, g in enumerate(grads):
        if g is None:
            continue
        if nexts[i] is None:
            h = None
        else:
            shape, dtype = meta[i]
            h = g
            if h._shape != shape:
                try:
                    h = _sum_to(h, shape)
                except RuntimeError:
                    raise RuntimeError(
                        f"Function {node.name()} returned an invalid gradient at index {i} - got "
                        f"{list(h._shape)} but expected shape compatible with {list(shape)}"
                    ) from None
            if h._dtype is not dtype and dtype.is_floating_point:
                h = h.to(dtype)
            if h is g:
                continue
        if out is None:
            out = list(grads)
        out[i] = h
    return grads if out is None else tuple(out)


def _anomaly_check(node, grads):
    from ..ops.elementwise import _has_nan

    for i, g in enumerate(grads):
        if g is not None and _has_nan(g):
            if node._trace:
                warnings.warn(
                    f"Error detected in {node.name()}. Traceback of forward call that caused the "
                    f"error:\n{''.join(node._trace)}",
                    RuntimeWarning,
                    stacklevel=2,
                )
            scope = f" (in layer '{node.scope}')" if node.scope else ""
            err = RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.{scope}")
            err.node = node
            raise err
