"""engine.utils.tensorboard: SummaryWriter, writing a Wiregrad run folder, not TensorBoard event files."""

from .writer import SummaryWriter

__all__ = ["SummaryWriter"]
