"""Which videos a run scores: folders, single files, or .txt lists of paths (as the reference)."""
import os
from dataclasses import dataclass
from pathlib import Path

from theval_mesh.backends.media.files import not_a_file
from theval_mesh.pure.errors import UsageRefused, UserError
from theval_mesh.pure.user_names import check_name

VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".webm", ".avi")


@dataclass(frozen=True)
class Item:
    model: str
    video: str
    missing: str | None = None  # why this item cannot even be opened (reported as failed)


def parse_model_arg(text: str) -> tuple[str, str]:
    """--model NAME=DIR. A model name follows the project's rules for names (check_name: no '='),
    so the name ends at the first '='; a DIR may hold '='. When the DIR after the first '=' does not
    exist but holds '=', the name was most likely meant to hold one (a=b=DIR): refused, rather
    than cut at the first '=' and DIR looked for as 'b=DIR'."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise UsageRefused(f"--model {text!r}: expected NAME=DIR (e.g. --model sadtalker=videos/sadtalker)")
    if "=" in path and not os.path.lexists(path):
        meant, folder = text.rsplit("=", 1)
        raise UsageRefused(f"--model {text!r}: no folder {path!r}, and a model name cannot hold '=': name it with "
                        f"letters, digits, spaces and . : @ + ( ) # / - _ (e.g. --model {meant.replace('=', '_')}={folder})")
    return check_name("--model name", name), path


def _named_like_video(path: Path) -> bool:
    return path.name.lower().endswith(VIDEO_SUFFIXES)  # `.mp4` too, which has no suffix to pathlib


def entries_in(folder: Path) -> list[tuple[Path, str | None]]:
    """The entries under `folder` named like videos, in its subfolders too (not through links to
    folders), sorted, each with why it cannot be read as a video file (None: it can): a FIFO, a
    device, a broken or looping link, a folder. A folder named like a video is searched as any
    folder; it is an entry only when it holds no video."""
    named = sorted(f for f in folder.rglob("*") if _named_like_video(f))
    entries = [(f, not_a_file(f)) for f in named]
    videos = [f for f, why in entries if why is None]
    return [(f, why) for f, why in entries
            if not (why and f.is_dir() and not f.is_symlink() and any(v.is_relative_to(f) for v in videos))]


def videos_in(folder: Path) -> list[Path]:
    """The video files under `folder` (entries_in, those that can be read), sorted."""
    return [f for f, why in entries_in(folder) if why is None]


def discover(model: str, path: str) -> list[Item]:
    p = Path(path)
    if p.is_dir():
        entries = entries_in(p)
        if not entries:
            return [Item(model, str(p), f"no video files ({', '.join(VIDEO_SUFFIXES)}) in the folder")]
        return [Item(model, str(v), why) for v, why in entries]
    if p.suffix.lower() == ".txt" and p.is_file():
        lines = [line.strip() for line in p.read_text().splitlines() if line.strip()]
        return [Item(model, str((p.parent / line) if not Path(line).is_absolute() else Path(line)))
                for line in lines]
    if p.is_file():
        return [Item(model, str(p))]
    if os.path.lexists(p):  # a FIFO, a device, a broken or looping link
        return [Item(model, str(p), not_a_file(p))]
    return [Item(model, str(p), "path not found: check the folder name")]


def plan(models: list[tuple[str, str]]) -> list[Item]:
    names = [m for m, _ in models]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UserError(f"model name(s) given twice: {', '.join(dupes)}")
    return [item for model, path in models for item in discover(model, path)]
