"""CSV cells a spreadsheet shows as text and never runs (OWASP's defence against CSV injection).
Names in the project's CSVs are chosen by whoever named the videos and models; a spreadsheet takes
a cell starting with = + - @ (or a tab or carriage return before one) as a formula, and
=HYPERLINK(...) sends a reader elsewhere. Such a cell is written with a leading apostrophe;
theval, reading its own CSVs back, removes it."""
import csv

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _formula_like(text: str) -> bool:
    """Starts as a formula does, after the apostrophes to_cell adds (so that those round-trip)."""
    return text.lstrip("'").startswith(FORMULA_STARTS)


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def to_cell(value):
    """The value as a CSV cell: text that would run as a formula with a leading apostrophe; numbers
    (-0.5, written as text or not) and everything else as they are."""
    if isinstance(value, str) and _formula_like(value) and not _number(value):
        return "'" + value
    return value


def from_cell(text: str) -> str:
    """A cell as to_cell wrote it, back to its value."""
    return text[1:] if text.startswith("'") and _formula_like(text) else text


class Writer:
    """csv.writer whose every cell goes through to_cell."""

    def __init__(self, stream, **options):
        self._writer = csv.writer(stream, **options)

    def writerow(self, row):
        return self._writer.writerow([to_cell(c) for c in row])

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)
