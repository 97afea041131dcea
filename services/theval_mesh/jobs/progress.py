"""What a running job shows: a videos bar (and a frames bar inline), one line per failed video or
warning, and what a resumed run reuses."""
import json
import sys

from tqdm import tqdm

from theval_mesh.core.results import FAILED, VideoResult


def settings_changed(scored_otherwise: dict[str, int], settings: dict) -> list[str]:
    """One line per earlier settings under which some of these videos were scored (and are scored
    again now): which settings changed, and how many videos (JobStore.scored_otherwise)."""
    lines = []
    for key, count in scored_otherwise.items():
        before = json.loads(key)
        changes = [f"{name} {before.get(name)!r} -> {settings.get(name)!r}"
                   for name in sorted(set(before) | set(settings)) if before.get(name) != settings.get(name)]
        lines.append(f"settings changed since an earlier run ({', '.join(changes)}): {count} video(s) scored then "
                     "are scored again with these settings; results of different settings are never mixed")
    return lines


def resuming(job) -> str | None:
    """What a run of `job` reuses and what it scores again (None for a new job)."""
    parts = ([f"{job.done} video(s) already scored with these settings are reused"] if job.done else []) + \
        ([f"{job.failed} that failed before are scored again"] if job.failed else [])
    return f"resuming: {'; '.join(parts)}" if parts else None


class Progress:
    """A videos bar, and one line per failed video or warning, fed by the runner's on_result. When
    stderr is not a terminal (a log file, a batch scheduler's output), no bar: one plain line per
    finished video, without the cursor codes a bar redraws itself with."""

    def __init__(self, job, enabled: bool = True, frames: bool = False):
        """frames: also a bar of the frames of the video being scored (an inline run, where the
        frames are decoded in this process): a long video moves too."""
        self.plain = enabled and not sys.stderr.isatty()
        bars = enabled and not self.plain
        self.total, self.done = job.total, job.done
        self.bar = tqdm(total=job.total, initial=job.done, desc="videos", unit="video", disable=not bars)
        self.reused = self.scored = 0
        self.frames = tqdm(desc="frames", unit="frame", position=1, leave=False, disable=not (bars and frames))
        line = resuming(job)
        if line:
            self.bar.write(line, file=sys.stderr)

    def __call__(self, result: VideoResult):
        if result.status == FAILED:
            self.bar.write(f"FAILED  [{result.model}] {result.video}: {result.reason}")
        for w in result.warnings:
            if not w.startswith("Traceback"):
                self.bar.write(f"warning [{result.model}] {result.video}: {w}")
        if result.reused:
            self.reused += 1
        elif result.status != FAILED:
            self.scored += 1
        if self.reused:
            self.bar.set_postfix_str(f"cache: {self.reused} reused, {self.scored} scored", refresh=False)
        self.bar.update(1)
        self.frames.reset()
        self.done += 1
        if self.plain:
            state = "reused" if result.reused else "failed" if result.status == FAILED else "scored"
            print(f"videos {self.done}/{self.total}: {state} [{result.model}] {result.video}", file=sys.stderr,
                  flush=True)

    def frame(self, n: int, total: int | None = None):
        """n frames decoded; total: the video's frames, given as its pass starts."""
        if total is not None:
            self.frames.reset(total=total)
        self.frames.update(n)

    def close(self):
        self.frames.close()
        if self.reused:
            self.bar.write(f"result cache: {self.reused} video(s) reused (same bytes, settings and backends), "
                           f"{self.scored} scored now; --no-cache scores every video", file=sys.stderr)
        self.bar.close()
