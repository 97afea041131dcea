"""Durable per-video results: one JSON line per video, fsynced before it counts as done.

A re-run with the same settings skips what is already there, so Ctrl-C or a crash loses at
most the videos in flight. A torn last line (crash mid-write) is ignored and redone.
"""
import json
import os
from pathlib import Path

from .results import VideoResult


def result_key(model: str, video: str, settings: dict) -> str:
    return json.dumps([model, video, settings], sort_keys=True)


class ResultLog:
    def __init__(self, path):
        self.path = Path(path)
        self.done: dict[str, VideoResult] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    r = VideoResult.from_json(line)
                except (ValueError, TypeError, KeyError):
                    continue
                self.done[result_key(r.model, r.video, r.settings)] = r

    def has(self, model: str, video: str, settings: dict) -> bool:
        return result_key(model, video, settings) in self.done

    def append(self, result: VideoResult):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(result.to_json() + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.done[result_key(result.model, result.video, result.settings)] = result

    def results(self, settings: dict) -> list[VideoResult]:
        return [r for r in self.done.values() if r.settings == settings]
