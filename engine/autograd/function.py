"""Graph nodes: Function (forward and backward side by side; its instance is the ctx) and AccumulateGrad."""

from __future__ import annotations

import itertools
import traceback
import weakref

from .grad_mode import state

_NO_EDGE = (None, 0)
_seq = itertools.count()
_next_seq = _seq.__next__

FREED_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)


# Tensor, _wrap_array and _laid_out, bound by engine.tensor when it is imported (it imports this module first)
Tensor = None
_wrap_array = None
_laid_out = None


def _bind_tensor(tensor_cls, wrap_array, laid_out) -> None:
    global Tensor, _wrap_array, _laid_out
    Tensor, _wrap_array, _laid_out = tensor_cls, wrap_array, laid_out


class Node:
    """A node of the backward graph. `next_functions[i]` is (node, output_nr) for forward input i.

    Fields most nodes never change are class-level defaults (an instance stores them only when set), so
    recording an op sets three fields instead of nine."""

    __slots__ = ("_next", "_input_meta", "_seq", "__weakref__", "__dict__")
    scope = None  # the module that ran the op (state.scope)
    _pre_hooks = None
    _hooks = None
    _freed = False
    _trace = None  # the forward's stack, under anomaly mode
    _n_outputs = 1
    _backward_arrays = None  # see Function
    # which recorded arguments torch's node has edges for, in its order, where the rule of next_functions does
    # not find them (an argument past the recorded ones, or one without a gradient, is (None, 0))
    _torch_edges = None
    _through = False  # a copy made inside an op (an in-place op's old value), which next_functions skips

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        """torch's view of the edges: (node, output_nr) for each tensor input torch's node differentiates,
        (None, 0) for one without a gradient. The graph keeps one entry per forward argument (`_next`), a
        bare None (which backward's loops skip without unpacking) for a dim, a number or an index tensor
        too; torch has no edge for those, unless the op names its operands (`_edges`: `x - 2` has two)."""
        edges = self._next
        pos = self._torch_positions()
        shown = edges if pos is None else [None if i is None else edges[i] for i in pos]
        return tuple(_NO_EDGE if e is None else _past_copies(e) for e in shown)

    def _torch_positions(self) -> tuple | None:
        """Where each of torch's edges (next_functions) is in `_next`: an index, or None for an argument past
        the recorded ones; None when torch's edges are `_next` itself. A post-hook's grad_inputs follow it."""
        edges, meta = self._next, self._input_meta
        order = self._torch_edges
        if order is not None:
            return tuple(i if i < len(edges) else None for i in order)
        if getattr(self, "_edges", 0) or meta is None or len(meta) != len(edges):
            return None
        pos = tuple(i for i, (e, m) in enumerate(zip(edges, meta))
                    if e is not None or (m is not None and m[1].is_floating_point))
        return None if len(pos) == len(edges) else pos

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) runs after this node's backward; may return new grad_inputs. As in
        torch, grad_inputs has one entry per edge of `next_functions` (None where no gradient flows) and
        grad_outputs one per output of the node; the hooks of one backward pass run in its order, so hooks
        on every node observe the pass node by node (app/insight/autograd_trace.py does)."""
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(fn)
        return _RemovableHandle(self._hooks, fn)

    def register_prehook(self, fn):
        """fn(grad_outputs) runs before this node's backward; may return new grad_outputs."""
        return self._add_pre_hook(None, fn)

    def _add_pre_hook(self, output_nr, fn):
        if self._pre_hooks is None:
            self._pre_hooks = []
        entry = (output_nr, fn)
        self._pre_hooks.append(entry)
        return _RemovableHandle(self._pre_hooks, entry)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


def _past_copies(edge: tuple) -> tuple:
    """The edge, or where the copies the engine made inside an op (Node._through) lead."""
    while edge[0]._through:
        edge = edge[0]._next[0] or _NO_EDGE
        if edge[0] is None:
            break
    return edge


class _RemovableHandle:
    def __init__(self, container, item):
        self._container = container
        self._item = item

    def remove(self):
        try:
            self._container.remove(self._item)
        except ValueError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _LeafHookHandle(_RemovableHandle):
    """A leaf hook's handle: counts the hook in AccumulateGrad._hooked until remove() takes it out."""

    def __init__(self, inner: _RemovableHandle) -> None:
        super().__init__(inner._container, inner._item)
        AccumulateGrad._hooked += 1
        self._counted = True

    def remove(self):
        if self._counted:
            self._counted = False
            AccumulateGrad._hooked = max(0, AccumulateGrad._hooked - 1)
        super().remove()


