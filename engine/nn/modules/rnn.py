"""Recurrent layers RNN, LSTM, GRU and their cells, with PyTorch's parameter names, gate order and init.

Per layer and direction, one matmul projects the whole input sequence and one fused op runs the recurrence.
A PackedSequence input (engine.nn.utils.rnn) gives a PackedSequence output; its recurrence runs one fused op
per stretch of time steps with the same batch size, so each sequence's final state is at its own length."""

from __future__ import annotations

import math

from ...ops.creation import empty, zeros
from ...ops.shape import cat, stack
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..functional import sequence as FS
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _project(x: Tensor, w_ih: Tensor, bias: Tensor | None) -> Tensor:
    """x (T, B, I) -> x W_ih^T + bias as (T, B, G): one matmul for every time step."""
    T, B, _ = x.shape
    return F.linear(x.reshape(T * B, x.shape[2]), w_ih, bias).view(T, B, w_ih.shape[0])


def _sum_biases(b_ih: Tensor | None, b_hh: Tensor | None) -> Tensor | None:
    return None if b_ih is None else b_ih + b_hh


def _register_weights(
    module: Module, suffix: str, gate_size: int, input_size: int, hidden_in: int, bias: bool, factory: dict
) -> list[str]:
    """weight_ih, weight_hh (and bias_ih, bias_hh) with `suffix`, in PyTorch's registration order."""
    names = [f"weight_ih{suffix}", f"weight_hh{suffix}"]
    shapes = [(gate_size, input_size), (gate_size, hidden_in)]
    if bias:
        names += [f"bias_ih{suffix}", f"bias_hh{suffix}"]
        shapes += [(gate_size,), (gate_size,)]
    for name, shape in zip(names, shapes):
        setattr(module, name, Parameter(empty(*shape, **factory)))
    return names


