"""Errors shared by every part of the product."""


class UserError(Exception):
    """A problem the user can fix (bad flag, missing file, missing weights).

    The message names the file or setting at fault and says what to do; the CLI prints it
    as one line without a traceback.
    """


class VideoError(UserError):
    """One input video cannot be scored (corrupt, no frames, too large, ...).

    It fails that video only, with `reason` recorded in the results; the batch goes on.
    """

    def __init__(self, path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class WeightsMissing(UserError):
    """A model's weights are not in the weights store."""
