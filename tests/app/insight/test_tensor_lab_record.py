"""The Tensor lab's model against torch and the engine: for a sweep of view/copy chains, each tensor's shape,
strides, offset, contiguity, storage sharing, element -> storage cell map and values are torch's for the same
chain (written here by hand in torch's API) and the engine's (the same code run on the engine); a failing op
carries the engine's exact error text (torch's too); an in-place write through one view shows in every other
view of that storage and in no copy; the chain's text is parsed, never evaluated."""
from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
import torch

import engine
from app.insight.tensor_lab import (
    COPY,
    FAILED,
    INPLACE,
    MAX_ELEMENTS,
    PRESETS,
    SAME,
    SOURCE,
    VIEW,
    LabSyntaxError,
    describe_step,
    describe_write,
    parse_chain,
    run_lab,
)


def steps(first, *ops):
    """The tensors of a straight chain: the first and each op's result in turn."""
    out = [first]
    for op in ops:
        out.append(op(out[-1]))
    return out


# (chain, the same chain in torch's API for a library L: the tensors of the chain in order)
CASES = {
    "transpose": ("arange(12).view(3, 4).t()",
                  lambda L: steps(L.arange(12), lambda t: t.view(3, 4), lambda t: t.t())),
    "permute": ("arange(24).view(2, 3, 4).permute(2, 0, 1)",
                lambda L: steps(L.arange(24), lambda t: t.view(2, 3, 4), lambda t: t.permute(2, 0, 1))),
    "transpose 3-D": ("arange(24).view(2, 3, 4).transpose(0, 2)",
                      lambda L: steps(L.arange(24), lambda t: t.view(2, 3, 4), lambda t: t.transpose(0, 2))),
    "expand": ("arange(3).view(3, 1).expand(3, 4)",
               lambda L: steps(L.arange(3), lambda t: t.view(3, 1), lambda t: t.expand(3, 4))),
    "unsqueeze expand": ("arange(4).unsqueeze(0).expand(3, -1)",
                         lambda L: steps(L.arange(4), lambda t: t.unsqueeze(0), lambda t: t.expand(3, -1))),
    "stepped slices": ("arange(16).view(4, 4)[::2, 1::2]",
                       lambda L: steps(L.arange(16), lambda t: t.view(4, 4), lambda t: t[::2, 1::2])),
    "column slice": ("arange(12).view(3, 4)[:, 1:3]",
                     lambda L: steps(L.arange(12), lambda t: t.view(3, 4), lambda t: t[:, 1:3])),
    "1-D stepped slice": ("arange(10)[1:9:3]", lambda L: steps(L.arange(10), lambda t: t[1:9:3])),
    "narrow": ("arange(12).view(3, 4).narrow(1, 1, 2)",
               lambda L: steps(L.arange(12), lambda t: t.view(3, 4), lambda t: t.narrow(1, 1, 2))),
    "view after contiguous": ("arange(12).view(3, 4).t().contiguous().view(12)",
                              lambda L: steps(L.arange(12), lambda t: t.view(3, 4), lambda t: t.t(),
                                              lambda t: t.contiguous(), lambda t: t.view(12))),
    "reshape copies": ("arange(12).view(3, 4).t().reshape(2, 6)",
                       lambda L: steps(L.arange(12), lambda t: t.view(3, 4), lambda t: t.t(),
                                       lambda t: t.reshape(2, 6))),
    "reshape views": ("arange(12).view(3, 4).reshape(2, 6)",
                      lambda L: steps(L.arange(12), lambda t: t.view(3, 4), lambda t: t.reshape(2, 6))),
    "select unsqueeze": ("arange(12).view(3, 4).select(1, 2).unsqueeze(1)",
                         lambda L: steps(L.arange(12), lambda t: t.view(3, 4), lambda t: t.select(1, 2),
                                         lambda t: t.unsqueeze(1))),
    "diagonal": ("arange(16).view(4, 4).diagonal()",
                 lambda L: steps(L.arange(16), lambda t: t.view(4, 4), lambda t: t.diagonal())),
    "unfold overlaps": ("arange(8).unfold(0, 3, 2)",
                        lambda L: steps(L.arange(8), lambda t: t.unfold(0, 3, 2))),
    "ellipsis and None": ("arange(24).view(2, 3, 4)[..., 1][None]",
                          lambda L: steps(L.arange(24), lambda t: t.view(2, 3, 4), lambda t: t[..., 1],
                                          lambda t: t[None])),
    "squeeze flatten": ("arange(6).view(1, 6, 1).squeeze(2).flatten()",
                        lambda L: steps(L.arange(6), lambda t: t.view(1, 6, 1), lambda t: t.squeeze(2),
                                        lambda t: t.flatten())),
    "clone then transpose": ("arange(6).view(2, 3).clone().t()",
                             lambda L: steps(L.arange(6), lambda t: t.view(2, 3), lambda t: t.clone(),
                                             lambda t: t.t())),
    "as_strided": ("arange(10).as_strided((3, 3), (2, 1), 1)",
                   lambda L: steps(L.arange(10), lambda t: t.as_strided((3, 3), (2, 1), 1))),
    "movedim": ("arange(24).view(2, 3, 4).movedim(0, 2)",
                lambda L: steps(L.arange(24), lambda t: t.view(2, 3, 4), lambda t: t.movedim(0, 2))),
    "mT": ("arange(12).view(2, 2, 3).mT",
           lambda L: steps(L.arange(12), lambda t: t.view(2, 2, 3), lambda t: t.mT)),
    "contiguous of contiguous": ("arange(6).view(2, 3).contiguous()",
                                 lambda L: steps(L.arange(6), lambda t: t.view(2, 3),
                                                 lambda t: t.contiguous())),
    "float copy": ("arange(6).float().view(3, 2)",
                   lambda L: steps(L.arange(6), lambda t: t.float(), lambda t: t.view(3, 2))),
    "integer index to 0-d": ("arange(12).view(3, 4)[1][2]",
                             lambda L: steps(L.arange(12), lambda t: t.view(3, 4), lambda t: t[1],
                                             lambda t: t[2])),
    "zeros, transpose, slice": ("zeros(2, 3).T[1:]",
                                lambda L: steps(L.zeros(2, 3), lambda t: t.T, lambda t: t[1:])),
    "branches of one storage": ("x = arange(12).view(3, 4); a = x[0]; b = x[:, 0]; c = x.t().contiguous()",
                                lambda L: _branches(L)),
    "slice then in-place add": ("x = arange(12).view(3, 4); s = x[:, 1:3]; s.add_(100)",
                                lambda L: _slice_add(L)),
    "in place through an expand's base": ("x = arange(3).view(3, 1); e = x.expand(3, 4); c = e.clone(); "
                                          "x.mul_(10)", lambda L: _expand_write(L)),
    "overlapping windows written": ("x = arange(8); w = x.unfold(0, 3, 2); x[4:].zero_()",
                                    lambda L: _unfold_write(L)),
}


