"""Errors a user can fix, raised by the trainer and checkpoints (kept engine-free for the CLI)."""


class TrainerError(Exception):
    """A problem with the run a user can fix (dataset vs. model mismatch, device, checkpoint)."""


class CheckpointError(TrainerError):
    """A checkpoint that can't be read or doesn't fit the run; the message says why."""
