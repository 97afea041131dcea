"""Which videos a run scores: folders, single files, or .txt lists of paths (as the reference)."""
from dataclasses import dataclass
from pathlib import Path

from theval_mesh.pure.errors import UserError

VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".webm", ".avi")


@dataclass(frozen=True)
class Item:
    model: str
    video: str
    missing: str | None = None  # why this item cannot even be opened (reported as failed)


def parse_model_arg(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise UserError(f"--model {text!r}: expected NAME=DIR (e.g. --model sadtalker=videos/sadtalker)")
    return name, path


def videos_in(folder: Path) -> list[Path]:
    """The video files under `folder`, in its subfolders too (not through links to folders), sorted."""
    return sorted(f for f in folder.rglob("*") if f.is_file() and f.suffix.lower() in VIDEO_SUFFIXES)


def discover(model: str, path: str) -> list[Item]:
    p = Path(path)
    if p.is_dir():
        videos = videos_in(p)
        if not videos:
            return [Item(model, str(p), f"no video files ({', '.join(VIDEO_SUFFIXES)}) in the folder")]
        return [Item(model, str(v)) for v in videos]
    if p.suffix.lower() == ".txt" and p.is_file():
        lines = [line.strip() for line in p.read_text().splitlines() if line.strip()]
        return [Item(model, str((p.parent / line) if not Path(line).is_absolute() else Path(line)))
                for line in lines]
    if p.is_file():
        return [Item(model, str(p))]
    return [Item(model, str(p), "path not found: check the folder name")]


def plan(models: list[tuple[str, str]]) -> list[Item]:
    names = [m for m, _ in models]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UserError(f"model name(s) given twice: {', '.join(dupes)}")
    return [item for model, path in models for item in discover(model, path)]