class _NoGradCtx:
    """Stand-in ctx when no graph is recorded: saving is a no-op."""

    needs_input_grad = ()

    def save_for_backward(self, *tensors):
        pass

    def mark_non_differentiable(self, *args):
        pass

    def mark_dirty(self, *args):
        pass

    def set_materialize_grads(self, value):
        pass


class Function(Node):
    """An autograd op. Subclasses define static `forward(ctx, *args)` and `backward(ctx, *grads)`.

    Internal ops set `_raw = True`: their forward reads backend arrays (`t._arr`) and returns arrays.
    User subclasses (PyTorch style) compute with Tensors; their forward runs under no_grad."""

    _raw = False
    _save_output = False  # keep the (first) output for backward, without a reference cycle
    # Set by internal ops whose backward, without create_graph, returns a tuple with one gradient per
    # forward input, each None or already of that input's shape and dtype: the scheduler skips checking them.
    _exact_grads = False
    # Internal single-output ops with _exact_grads may also define a staticmethod _backward_arrays(ctx, g):
    # their backward without create_graph on backend arrays. `g` is the output's gradient as an array (any
    # strides; it must not be modified); the result is a tuple with one array or None per forward input, each
    # of that input's shape and dtype, freshly made and referenced by nothing else (not g, not saved state,
    # not another entry). The scheduler then passes arrays between such nodes and wraps only what a leaf's
    # .grad, a hook or a tensor-taking node sees (run_backward). Their backward() wraps the same arrays.

    # Elementwise ops set how many leading forward arguments are operands (tensors, or numbers torch wraps as
    # 0-d tensors): their array result is laid out like those operands, as torch's TensorIterator does
    # (tensor._laid_out): x.t() * 2 is transposed too.
    _elementwise = 0

    # Ops whose forward takes one tensor and then settings (views, reductions) set 1: the graph node gets an
    # edge for that tensor only, as torch's has (and recording skips the settings); 0: one per argument.
    _edges = 0

    _saved = ()
    _saved_versions = ()
    _nondiff = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "backward" in cls.__dict__ and "_backward_arrays" not in cls.__dict__:
            cls._backward_arrays = None  # a new backward is not the inherited array backward

    # --- ctx API -------------------------------------------------------------------------
    def save_for_backward(self, *tensors):
        self._saved = tensors
        self._saved_versions = [t._storage.version if t is not None else 0 for t in tensors]

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(FREED_MSG)
        saved = self._saved
        for t, v in zip(saved, self._saved_versions):
            if t is not None and t._storage.version != v:
                grad_fn = t.grad_fn.name() if t.grad_fn is not None else None
                where = f", which is output {t._output_nr} of {grad_fn}," if grad_fn else ""
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{t._dtype.name} tensor {list(t._shape)}]{where} is at version "
                    f"{t._storage.version}; expected version {v} instead. (saved by {self.name()})"
                )
        return saved

    @property
    def saved_output(self):
        """The op's output, re-linked to this node (PyTorch's saved-output trick: no cycle)."""
        alias = self._saved_output_unlinked()._alias()
        alias._rg = True
        alias.grad_fn = self
        return alias

    def _saved_output_unlinked(self):
        """The saved output, checked like saved_output but not linked to the graph (the node's own copy: read
        its array, never link or modify it). For a backward that computes in NumPy (no create_graph)."""
        if self._freed:
            raise RuntimeError(FREED_MSG)
        out, version = self._out
        if out._storage.version != version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: the output of {self.name()} is at version {out._storage.version}; expected "
                f"version {version} instead."
            )
        return out

    def mark_non_differentiable(self, *outputs):
        self._nondiff = set(id(o) for o in outputs)

    def mark_dirty(self, *args):
        pass

    def set_materialize_grads(self, value: bool):
        self._materialize = value

    # --- Node API ------------------------------------------------------------------------
    def name(self) -> str:
        return type(self).__name__ + "Backward0"

    @classmethod
    def _new_node(cls, args):
        """A graph node for `args` without running forward (in-place ops and views rewire history with it)."""
        node = cls.__new__(cls)
        st = state
        if st.scope is not None:
            node.scope = st.scope
        if st.anomaly:
            node._trace = traceback.format_stack()[:-2]
        if len(args) == 1:  # one tensor input (unary ops, views): the loop below without its lists
            a = args[0]
            if a._rg:
                gf = a.grad_fn
                node._next = ((gf, a._output_nr) if gf is not None else a._grad_edge(),)
                node.needs_input_grad = (True,)
            else:
                node._next = (None,)
                node.needs_input_grad = (False,)
            node._input_meta = [(a._shape, a._dtype)]
            node._seq = _next_seq()
            return node
        nf = []
        meta = []
        nig = []
        for a in args:
            if a.__class__ is Tensor or isinstance(a, Tensor):
                meta.append((a._shape, a._dtype))
                if a._rg:
                    gf = a.grad_fn  # _grad_edge inline (a made leaf's AccumulateGrad too): every recorded op
                    if gf is not None:
                        nf.append((gf, a._output_nr))
                    else:
                        acc = a._grad_acc
                        nf.append((acc, 0) if acc is not None else a._grad_edge())
                    nig.append(True)
                    continue
            else:
                meta.append(None)
            nf.append(None)
            nig.append(False)
        # numbered after its inputs' nodes, including any an input made just now (a view's grad_fn rebuilt
        # after an in-place op, views.py _TrackedView): backward's order relies on consumers numbering higher
        node._seq = _next_seq()
        node._next = tuple(nf)
        node._input_meta = meta
        node.needs_input_grad = tuple(nig)
        return node

    @classmethod
    def apply(cls, *args):
        if state.grad_enabled:
            for a in args:
                if (a.__class__ is Tensor or isinstance(a, Tensor)) and a._rg:
                    return cls._apply_recorded(args)
        if cls._raw:
            out = cls.forward(_NoGradCtx(), *args)
        else:
            prev = state.grad_enabled
            state.grad_enabled = False
            try:
                out = cls.forward(_NoGradCtx(), *args)
            finally:
                state.grad_enabled = prev
        n = cls._elementwise
        if n:
            out = _laid_out(out, args, n)
        if isinstance(out, tuple):
            return tuple(o if isinstance(o, Tensor) or o is None else _wrap_array(o) for o in out)
        return out if isinstance(out, Tensor) else _wrap_array(out)

    @classmethod
    def _apply_recorded(cls, args):
        """apply() when an input requires grad: record a node, run forward with it as ctx, link outputs."""
        node = cls._new_node(args[:cls._edges] if cls._edges else args)
        if cls._raw:
            out = cls.forward(node, *args)
            n = cls._elementwise
            if n:
                out = _laid_out(out, args, n)
            if out.__class__ is not tuple:
                # the common case, one output (a fresh array, or a view or laid-out result the forward made):
                # the general loop below does the same (per-op overhead), output number 0 being the default
                o = out if isinstance(out, Tensor) else _wrap_array(out)
                if o._dtype.is_floating_point and (not node._nondiff or id(out) not in node._nondiff):
                    o._rg = True
                    o.grad_fn = node
                if cls._save_output:
                    node._out = (o._alias(), o._storage.version)
                return o
        else:
            prev = state.grad_enabled
            state.grad_enabled = False
            try:
                out = cls.forward(node, *args)
            finally:
                state.grad_enabled = prev
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        nondiff = node._nondiff
        wrapped = []
        for i, o in enumerate(outs):
            if o is None:
                wrapped.append(None)
                continue
            diff = id(o) not in nondiff
            if isinstance(o, Tensor):
                if not cls._raw:
                    # A user forward may return an input or a tensor built under no_grad: alias it.
                    o = o._alias()
            else:
                o = _wrap_array(o)
            if diff and o._dtype.is_floating_point:
                o._rg = True
                o.grad_fn = node
                o._output_nr = i
            wrapped.append(o)
        if len(outs) != 1:
            node._n_outputs = len(outs)
        if not single:
            node._out_shapes = [o._shape if o is not None else None for o in wrapped]
        if cls._save_output:
            first = wrapped[0]
            node._out = (first._alias(), first._storage.version)
        return wrapped[0] if single else tuple(wrapped)


class AccumulateGrad(Node):
    """Sink for a leaf tensor's gradient: runs its hooks, then accumulates into `.grad`."""

    __slots__ = ("_variable",)

    def __init__(self, tensor):
        self._variable = weakref.ref(tensor)
        self._next = ()
        self._input_meta = [(tensor._shape, tensor._dtype)]
        self._seq = _next_seq()

    # How many leaf hooks are registered and not removed: while any is, backward schedules by dependency
    # counts (leaf accumulation timed exactly as torch's, which hooks can observe) instead of by sequence
    # number alone (run_backward). A hook whose leaf dies without remove() keeps counting (the slower
    # schedule is only slower).
    _hooked = 0

    def register_hook(self, fn):
        return _LeafHookHandle(super().register_hook(fn))

    def _add_pre_hook(self, output_nr, fn):
        return _LeafHookHandle(super()._add_pre_hook(output_nr, fn))

    @property
    def variable(self):
        return self._variable()

    def name(self) -> str:
        return "AccumulateGrad"
