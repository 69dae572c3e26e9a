"""Multi-head attention and the Transformer encoder (layer and stack), with PyTorch's parameters and masks."""

from __future__ import annotations

import copy

from ... import dtypes as D
from ...autograd.grad_mode import no_grad
from ...ops.creation import empty, zeros
from ...ops.shape import cat
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..functional import sequence as FS
from ..parameter import Parameter
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"]


def _additive_mask(mask: Tensor | None, dtype: D.dtype, name: str) -> Tensor | None:
    """Bool masks (True = do not attend, MHA's convention) become 0 / -inf masks added to the scores."""
    if mask is None:
        return None
    if mask.dtype is D.bool_:
        return zeros(*mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask.to(dtype)


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's out_proj: a plain Linear under PyTorch's class name (so repr and type match)."""


class MultiheadAttention(Module):
    """Attention over num_heads subspaces of embed_dim: out_proj(concat_h softmax(q_h k_h^T / sqrt(d)) v_h).

    forward(query (L, N, E), key (S, N, kdim), value (S, N, vdim)) -> (output (L, N, E), weights (N, L, S)
    or None); batch_first=True puts N first. Bool masks mark positions NOT to attend (True = masked)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                f"num_heads={num_heads} instead"
            )
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        kw = {"device": device, "dtype": dtype}
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:  # one learned key and value appended to every sequence
            self.bias_k = Parameter(empty(1, 1, embed_dim, **kw))
            self.bias_v = Parameter(empty(1, 1, embed_dim, **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn  # a zero key and value appended to every sequence
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _in_projection(self, query: Tensor, key: Tensor, value: Tensor):
        E = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E : 2 * E], b[2 * E :])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:  # self-attention: one matmul for q, k and v
                return F.linear(query, w, b).chunk(3, -1)
            wq, wk, wv = w[:E], w[E : 2 * E], w[2 * E :]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ):
        batched = query.dim() == 3
        if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
            raise AssertionError(
                f"query, key and value must all be 2-D (unbatched) or 3-D (batched), got "
                f"{query.dim()}-D, {key.dim()}-D and {value.dim()}-D"
            )
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                "module method `generate_square_subsequent_mask` to create this mask."
            )
        if (batched and query is key and key is value and not need_weights and attn_mask is None
                and key_padding_mask is None):
            out = self._fused_self_attention(query)
            if out is not None:
                return out, None
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            # keep self-attention recognisable (one projection matmul) when the same tensor is passed thrice
            same_kv = key is value
            same_qk = query is key
            query = query.transpose(0, 1)
            key = query if same_qk else key.transpose(0, 1)
            value = key if same_kv else value.transpose(0, 1)
        L, N, E = query.shape
        S = key.shape[0]
        if E != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got {E}")
        if key.shape[:2] != value.shape[:2]:
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        if key.shape[1] != N:
            raise AssertionError(f"query batch size {N} does not match key batch size {key.shape[1]}")
        h, hd = self.num_heads, self.head_dim

        q, k, v = self._in_projection(query, key, value)
        if self.bias_k is not None:
            k = cat([k, self.bias_k.expand(1, N, E)])
            v = cat([v, self.bias_v.expand(1, N, E)])
        # (L, N, E) -> (N * h, L, hd): batch and heads fold into one batch dimension for bmm
        q = q.reshape(L, N * h, hd).transpose(0, 1)
        k = k.reshape(k.shape[0], N * h, hd).transpose(0, 1)
        v = v.reshape(v.shape[0], N * h, hd).transpose(0, 1)
        if self.add_zero_attn:
            k = cat([k, zeros(N * h, 1, hd, dtype=k.dtype, device=k.device)], 1)
            v = cat([v, zeros(N * h, 1, hd, dtype=v.dtype, device=v.device)], 1)
        extra = k.shape[1] - S  # appended keys attend unmasked: masks grow by zero columns

        mask = _additive_mask(attn_mask, q.dtype, "attn_mask")
        if mask is not None:
            if mask.dim() == 2:
                if tuple(mask.shape) != (L, S):
                    raise RuntimeError(
                        f"The shape of the 2D attn_mask is {mask.shape}, but should be {(L, S)}."
                    )
                mask = mask.unsqueeze(0)
            elif mask.dim() == 3:
                if tuple(mask.shape) != (N * h, L, S):
                    raise RuntimeError(
                        f"The shape of the 3D attn_mask is {mask.shape}, but should be {(N * h, L, S)}."
                    )
            else:
                raise RuntimeError(f"attn_mask's dimension {mask.dim()} is not supported")
        kpm = _additive_mask(key_padding_mask, q.dtype, "key_padding_mask")
        if kpm is not None:
            if kpm.dim() == 2 and kpm.shape[1] != S:
                raise AssertionError(f"Expected key_padded_mask.shape[1] to be {S}, but got {kpm.shape[1]}")
            if tuple(kpm.shape) != (N, S):
                raise AssertionError(
                    f"expecting key_padding_mask shape of {(N, S)}, but got {tuple(kpm.shape)}"
                )
            kpm = kpm.view(N, 1, 1, S).expand(N, h, 1, S).reshape(N * h, 1, S)
            mask = kpm if mask is None else mask + kpm
        if mask is not None and extra:
            mask = cat([mask, zeros(*mask.shape[:-1], extra, dtype=mask.dtype, device=mask.device)], -1)

        p = self.dropout if self.training else 0.0
        out, weights = FS._attention(q, k, v, mask, p, False, None, safe=not need_weights)
        out = out.transpose(0, 1).reshape(L * N, E)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias).view(L, N, E)

        if not batched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.view(N, h, L, S + extra)
        if average_attn_weights:
            weights = weights.mean(1)
        return out, (weights if batched else weights.squeeze(0))

    def _fused_self_attention(self, x: Tensor) -> Tensor | None:
        """Unmasked self-attention without dropout in the input's own layout: one projection GEMM, one fused
        node on the packed q, k, v (FS.packed_self_attention: no head copied), one output GEMM. None where
        that does not apply (separate or extra key/value weights, dropout in training, a GPU or half
        precision input): forward then runs the general form."""
        if (not self._qkv_same_embed_dim or self.bias_k is not None or self.add_zero_attn
                or (self.dropout > 0 and self.training) or x.shape[2] != self.embed_dim
                or not FS._fusable(x, x, x)):
            return None
        A, B, E = x.shape
        y = F.linear(x.reshape(A * B, E), self.in_proj_weight, self.in_proj_bias).view(A, B, 3 * E)
        o = FS.packed_self_attention(y, self.num_heads, self.batch_first)
        if o is None:
            return None
        return F.linear(o.view(A * B, E), self.out_proj.weight, self.out_proj.bias).view(A, B, E)

    def extra_repr(self) -> str:
        return ""


_ACTIVATIONS = {"relu": "relu", "gelu": "gelu"}


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with dropout, a residual and LayerNorm (post-norm by
    default; norm_first=True is pre-norm)."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation="relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise RuntimeError(f"activation should be relu/gelu, not {activation}")
            activation = getattr(F, _ACTIVATIONS[activation])
        self.activation = activation

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x: Tensor, attn_mask, key_padding_mask, is_causal: bool) -> Tensor:
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=is_causal,
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """A stack of num_layers deep copies of encoder_layer, then an optional final norm."""

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        out = src
        for layer in self.layers:
            out = layer(
                out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal)
            )
        if self.norm is not None:
            out = self.norm(out)
        return out


def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
    """A (sz, sz) float mask with -inf above the diagonal: position i attends to positions <= i."""
    with no_grad():
        m = zeros(sz, sz, device=device, dtype=dtype)
        return m.masked_fill(_upper(sz, device), float("-inf"))


def _upper(sz: int, device) -> Tensor:
    from ...ops.creation import ones

    return ones(sz, sz, dtype=D.bool_, device=device).triu(1)
