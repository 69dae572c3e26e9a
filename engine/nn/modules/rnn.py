"""Recurrent layers RNN, LSTM, GRU and their cells, with PyTorch's parameter names, gate order and init.

Per layer and direction, one matmul projects the whole input sequence and one fused op runs the recurrence."""

from __future__ import annotations

import math

from ...ops.creation import empty, zeros
from ...ops.shape import cat, stack
from ...tensor import Tensor
from .. import functional as F
from .. import functional_seq as FS
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _project(x: Tensor, w_ih: Tensor, bias: Tensor | None) -> Tensor:
    """x (T, B, I) -> x W_ih^T + bias as (T, B, G): one matmul for every time step."""
    T, B, _ = x.shape
    return F.linear(x.reshape(T * B, x.shape[2]), w_ih, bias).view(T, B, w_ih.shape[0])


def _sum_biases(b_ih: Tensor | None, b_hh: Tensor | None) -> Tensor | None:
    return None if b_ih is None else b_ih + b_hh


class RNNBase(Module):
    """Shared set-up of RNN, LSTM and GRU: parameters `weight_ih_l{k}[_reverse]` etc., in PyTorch's order."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an "
                "element being zeroed"
            )
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive integer, got {hidden_size}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be a positive integer, got {num_layers}")
        if proj_size != 0:
            raise NotImplementedError("LSTM proj_size is not supported by Wiregrad's engine")
        if dropout > 0 and num_layers == 1:
            import warnings

            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}",
                UserWarning,
                stacklevel=2,
            )
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * num_directions
            for direction in range(num_directions):
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                for name, shape in shapes:
                    full = f"{name}_l{layer}{suffix}"
                    setattr(self, full, Parameter(empty(*shape, device=device, dtype=dtype)))
                    self._flat_weights_names.append(full)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -bound, bound)

    def flatten_parameters(self) -> None:
        """A no-op kept for PyTorch compatibility (there is no cuDNN weight buffer to compact)."""

    @property
    def all_weights(self) -> list:
        per = 4 if self.bias else 2
        ws = [getattr(self, n) for n in self._flat_weights_names]
        return [ws[i : i + per] for i in range(0, len(ws), per)]

    def _layer_weights(self, layer: int, direction: int):
        suffix = "_reverse" if direction == 1 else ""
        w_ih = getattr(self, f"weight_ih_l{layer}{suffix}")
        w_hh = getattr(self, f"weight_hh_l{layer}{suffix}")
        if not self.bias:
            return w_ih, w_hh, None, None
        b_ih, b_hh = getattr(self, f"bias_ih_l{layer}{suffix}"), getattr(self, f"bias_hh_l{layer}{suffix}")
        return w_ih, w_hh, b_ih, b_hh

    def _prepare(self, input: Tensor, hx):
        """Time-major (T, B, I) input and a list of initial-state tensors (num_layers * D, B, H)."""
        name = type(self).__name__
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D tensor instead")
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[2] != self.input_size:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                f"{input.shape[2]}"
            )
        B = input.shape[1]
        D = 2 if self.bidirectional else 1
        expected = (self.num_layers * D, B, self.hidden_size)
        n_states = 2 if self.mode == "LSTM" else 1
        if hx is None:
            states = [zeros(*expected, dtype=input.dtype, device=input.device) for _ in range(n_states)]
        else:
            states = list(hx) if self.mode == "LSTM" else [hx]
            if len(states) != n_states:
                raise RuntimeError(f"{name}: expected hx to be a tuple (h_0, c_0), got {len(states)} tensors")
            want = 2 if not batched else 3
            for s in states:
                if s.dim() != want:
                    kind = "unbatched" if not batched else "batched"
                    raise RuntimeError(
                        f"For {kind} {want}-D input, hx should also be {want}-D but got {s.dim()}-D tensor"
                    )
            if not batched:
                states = [s.unsqueeze(1) for s in states]
            labels = ("hidden", "cell")
            for label, s in zip(labels, states):
                if tuple(s.shape) != expected:
                    shown = expected if batched else (expected[0], expected[2])
                    got = list(s.shape) if batched else [s.shape[0], s.shape[2]]
                    raise RuntimeError(f"Expected {label} size {shown}, got {got}")
        return input, batched, states

    def forward(self, input: Tensor, hx=None):
        x, batched, states = self._prepare(input, hx)
        D = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(D):
                reverse = direction == 1
                w_ih, w_hh, b_ih, b_hh = self._layer_weights(layer, direction)
                idx = layer * D + direction
                h0 = states[0][idx]
                if self.mode == "LSTM":
                    xg = _project(x, w_ih, _sum_biases(b_ih, b_hh))
                    out, h, c = FS.lstm_layer(xg, w_hh, h0, states[1][idx], reverse)
                    c_n.append(c)
                elif self.mode == "GRU":
                    out, h = FS.gru_layer(_project(x, w_ih, b_ih), w_hh, b_hh, h0, reverse)
                else:
                    step = FS.rnn_tanh_layer if self.mode == "RNN_TANH" else FS.rnn_relu_layer
                    out, h = step(_project(x, w_ih, _sum_biases(b_ih, b_hh)), w_hh, h0, reverse)
                outs.append(out)
                h_n.append(h)
            x = outs[0] if D == 1 else cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        h_n = stack(h_n)
        if not batched:
            x, h_n = x.squeeze(1), h_n.squeeze(1)
        elif self.batch_first:
            x = x.transpose(0, 1)
        if self.mode != "LSTM":
            return x, h_n
        c_n = stack(c_n)
        return x, (h_n, c_n if batched else c_n.squeeze(1))

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh) (or relu). Returns (output, h_n)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(
            mode,
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device=device,
            dtype=dtype,
        )

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s + ", nonlinearity='relu'" if self.nonlinearity == "relu" else s


class LSTM(RNNBase):
    """LSTM with gates i, f, g, o. Returns (output, (h_n, c_n))."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            "LSTM",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device=device,
            dtype=dtype,
        )


