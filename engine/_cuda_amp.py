"""engine.cuda.amp: the older torch.cuda.amp spelling of autocast and GradScaler, fixed to device 'cuda'.

Without CUDA both disable themselves with a warning, as PyTorch's do; engine.amp is the current API."""
from __future__ import annotations

import sys

from . import cuda as _cuda
from . import dtypes as D
from .amp import GradScaler as _GradScaler
from .amp import autocast as _autocast


class autocast(_autocast):  # noqa: N801 - PyTorch's name
    """torch.cuda.amp.autocast(...) == engine.amp.autocast('cuda', ...)."""

    def __init__(self, enabled: bool = True, dtype: D.dtype = D.float16, cache_enabled: bool = True):
        super().__init__("cuda", dtype, enabled, cache_enabled)


class GradScaler(_GradScaler):
    """torch.cuda.amp.GradScaler(...) == engine.amp.GradScaler('cuda', ...)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


# `from engine.cuda.amp import autocast, GradScaler` works like the torch import the study texts use
_cuda.amp = sys.modules[__name__]
sys.modules[_cuda.__name__ + ".amp"] = sys.modules[__name__]
