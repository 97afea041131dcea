"""How fast a new user's mistakes come back: `theval evaluate` on a wrong --gt, an empty model
folder, a model none of whose videos pairs with the GT, and a GT without audio, each timed against
one good run of the same command on one clip (measured in this run: the baseline). The refusals
happen before any model loads or Ray starts, so each should be a small fraction of it.

    .venv/bin/python bench/first_mistake.py
"""
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from theval_mesh.synth import generate_kit
from theval_mesh.synth.mp4 import without_audio

THEVAL = str(Path(sys.executable).parent / "theval")


def timed(*args) -> tuple[float, int]:
    start = time.perf_counter()
    run = subprocess.run([THEVAL, "evaluate", *map(str, args), "--quality", "proxy", "--quiet"],
                         capture_output=True, text=True)
    return time.perf_counter() - start, run.returncode


def main():
    with tempfile.TemporaryDirectory(prefix="theval-bench-") as tmp:
        root = Path(tmp)
        kit = generate_kit(root / "kit", seed=1, n_clips=1, duration_s=2.0, size=160, variants=("frozen_mouth",))
        empty, renamed, silent = root / "empty", root / "renamed", root / "silent"
        empty.mkdir()
        renamed.mkdir()
        shutil.copy(kit.videos("frozen_mouth")[0], renamed / "take.mp4")
        without_audio(kit.videos("gt")[0], silent / "clip_00.mp4")
        model = f"m={kit.dir('frozen_mouth')}"
        baseline, code = timed("--gt", kit.dir("gt"), "--model", model, "--out", root / "good", "--inline")
        print(f"baseline: one clip scored inline, {baseline:.2f} s (exit {code})")
        cases = {
            "wrong --gt": ("--gt", root / "nowhere", "--model", model),
            "empty model folder": ("--gt", kit.dir("gt"), "--model", f"m={empty}"),
            "no video pairs": ("--gt", kit.dir("gt"), "--model", f"m={renamed}"),
            "GT without audio": ("--gt", silent, "--model", model),
        }
        for name, args in cases.items():
            seconds, code = timed(*args, "--out", root / "out", "--inline")
            print(f"{name:20s} {seconds:6.2f} s (exit {code}): {seconds / baseline:.2f} of the baseline")


if __name__ == "__main__":
    main()