def _branches(L):
    a0 = L.arange(12)
    x = a0.view(3, 4)
    t = x.t()
    return [a0, x, x[0], x[:, 0], t, t.contiguous()]


def _slice_add(L):
    a0 = L.arange(12)
    x = a0.view(3, 4)
    s = x[:, 1:3]
    s.add_(100)
    return [a0, x, s]


def _expand_write(L):
    a0 = L.arange(3)
    x = a0.view(3, 1)
    e = x.expand(3, 4)
    c = e.clone()
    x.mul_(10)
    return [a0, x, e, c]


def _unfold_write(L):
    x = L.arange(8)
    w = x.unfold(0, 3, 2)
    tail = x[4:]
    tail.zero_()
    return [x, w, tail]


def _cells_from_strides(t) -> tuple[int, ...]:
    """The storage cell under each element, from torch's own strides (the textbook formula, here only)."""
    return tuple(t.storage_offset() + sum(i * s for i, s in zip(idx, t.stride()))
                 for idx in itertools.product(*(range(n) for n in t.shape)))


def _flat(t) -> list:
    return np.asarray(t.numpy()).reshape(-1).tolist()


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_tensor_of_a_chain_is_torchs_and_the_engines(case):
    text, chain = CASES[case]
    result = run_lab(text)
    assert result.failed is None
    tensors = result.tensors
    ours, theirs = chain(engine), chain(torch)
    assert len(tensors) == len(ours) == len(theirs)
    for step, e, t in zip(tensors, ours, theirs):
        where = f"{case}: {step.name} = {step.expr}"
        # torch's numbers, and the engine's
        for lib_t in (t, e):
            assert step.shape == tuple(lib_t.shape), where
            assert step.strides == tuple(lib_t.stride()), where
            assert step.offset == lib_t.storage_offset(), where
            assert step.contiguous == lib_t.is_contiguous(), where
            assert list(step.values) == _flat(lib_t), where
        assert step.positions == _cells_from_strides(t), where
        assert step.dtype == str(t.dtype).split(".")[-1]
    # sharing: the same storage exactly where torch's tensors share one (and the engine's)
    for (i, a), (j, b) in itertools.combinations(enumerate(tensors), 2):
        same_torch = theirs[i].untyped_storage().data_ptr() == theirs[j].untyped_storage().data_ptr()
        same_engine = ours[i].untyped_storage() is ours[j].untyped_storage()
        assert (a.storage == b.storage) == same_torch == same_engine, f"{case}: {a.name}, {b.name}"
        assert (b.index in a.shares_with) == (same_torch and ours[i] is not ours[j])
    # the storage strips are the storages' cells as torch leaves them
    for step, t in zip(tensors, theirs):
        strip = result.storages[step.storage]
        cells = t.untyped_storage().nbytes() // t.element_size()
        assert list(strip.values) == t.as_strided((cells,), (1,), 0).tolist()
        assert step.index in strip.users


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_step_is_a_view_a_copy_or_the_same_tensor_as_torch_says(case):
    text, chain = CASES[case]
    result = run_lab(text)
    theirs = chain(torch)
    tensor_at = {s.index: theirs[k] for k, s in enumerate(result.tensors)}
    for step in result.tensors:
        if step.kind == SOURCE:
            assert step.source is None
            continue
        mine, src = tensor_at[step.index], tensor_at[step.source]
        if mine is src:
            assert step.kind == SAME
        elif mine.untyped_storage().data_ptr() == src.untyped_storage().data_ptr():
            assert step.kind == VIEW
        else:
            assert step.kind == COPY


