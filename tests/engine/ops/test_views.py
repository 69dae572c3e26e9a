"""View ops: shape, strides and storage offset equal torch's; views share storage and write through."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_compare import arr, assert_geometry, close, pair, shares_storage

import engine

VIEW_CHAINS = {
    "view": lambda x: x.view(4, 6),
    "view_infer": lambda x: x.view(-1, 3),
    "reshape_view": lambda x: x.reshape(2, 12),
    "permute": lambda x: x.permute(2, 0, 1),
    "permute_neg": lambda x: x.permute(-1, -3, -2),
    "transpose": lambda x: x.transpose(0, 2),
    "transpose_then_view_last": lambda x: x.transpose(0, 1).view(3, 2, 2, 2),
    "T_2d": lambda x: x[0].T,
    "mT": lambda x: x.mT,
    "t": lambda x: x[:, 1].t(),
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "expand_new_dims": lambda x: x[0, 0].expand(3, 2, 4),
    "expand_minus_one": lambda x: x.unsqueeze(1).expand(-1, 3, -1, -1),
    "squeeze_all": lambda x: x[:, :1, :1].squeeze(),
    "squeeze_dim": lambda x: x[:, :1].squeeze(1),
    "squeeze_noop": lambda x: x.squeeze(0),
    "unsqueeze": lambda x: x.unsqueeze(0).unsqueeze(-1),
    "unsqueeze_mid_of_slice": lambda x: x[:, ::2].unsqueeze(2),
    "flatten": lambda x: x.flatten(),
    "flatten_range": lambda x: x.flatten(1, 2),
    "unflatten": lambda x: x.unflatten(2, (2, 2)),
    "narrow": lambda x: x.narrow(2, 1, 2),
    "narrow_neg": lambda x: x.narrow(-2, 1, 2).narrow(0, 1, 1),
    "unfold": lambda x: x.unfold(2, 2, 1),
    "unfold_step": lambda x: x.reshape(24).unfold(0, 5, 3),
    "as_strided": lambda x: x.as_strided((3, 3), (2, 1), 1),
    "select": lambda x: x.select(1, 2),
    "int_index": lambda x: x[1],
    "neg_int_index": lambda x: x[-1, -2],
    "step_slice": lambda x: x[:, ::2, 1::2],
    "slice_neg_bounds": lambda x: x[:, -2:, :-1],
    "none_index": lambda x: x[None, :, None, 1],
    "ellipsis": lambda x: x[..., 1],
    "ellipsis_none": lambda x: x[0, ..., None],
    "slice_then_transpose": lambda x: x[1:, ::2].transpose(1, 2),
    "diagonal": lambda x: x.diagonal(0, 1, 2),
    "diagonal_offset": lambda x: x.diagonal(1, -1, -2),
    "movedim": lambda x: x.movedim(0, -1),
    "empty_slice": lambda x: x[:, 3:1],
    "view_of_expand": lambda x: x[:1].expand(4, 3, 4).view(4, 12),
}


@pytest.mark.parametrize("name", list(VIEW_CHAINS))
def test_view_chain_geometry_and_values_equal_torch(name):
    fn = VIEW_CHAINS[name]
    e, t = pair(arr(2, 3, 4))
    ev, tv = fn(e), fn(t)
    assert_geometry(ev, tv)
    close(ev, tv)
    assert shares_storage(ev, e)


@pytest.mark.parametrize("chunks,dim", [(2, 0), (3, 1), (4, 2), (5, 2)])
def test_chunk_pieces_have_torch_geometry(chunks, dim):
    e, t = pair(arr(2, 3, 4))
    ep, tp = e.chunk(chunks, dim), t.chunk(chunks, dim)
    assert len(ep) == len(tp)
    for a, b in zip(ep, tp):
        assert_geometry(a, b)
        close(a, b)


@pytest.mark.parametrize("size", [1, 2, 3, [1, 3], [2, 0, 2]])
def test_split_pieces_have_torch_geometry(size):
    e, t = pair(arr(2, 3, 4))
    for a, b in zip(e.split(size, 2), t.split(size, 2), strict=True):
        assert_geometry(a, b)


def test_unbind_gives_views_of_each_slice():
    e, t = pair(arr(2, 3, 4))
    for a, b in zip(e.unbind(1), t.unbind(1), strict=True):
        assert_geometry(a, b)
        assert shares_storage(a, e)


@pytest.mark.parametrize("chain", [
    lambda x: x.transpose(0, 1).view(-1),
    lambda x: x.permute(2, 1, 0).view(24),
    lambda x: x[:, ::2].view(-1),
    lambda x: x.expand(2, 2, 3, 4).view(4, 12),
    lambda x: x.transpose(1, 2).view(2, 12),
])
def test_view_raises_where_torch_raises(chain):
    e, t = pair(arr(2, 3, 4))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        chain(t)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        chain(e)


@pytest.mark.parametrize("chain,copies", [
    (lambda x: x.reshape(6, 4), False),
    (lambda x: x.transpose(0, 1).reshape(-1), True),
    (lambda x: x.transpose(1, 2).reshape(2, 4, 3), False),
    (lambda x: x[:, ::2].reshape(2, 8), True),
    (lambda x: x[:, :, :2].reshape(6, 2), False),
    (lambda x: x[:, :, :2].reshape(12), True),
    (lambda x: x[:1].expand(3, 3, 4).reshape(9, 4), True),
    (lambda x: x[:1].expand(3, 3, 4).reshape(3, 3, 2, 2), False),
])
def test_reshape_copies_only_when_torch_does(chain, copies):
    e, t = pair(arr(2, 3, 4))
    er, tr = chain(e), chain(t)
    torch_copies = tr.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    assert torch_copies == copies
    assert (not shares_storage(er, e)) == copies
    close(er, tr)
    if not copies:
        assert_geometry(er, tr)


def test_views_record_their_base():
    e = engine.zeros(2, 3)
    v = e.t()[1:]
    assert v._base is e
    assert v._is_view() and not e._is_view()


def test_writes_through_a_chain_of_views_land_in_the_base():
    e, t = pair(np.zeros((2, 3, 4)))
    for x in (e, t):
        v = x.transpose(0, 2)[1:, ::2].unsqueeze(0)
        v[0, 0, 1, 0] = 5.0
        v.select(1, 1).fill_(2.0)
        x.narrow(2, 3, 1).mul_(3.0).add_(1.0)
        x.view(-1)[0] = -1.0
    close(e, t)


def test_numpy_shares_memory_both_ways():
    e = engine.zeros(2, 3)
    a = e.numpy()
    a[1, 2] = 7.0
    assert e[1, 2].item() == 7.0
    e[0, 0] = 3.0
    assert a[0, 0] == 3.0
    v = e.t().numpy()
    assert np.shares_memory(v, a) and v.strides == (4, 12)


def test_from_numpy_shares_memory():
    a = np.arange(6.0).reshape(2, 3)
    e = engine.from_numpy(a)
    e.add_(1)
    assert a[0, 0] == 1.0
    assert e.dtype == engine.float64


def test_detach_shares_storage_and_version_counter():
    x = engine.randn(3, 4, requires_grad=True)
    d = x.detach()
    assert shares_storage(d, x) and not d.requires_grad and d.is_leaf
    v0 = x._version
    d.add_(1.0)
    assert x._version == v0 + 1
    np.testing.assert_array_equal(d.numpy(), x.detach().numpy())


def test_contiguous_is_self_when_contiguous_and_copy_otherwise():
    e = engine.zeros(3, 4)
    assert e.contiguous() is e
    c = e.t().contiguous()
    assert c.is_contiguous() and not shares_storage(c, e)
    assert c.stride() == (3, 1)


def test_expand_of_size_one_dim_is_stride_zero_like_torch():
    e, t = pair(arr(3, 1))
    assert_geometry(e.expand(3, 5), t.expand(3, 5))
    assert_geometry(e.expand(2, 3, 5), t.expand(2, 3, 5))


def test_expand_of_non_singleton_raises_naming_sizes():
    e = engine.zeros(3, 2)
    with pytest.raises(RuntimeError, match=r"3.*4|4.*3"):
        e.expand(4, 2)


def test_view_of_0d_and_to_0d():
    e, t = pair(np.array(3.0))
    assert_geometry(e.view(1, 1), t.view(1, 1))
    assert_geometry(e.view(1, 1).view(()), t.view(1, 1).view(()))
    assert_geometry(e.unsqueeze(0), t.unsqueeze(0))


def test_as_strided_with_offset_on_a_view_is_absolute_like_torch():
    e, t = pair(arr(4, 5))
    ev = e[1:].as_strided((2, 2), (5, 1), 3)
    tv = t[1:].as_strided((2, 2), (5, 1), 3)
    assert_geometry(ev, tv)
    close(ev, tv)


def test_gradient_flows_back_through_a_chain_of_views():
    e, t = pair(arr(2, 3, 4), requires_grad=True)
    w = arr(3, 2, 1)
    outs = []
    for x, ww in ((e, engine.tensor(w)), (t, torch.tensor(w))):
        v = x.permute(1, 2, 0)[:, ::2].unflatten(1, (1, 2)).squeeze(1).narrow(2, 1, 1)
        (v * ww).sum().backward()
        outs.append(x.grad)
    close(*outs)
