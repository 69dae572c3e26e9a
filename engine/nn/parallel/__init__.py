"""engine.nn.parallel: DataParallel and DistributedDataParallel for one process on one device, so scripts
written for them run unchanged; the wrapped model is `.module` and its state_dict keys gain "module." as in
torch. Many devices or processes: `wiregrad export --to pytorch` and torchrun."""

from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
