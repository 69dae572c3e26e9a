"""engine.optim: PyTorch's optimisers (SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, NAdam, RAdam, Adadelta,
ASGD, Rprop, Adafactor, LBFGS) and learning-rate schedulers."""

from . import lr_scheduler
from .adadelta import Adadelta
from .adafactor import Adafactor
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import Adagrad, RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Adamax",
    "NAdam",
    "RAdam",
    "Adadelta",
    "ASGD",
    "Rprop",
    "Adafactor",
    "LBFGS",
    "lr_scheduler",
]
