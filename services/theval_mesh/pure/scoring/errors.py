"""Errors of the scoring step. All are UserErrors: the CLI prints them as one line."""
from theval_mesh.pure.errors import UserError


class ScoringError(UserError, ValueError):
    """Bad scoring input: zero/NaN GT value, missing column, bad weights, unknown row."""


class IncompatibleBackends(ScoringError):
    """GT and a model were scored with different profiles or backends; `differences` lists them."""

    def __init__(self, model: str, differences: list[str]):
        self.model = model
        self.differences = list(differences)
        super().__init__(
            f"GT and {model!r} were not scored the same way, so the normalised scores would be "
            f"meaningless: {'; '.join(self.differences)}. Re-score both with the same profile and "
            "backends, or pass --allow-mixed to compare anyway (flagged in the output)")
