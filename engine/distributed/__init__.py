"""engine.distributed: torch.distributed for a world of one process, so scripts written for torchrun run
unchanged as a single process (`python train.py`, or torchrun with one process).

init_process_group with world size 1 (the default, or WORLD_SIZE=1 from a launcher) makes this process rank 0;
the collectives (all_reduce, broadcast, all_gather, reduce, barrier) are then exact for one participant: the
tensor already holds the sum, mean, min, max or product over the group. A world of more than one process
raises a RuntimeError that names Wiregrad's way there: `wiregrad export --to pytorch` writes a PyTorch script
of the graph that torchrun launches on many processes and GPUs."""

from __future__ import annotations

import enum
import os
from datetime import timedelta

_NOT_INITIALIZED = (
    "Default process group has not been initialized, please make sure to call init_process_group."
)
_MULTI = (
    "engine.distributed: a world of {n} processes was asked for, but Wiregrad's engine trains in one "
    "process. Run the script as one process (world size 1), or for many processes and GPUs export the "
    "graph with `wiregrad export --to pytorch` and launch the script it writes with torchrun"
)

_group: dict | None = None  # the default process group once initialised: backend, rank, world size


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"

    def __repr__(self) -> str:
        return f"<RedOpType.{self.name}: {list(ReduceOp).index(self)}>"


class Backend(str):
    """The backend names torch knows; a string, as torch.distributed.Backend is."""

    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"
    UCC = "ucc"

    def __new__(cls, name: str):
        return str.__new__(cls, name.lower())


class _Work:
    """What an async_op=True collective returns: already complete (there is no one else to wait for)."""

    def wait(self, timeout: timedelta | None = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True


class group:  # noqa: N801 - torch.distributed.group
    WORLD = None


GroupMember = group


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return _group is not None


def is_nccl_available() -> bool:
    return False


def is_gloo_available() -> bool:
    return True


def is_mpi_available() -> bool:
    return False


def is_torchelastic_launched() -> bool:
    """True when a launcher (torchrun) started this process: TORCHELASTIC_RUN_ID is set (torch's test)."""
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def _env_int(name: str, given: int, default: int) -> int:
    if given != -1:
        return int(given)
    value = os.environ.get(name)
    try:
        return int(value) if value is not None else default
    except ValueError:
        raise ValueError(
            f"engine.distributed: the environment variable {name}={value!r} is not a whole number"
        ) from None


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
    _ranks=None,
) -> None:
    """Join the default process group. world_size and rank come from the arguments or, at -1, from
    WORLD_SIZE and RANK as a launcher sets them (1 and 0 when unset); only a world of one is possible."""
    global _group
    if _group is not None:
        raise ValueError("trying to initialize the default process group twice!")
    size = _env_int("WORLD_SIZE", world_size, 1)
    me = _env_int("RANK", rank, 0)
    if size > 1:
        raise RuntimeError(_MULTI.format(n=size))
    if size < 1 or me != 0:
        raise ValueError(
            f"engine.distributed: rank {me} in a world of size {size}; a world of one process has rank 0"
        )
    _group = {"backend": Backend(backend or "gloo"), "rank": 0, "world_size": 1}


def destroy_process_group(group=None) -> None:
    global _group
    _group = None


def _require():
    if _group is None:
        raise ValueError(_NOT_INITIALIZED)
    return _group


def get_rank(group=None) -> int:
    return _require()["rank"]


def get_world_size(group=None) -> int:
    return _require()["world_size"]


def get_backend(group=None) -> str:
    return _require()["backend"]


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError(
        "LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
        "`get_node_local_rank` to work, assuming you are not running in a multi-device context "
        "and want the code to run locally instead."
    )


def new_group(
    ranks=None,
    timeout=None,
    backend=None,
    pg_options=None,
    use_local_synchronization=False,
    group_desc=None,
    device_id=None,
):
    _require()
    if ranks is not None and sorted(ranks) not in ([], [0]):
        raise ValueError(
            f"engine.distributed: ranks {list(ranks)} are not in a world of one process (rank 0)"
        )
    return group.WORLD


def _done(async_op: bool):
    return _Work() if async_op else None


def barrier(group=None, async_op: bool = False, device_ids=None):
    _require()
    return _done(async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """The reduction over one rank is the tensor itself, for every op (AVG divides a sum of one by one)."""
    _require()
    return _done(async_op)


def reduce(
    tensor, dst: int | None = None, op=ReduceOp.SUM, group=None, async_op: bool = False, group_dst=None
):
    _require()
    return _done(async_op)


def broadcast(tensor, src: int | None = None, group=None, async_op: bool = False, group_src=None):
    _require()
    return _done(async_op)


def all_gather(tensor_list: list, tensor, group=None, async_op: bool = False):
    """tensor_list[0] receives a copy of the one rank's tensor."""
    _require()
    if len(tensor_list) != 1:
        raise ValueError(
            f"engine.distributed: all_gather needs a list of world size (1) tensors, got {len(tensor_list)}"
        )
    from ..autograd.grad_mode import no_grad

    with no_grad():
        tensor_list[0].copy_(tensor)
    return _done(async_op)


def all_gather_object(object_list: list, obj, group=None) -> None:
    _require()
    if len(object_list) != 1:
        raise ValueError(
            f"engine.distributed: all_gather_object needs a list of world size (1), got {len(object_list)}"
        )
    object_list[0] = obj


def broadcast_object_list(object_list: list, src: int | None = None, group=None, device=None, group_src=None):
    _require()


__all__ = [
    "Backend",
    "GroupMember",
    "ReduceOp",
    "all_gather",
    "all_gather_object",
    "all_reduce",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "destroy_process_group",
    "get_backend",
    "get_node_local_rank",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "is_available",
    "is_gloo_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "is_torchelastic_launched",
    "new_group",
    "reduce",
]