ERRORS = {
    "view of a transpose": ("x = arange(12).view(3, 4); y = x.t(); y.view(12)",
                            lambda L: L.arange(12).view(3, 4).t().view(12)),
    "view to a wrong size": ("arange(12).view(5, 3)", lambda L: L.arange(12).view(5, 3)),
    "in place through an expand": ("x = arange(3).view(3, 1); x.expand(3, 4).add_(1)",
                                   lambda L: L.arange(3).view(3, 1).expand(3, 4).add_(1)),
    "negative step": ("arange(6)[::-1]", lambda L: L.arange(6)[::-1]),
    "permute with too few dims": ("arange(6).view(2, 3).permute(0)",
                                  lambda L: L.arange(6).view(2, 3).permute(0)),
    "float into an int tensor": ("arange(4).mul_(0.5)", lambda L: L.arange(4).mul_(0.5)),
    "narrow past the end": ("arange(6).narrow(0, 4, 3)", lambda L: L.arange(6).narrow(0, 4, 3)),
    "index out of range": ("arange(6).view(2, 3)[2]", lambda L: L.arange(6).view(2, 3)[2]),
    "t of a 3-D tensor": ("arange(8).view(2, 2, 2).t()", lambda L: L.arange(8).view(2, 2, 2).t()),
    "as_strided past the storage": ("arange(4).as_strided((3, 3), (1, 1), 2)",
                                    lambda L: L.arange(4).as_strided((3, 3), (1, 1), 2)),
}


def _error_of(fn, lib) -> BaseException:
    with pytest.raises(Exception) as info:  # noqa: PT011 - whichever the library raises is the point
        fn(lib)
    return info.value


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_a_failing_op_carries_the_engines_exact_error(case):
    text, fn = ERRORS[case]
    result = run_lab(text)
    failed = result.failed
    assert failed is not None and failed is result.steps[-1] and failed.kind == FAILED
    engine_error = _error_of(fn, engine)
    assert failed.error == str(engine_error).strip()
    assert failed.error_type == type(engine_error).__name__
    torch_error = _error_of(fn, torch)
    assert type(engine_error).__name__ == type(torch_error).__name__, case
    if case != "as_strided past the storage":  # torch names bytes where the engine names elements
        assert failed.error == str(torch_error).strip(), case
    # what ran before the failure is still there to look at
    assert result.tensors and all(s.kind != FAILED for s in result.steps[:-1])


def test_an_in_place_write_through_a_slice_shows_in_every_view_and_no_copy():
    result = run_lab("x = arange(12).view(3, 4); c = x.clone(); s = x[:, 1:3]; s.add_(100)")
    x, c, s = result.step("x"), result.step("c"), result.step("s")
    write = result.writes()[0]
    assert write.kind == INPLACE and write.expr == "s.add_(100)" and write.source == s.index
    a0, xt = torch.arange(12), None
    xt = a0.view(3, 4)
    ct = xt.clone()
    st = xt[:, 1:3]
    st.add_(100)
    assert list(x.values) == xt.reshape(-1).tolist() and list(s.values) == st.reshape(-1).tolist()
    assert list(c.values) == ct.reshape(-1).tolist() == list(range(12))  # the copy never saw the write
    assert write.written == tuple(sorted(_cells_from_strides(st))) == write.changed
    strip = result.storages[x.storage]
    assert strip.written == write.written and result.storages[c.storage].written == ()
    # the cells the write changed, as every tensor that sees them shows them
    for step in (result.step("t0"), x, s):
        seen = [k for k, cell in enumerate(step.positions) if cell in write.written]
        assert [step.values[k] for k in seen] == [strip.values[step.positions[k]] for k in seen]
        assert all(step.values[k] >= 100 for k in seen)
    assert describe_write(write, result) == "wrote 6 cells of storage A; seen by t0, x, s"


