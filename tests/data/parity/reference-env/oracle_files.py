"""What the LSE oracle runners beside this file share: writing their rows and notes. Plain Python,
so it imports in any of their environments."""
import csv
import hashlib
from pathlib import Path


def write(out_dir: Path, name: str, rows: list[dict], notes: list[str]) -> None:
    """OUT_DIR/NAME.csv (a row per clip, the first row's keys as columns) and NAME_notes.txt."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / f"{name}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out_dir / f"{name}_notes.txt").write_text("\n".join(notes) + "\n")


def weights_sha256(store: Path, names=("syncnet_v2.model", "sfd_face.pth")) -> list[str]:
    """A notes line per weight file: its name and sha256."""
    return [f"{n} sha256 {hashlib.sha256((store / n).read_bytes()).hexdigest()}" for n in names]
