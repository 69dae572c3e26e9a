"""The one exception every dataset loader raises for problems a user can cause."""


class DatasetError(Exception):
    """A dataset could not be loaded; the message names the file (and line/column) and the fix.

    The message is always one line: it is shown as is in the GUI, the CLI and the checker, and a
    library error quoted inside it (zipfile, numpy, zlib) may hold line breaks.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))