def test_a_write_to_one_cell_shows_in_every_element_an_expand_maps_onto_it():
    result = run_lab("x = arange(3).view(3, 1); e = x.expand(3, 4); x[1].fill_(7)")
    e = result.step("e")
    assert e.strides == (1, 0)
    assert [v for v, cell in zip(e.values, e.positions) if cell == 1] == [7, 7, 7, 7]
    write = result.writes()[0]
    assert write.written == (1,) and write.changed == (1,)
    assert "seen by t0, x, e" in describe_write(write, result)


def test_a_write_of_the_same_value_writes_but_changes_nothing():
    write = run_lab("x = zeros(4); x[1:3].fill_(0)").writes()[0]
    assert write.written == (1, 2) and write.changed == ()
    assert "changed 0" in describe_write(write, run_lab("x = zeros(4); x[1:3].fill_(0)"))


def test_metadata_lines_say_what_the_record_holds():
    result = run_lab("x = arange(12).view(3, 4); s = x[:, 1:3]; c = s.clone()")
    assert describe_step(result.step("s"), result) == [
        "shape (3, 2)", "stride (4, 1)", "offset 1", "contiguous: no", "storage A, shared with t0, x"]
    assert describe_step(result.step("c"), result)[-1] == "storage B, its own"


def test_records_pickle_and_every_preset_runs():
    for name, text in PRESETS.items():
        result = run_lab(text)
        assert pickle.loads(pickle.dumps(result)) == result, name
        assert result.tensors, name
    failed = run_lab(PRESETS["transpose then view fails"]).failed
    assert failed.error.startswith("view size is not compatible")


@pytest.mark.parametrize("text, message", [
    ("x = arange(12", "at column 14: expected ')', found the end"),
    ("x = arange(12).view(3, 4)) ", "at column 26: expected ';' or the end, found ')'"),
    ("y.view(3)", "at column 1: no tensor named 'y' yet"),
    ("x = arange(3); z.t()", "at column 16: no tensor named 'z' yet (the chain has x)"),
    ("x = arange(100)", "at column 5: arange(100) has 100 elements; the lab draws at most 64"),
    ("x = arange(3).numpy()", "at column 15: 'numpy' is not an op the lab knows"),
    ("x = arange(3).__class__", "at column 15: '__class__' is not an op the lab knows"),
    ("__import__(1)", "at column 1: '__import__' makes no tensor; start with arange(...), zeros(...), "
                      "ones(...)"),
    ("__import__('os')", "at column 12: unexpected \"'\""),
    ("x = arange(4) + 1", "at column 15: unexpected '+'"),
    ("x = arange(4)[1:2:3:4]", "a slice has at most two ':'"),
    ("", "the chain is empty"),
    ("x = arange(4); x.add_(1) if 1 else 0", "expected ';' or the end, found 'if'"),
])
def test_text_that_does_not_parse_says_where_in_one_line(text, message):
    with pytest.raises(LabSyntaxError) as info:
        run_lab(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value) and "Traceback" not in str(info.value)


def test_arguments_the_parser_takes_but_the_op_refuses_fail_with_the_engines_text():
    result = run_lab("x = arange(4).view(2.5)")  # a float where sizes go
    assert result.failed is not None
    assert result.failed.error == str(_error_of(lambda L: L.arange(4).view(2.5), engine))


def test_parsing_is_a_whitelist_not_python():
    statements = parse_chain("x = arange(12).view(3, 4); y = x[:, 1:3:2].T; x.add_(-1.5)")
    assert [s.target for s in statements] == ["x", "y", None]
    assert statements[1].calls[0].args == (slice(None), slice(1, 3, 2))
    assert statements[1].calls[0].text == "[:, 1:3:2]"
    assert statements[2].calls[0].args == (-1.5,)
    for hostile in ("arange(3).view(().__class__)", "arange(3).view(lambda: 0)", "exec('1')",
                    "arange(3)[print(1)]", "arange(3).view('3')"):
        with pytest.raises(LabSyntaxError):
            run_lab(hostile)


def test_a_tensor_too_big_to_draw_stops_the_chain_with_a_plain_line():
    result = run_lab("x = arange(4).view(4, 1); x.expand(4, 1000)")
    assert result.failed is not None and result.failed.error_type == "lab limit"
    assert result.failed.error == f"x.expand(4, 1000) has 4000 elements; the lab draws at most {MAX_ELEMENTS}"
