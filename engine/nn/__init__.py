"""engine.nn: Module, Parameter, layers, losses, functional, init and utils (PyTorch's torch.nn API)."""

from . import functional, init, utils  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .modules.module import Module  # noqa: F401
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter  # noqa: F401

__all__ = [
    "Module", "Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer",
    "functional", "init", "utils",
] + list(_modules_all)

# engine.nn.parallel (DataParallel, DistributedDataParallel) wraps the modules above, so it comes after them
from . import parallel  # noqa: E402,F401
from .parallel import DataParallel  # noqa: E402,F401  (torch.nn.DataParallel)