def _uniform_reset(module: Module) -> None:
    """PyTorch's recurrent init: every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
    bound = 1.0 / math.sqrt(module.hidden_size)
    for w in module.parameters():
        init.uniform_(w, -bound, bound)


def _constant_batch_segments(batch_sizes: list[int]) -> list[tuple[int, int, int]]:
    """Packed rows grouped into runs of time steps with equal batch size: (first row, end row, batch)."""
    segments, row = [], 0
    for b in batch_sizes:
        if segments and segments[-1][2] == b:
            segments[-1] = (segments[-1][0], row + b, b)
        else:
            segments.append((row, row + b, b))
        row += b
    return segments


def _check_type(name: str, value, kind: type) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{name} should be of type {kind.__name__}, got: {type(value).__name__}")


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
        if dropout > 0 and num_layers == 1:
            import warnings

            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}",
                UserWarning,
                stacklevel=2,
            )
        _check_type("bias", bias, bool)
        _check_type("batch_first", batch_first, bool)
        _check_type("input_size", input_size, int)
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        _check_type("hidden_size", hidden_size, int)
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        factory = {"device": device, "dtype": dtype}
        gate_size = _GATES[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * num_directions
            for direction in range(num_directions):
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                names = _register_weights(self, suffix, gate_size, layer_input, real_hidden, bias, factory)
                if proj_size > 0:
                    names.append(f"weight_hr{suffix}")
                    setattr(self, names[-1], Parameter(empty(proj_size, hidden_size, **factory)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    reset_parameters = _uniform_reset

    def flatten_parameters(self) -> None:
        """A no-op kept for PyTorch compatibility (there is no cuDNN weight buffer to compact)."""

    @property
    def all_weights(self) -> list:
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def _layer_weights(self, layer: int, direction: int) -> dict:
        """This layer and direction's weight_ih, weight_hh, bias_ih, bias_hh, weight_hr (None if absent)."""
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        kinds = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
        return {k: getattr(self, k + suffix, None) for k in kinds}

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
        lstm = self.mode == "LSTM"
        h_size = self.proj_size if self.proj_size > 0 else self.hidden_size
        expected = [(self.num_layers * D, B, h_size), (self.num_layers * D, B, self.hidden_size)]
        if hx is None:
            states = [zeros(*shape, dtype=input.dtype, device=input.device) for shape in expected[: 1 + lstm]]
            return input, batched, states
        states = list(hx) if lstm else [hx]
        if len(states) != 1 + lstm:
            raise RuntimeError(f"{name}: expected hx to be a tuple (h_0, c_0), got {len(states)} tensors")
        want = 3 if batched else 2
        if any(s.dim() != want for s in states):
            kind = "batched" if batched else "unbatched"
            if lstm:
                got = ", ".join(f"{s.dim()}-D" for s in states)
                raise RuntimeError(
                    f"For {kind} {want}-D input, hx and cx should also be {want}-D but got ({got}) tensors"
                )
            raise RuntimeError(
                f"For {kind} {want}-D input, hx should also be {want}-D but got {states[0].dim()}-D tensor"
            )
        if not batched:
            states = [s.unsqueeze(1) for s in states]
        for k, (s, shape) in enumerate(zip(states, expected)):
            if tuple(s.shape) != shape:
                label = f"hidden[{k}]" if lstm else "hidden"
                raise RuntimeError(f"Expected {label} size {shape}, got {list(s.shape)}")
        return input, batched, states

    def _input_gates(self, w: dict, x: Tensor) -> Tensor:
        """x W_ih^T plus the biases that sit outside the recurrence, for (T, B, I) or packed (N, I) x."""
        bias = w["bias_ih"] if self.mode == "GRU" else _sum_biases(w["bias_ih"], w["bias_hh"])
        return _project(x, w["weight_ih"], bias) if x.dim() == 3 else F.linear(x, w["weight_ih"], bias)

    def _recur(self, w: dict, xg: Tensor, h0: Tensor, c0: Tensor | None, reverse: bool):
        """The fused recurrence over xg (T, B, G): (output (T, B, H), h_n, c_n or None)."""
        if self.mode == "LSTM":
            return FS.lstm_layer(xg, w["weight_hh"], h0, c0, reverse, w["weight_hr"])
        if self.mode == "GRU":
            out, h = FS.gru_layer(xg, w["weight_hh"], w["bias_hh"], h0, reverse)
        else:
            step = FS.rnn_tanh_layer if self.mode == "RNN_TANH" else FS.rnn_relu_layer
            out, h = step(xg, w["weight_hh"], h0, reverse)
        return out, h, None

    def _layers(self, x: Tensor, states: list, run) -> tuple:
        """Stack the layers and directions; run(w, x, h0, c0, reverse) -> (out, h_n, c_n) does one."""
        D = 2 if self.bidirectional else 1
        lstm = self.mode == "LSTM"
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(D):
                idx = layer * D + direction
                w = self._layer_weights(layer, direction)
                out, h, c = run(w, x, states[0][idx], states[1][idx] if lstm else None, direction == 1)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if D == 1 else cat(outs, outs[0].dim() - 1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, stack(h_n), stack(c_n) if lstm else None

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        x, batched, states = self._prepare(input, hx)

        def run(w, x, h0, c0, reverse):
            return self._recur(w, self._input_gates(w, x), h0, c0, reverse)

        x, h_n, c_n = self._layers(x, states, run)
        if not batched:
            x, h_n = x.squeeze(1), h_n.squeeze(1)
        elif self.batch_first:
            x = x.transpose(0, 1)
        if self.mode != "LSTM":
            return x, h_n
        return x, (h_n, c_n if batched else c_n.squeeze(1))

    # ------------------------------------------------------------------ packed sequences
    def _packed_states(self, hx, batch: int, data: Tensor, sorted_indices: Tensor | None) -> list:
        """Initial states in the packed (sorted) batch order, checked like torch's check_forward_args."""
        D = 2 if self.bidirectional else 1
        lstm = self.mode == "LSTM"
        h_size = self.proj_size if self.proj_size > 0 else self.hidden_size
        expected = [(self.num_layers * D, batch, h_size), (self.num_layers * D, batch, self.hidden_size)]
        if hx is None:
            return [zeros(*shape, dtype=data.dtype, device=data.device) for shape in expected[: 1 + lstm]]
        states = list(hx) if lstm else [hx]
        for k, (s, shape) in enumerate(zip(states, expected)):
            if tuple(s.shape) != shape:
                label = f"hidden[{k}]" if lstm else "hidden"
                raise RuntimeError(f"Expected {label} size {shape}, got {list(s.shape)}")
        if sorted_indices is not None:
            states = [s.index_select(1, sorted_indices) for s in states]
        return states

    def _forward_packed(self, packed: PackedSequence, hx):
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        if data.dim() != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.dim()}")
        if data.shape[1] != self.input_size:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got {data.shape[1]}"
            )
        sizes = [int(b) for b in batch_sizes.tolist()]
        states = self._packed_states(hx, sizes[0], data, sorted_indices)
        segments = _constant_batch_segments(sizes)

        def run(w, x, h0, c0, reverse):
            return self._recur_packed(w, self._input_gates(w, x), segments, h0, c0, reverse)

        out, h_n, c_n = self._layers(data, states, run)
        output = PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
        if unsorted_indices is not None:
            h_n = h_n.index_select(1, unsorted_indices)
            c_n = None if c_n is None else c_n.index_select(1, unsorted_indices)
        return output, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def _recur_packed(
        self, w: dict, xg: Tensor, segments: list, h0: Tensor, c0: Tensor | None, reverse: bool
    ):
        """The recurrence over packed rows xg (N, G), one fused call per run of steps with the same batch
        size. Going forward, sequences drop out of the bottom of the batch as they end (their final state is
        kept); going backward, they join with their own initial state. Returns (out (N, H), h_n, c_n)."""
        G = xg.shape[1]
        lstm = c0 is not None
        outs, finished = [], []
        h = c = None
        for start, stop, b in reversed(segments) if reverse else segments:
            if h is None:
                h, c = h0[:b], c0[:b] if lstm else None
            elif b < h.shape[0]:  # forward: rows b.. have ended
                finished.append((h[b:], c[b:] if lstm else None))
                h, c = h[:b], c[:b] if lstm else None
            elif b > h.shape[0]:  # backward: rows from h's end to b start here
                n = h.shape[0]
                h = cat([h, h0[n:b]])
                c = cat([c, c0[n:b]]) if lstm else None
            steps = (stop - start) // b
            out, h, c = self._recur(w, xg[start:stop].view(steps, b, G), h, c, reverse)
            outs.append(out.reshape(steps * b, out.shape[2]))
        if reverse:
            outs.reverse()
        h_parts = [h] + [f[0] for f in reversed(finished)]
        c_parts = [c] + [f[1] for f in reversed(finished)] if lstm else None
        h_n = h_parts[0] if len(h_parts) == 1 else cat(h_parts)
        c_n = None if not lstm else c_parts[0] if len(c_parts) == 1 else cat(c_parts)
        return (outs[0] if len(outs) == 1 else cat(outs)), h_n, c_n

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


