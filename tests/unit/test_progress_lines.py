"""With stderr not a terminal (a log file), a run prints one plain line per finished video and no
cursor codes: 1,000 videos are 1,000 short lines, not a bar redrawn thousands of times."""
from dataclasses import dataclass

from theval_mesh.core.results import FAILED, OK, VideoResult
from theval_mesh.jobs.progress import Progress


@dataclass
class Job:  # the job store's Job fields Progress reads
    total: int
    done: int = 0
    failed: int = 0


def test_a_log_file_gets_one_plain_line_per_video(capsys):
    shown = Progress(Job(total=3), enabled=True, frames=True)
    shown(VideoResult("GT", "/v/a.mp4", OK))
    shown.frame(10)
    shown(VideoResult("m", "/v/b.mp4", FAILED, reason="not a readable video"))
    reused = VideoResult("m", "/v/c.mp4", OK)
    reused.reused = True
    shown(reused)
    shown.close()
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\r" not in err
    assert [line for line in err.splitlines() if line.startswith("videos")] == [
        "videos 1/3: scored [GT] /v/a.mp4", "videos 2/3: failed [m] /v/b.mp4", "videos 3/3: reused [m] /v/c.mp4"]
    assert "FAILED  [m] /v/b.mp4: not a readable video" in out


def test_quiet_prints_nothing(capsys):
    shown = Progress(Job(total=1), enabled=False)
    shown(VideoResult("GT", "/v/a.mp4", OK))
    shown.close()
    assert capsys.readouterr().err == ""