class GRU(RNNBase):
    """GRU with gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)). Returns (output, h_n)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            "GRU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device=device,
            dtype=dtype,
        )


# ----------------------------------------------------------------------------- cells
class RNNCellBase(Module):
    """One time step: parameters weight_ih, weight_hh, bias_ih, bias_hh; init U(-1/sqrt(H), 1/sqrt(H))."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None
    ) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty(num_chunks * hidden_size, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(empty(num_chunks * hidden_size, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -bound, bound)

    def _prepare(self, input: Tensor, hx, n_states: int):
        """(1, B, I) input and (B, H) states, plus whether the input had a batch dimension."""
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input has inconsistent input_size: got {input.shape[-1]} expected {self.input_size}"
            )
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        B = input.shape[0]
        if hx is None:
            states = [
                zeros(B, self.hidden_size, dtype=input.dtype, device=input.device) for _ in range(n_states)
            ]
        else:
            states = list(hx) if n_states == 2 else [hx]
            want = 2 if batched else 1
            for k, s in enumerate(states):
                if s.dim() != want:
                    raise RuntimeError(f"{name}: Expected hidden to be {want}D, got {s.dim()}D instead")
                if not batched:
                    s = states[k] = s.unsqueeze(0)
                if tuple(s.shape) != (B, self.hidden_size):
                    raise RuntimeError(
                        f"hidden{k} has inconsistent hidden_size: got {list(s.shape)}, "
                        f"expected {[B, self.hidden_size]}"
                    )
        return input.unsqueeze(0), batched, states

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        return s


class RNNCell(RNNCellBase):
    """h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (or relu)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device=None,
        dtype=None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, batched, (h,) = self._prepare(input, hx, 1)
        step = FS.rnn_tanh_layer if self.nonlinearity == "tanh" else FS.rnn_relu_layer
        _, h = step(_project(x, self.weight_ih, _sum_biases(self.bias_ih, self.bias_hh)), self.weight_hh, h)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; returns (h', c')."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx=None):
        x, batched, (h, c) = self._prepare(input, hx, 2)
        _, h, c = FS.lstm_layer(
            _project(x, self.weight_ih, _sum_biases(self.bias_ih, self.bias_hh)), self.weight_hh, h, c
        )
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step; returns h'."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, batched, (h,) = self._prepare(input, hx, 1)
        _, h = FS.gru_layer(_project(x, self.weight_ih, self.bias_ih), self.weight_hh, self.bias_hh, h)
        return h if batched else h.squeeze(0)