def _no_projection(kwargs: dict) -> None:
    if "proj_size" in kwargs:
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh) (or relu). Returns (output, h_n).

    RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False,
    dropout=0.0, bidirectional=False, device=None, dtype=None), positional or by keyword, like PyTorch."""

    def __init__(self, *args, **kwargs) -> None:
        _no_projection(kwargs)
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)


class LSTM(RNNBase):
    """LSTM with gates i, f, g, o. Returns (output, (h_n, c_n)).

    LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0, device=None, dtype=None); proj_size > 0 projects each h_t to
    proj_size features with weight_hr_l{k}."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """GRU with gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)). Returns (output, h_n).

    GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, device=None, dtype=None)."""

    def __init__(self, *args, **kwargs) -> None:
        _no_projection(kwargs)
        super().__init__("GRU", *args, **kwargs)


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
        gate_size = num_chunks * hidden_size
        _register_weights(
            self, "", gate_size, input_size, hidden_size, bias, {"device": device, "dtype": dtype}
        )
        if not bias:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = _uniform_reset

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
            for k, st in enumerate(states):
                if st.dim() not in (1, 2):
                    raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {st.dim()}D instead")
                if st.dim() != want:
                    raise RuntimeError(f"{name}: Expected hidden to be {want}D, got {st.dim()}D instead")
                if not batched:
                    st = states[k] = st.unsqueeze(0)
                if st.shape[1] != self.hidden_size:
                    raise RuntimeError(
                        f"hidden{k} has inconsistent hidden_size: got {st.shape[1]}, "
                        f"expected {self.hidden_size}"
                    )
                if st.shape[0] != B:
                    raise RuntimeError(
                        f"Input batch size {B} doesn't match hidden{k} batch size {st.shape[0]}"
                    )
        return input.unsqueeze(0), batched, states

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
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
