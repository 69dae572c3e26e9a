"""The one exception every dataset loader raises for problems a user can cause."""


class DatasetError(Exception):
    """A dataset could not be loaded; the message names the file (and line/column) and the fix."""
