"""The parity set (tests/data/parity): clips and the reference scripts' own values for them."""
import csv
from pathlib import Path

DIR = Path(__file__).resolve().parents[1] / "data" / "parity"
CLIPS = DIR / "clips"
# oracle.csv column (unrounded) of each metric the set covers
METRICS = ("lip_dynamics", "eyebrow_dynamics", "silent_lip_stability", "lip_sync")


def oracle() -> dict[str, dict]:
    """clip name -> its row of oracle.csv (every value a string, as written)."""
    with open(DIR / "oracle.csv") as f:
        return {row["clip"]: row for row in csv.DictReader(f)}


def clip(name: str) -> Path:
    return CLIPS / f"{name}.mp4"
