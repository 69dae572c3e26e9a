"""DistributedDataParallel in a world of one process (engine.distributed): gradients need no averaging across
ranks, so forward and backward are the wrapped module's own."""

from __future__ import annotations

from contextlib import contextmanager

from ... import distributed as dist
from ..modules.module import Module


class DistributedDataParallel(Module):
    """torch.nn.parallel.DistributedDataParallel for world size 1, after init_process_group (torch's rule);
    no_sync() and join() are accepted (there is nothing to synchronise)."""

    def __init__(
        self,
        module: Module,
        device_ids=None,
        output_device=None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        init_sync: bool = True,
        process_group=None,
        bucket_cap_mb=None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
        delay_all_reduce_named_params=None,
        param_to_hook_all_reduce=None,
        mixed_precision=None,
        device_mesh=None,
        skip_all_reduce_unused_params=False,
    ):
        super().__init__()
        if process_group is None:
            dist.get_rank()  # torch's ValueError when init_process_group was not called
        if device_ids is not None and len(list(device_ids)) > 1:
            raise ValueError("device_ids can only be None or contain a single element.")
        self.module = module
        self.device_ids = None if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    @contextmanager
    def no_sync(self):
        """Gradient accumulation without all-reduce: with one rank every step is already in sync."""
        before = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = before

    @contextmanager
    def join(
        self,
        divide_by_initial_world_size: bool = True,
        enable: bool = True,
        throw_on_early_termination: bool = False,
    ):
        yield

    def _set_static_graph(self) -> None:
        self.static_graph = True
