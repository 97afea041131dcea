"""The model parity set (tests/data/parity/models): the reference's model-based scripts' values on
clips of the parity set cut to their first N frames, computed with deterministic STAND-IN weights
(`theval weights stand-in --seed 0`), and how to cut the clips the same way."""
import csv
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from tests.support.parity_set import DIR as PARITY_DIR
from tests.support.parity_set import clip

DIR = PARITY_DIR / "models"
SEED = 0
# model_oracle{tag}.csv's metric column -> our results' metric key, per set: "" the quality
# scripts, "_head_motion" Naturalness/head_motion_dynamics.py (same clips and frames)
METRICS = {"": {"global_aesthetic": "global_aesthetic", "mouth_quality": "mouth_quality",
                "face_quality": "face_quality"},
           "_head_motion": {"head_motion_dynamics": "head_motion"}}


def oracle(tag: str) -> dict[tuple[str, str], dict]:
    """(clip, metric) -> its row of model_oracle{tag}.csv (strings, as written)."""
    with open(DIR / f"model_oracle{tag}.csv") as f:
        return {(row["clip"], row["metric"]): row for row in csv.DictReader(f)}


def clips(tag: str) -> list[str]:
    return sorted({c for c, _ in oracle(tag)})


def frames_of(tag: str) -> int:
    counts = {int(row["frames_in"]) for row in oracle(tag).values()}
    assert len(counts) == 1, counts
    return counts.pop()


def cut(name: str, n_frames: int, dst: Path) -> Path:
    """The clip's first n_frames re-encoded losslessly (libx264 qp 0, yuv420p: the decoded frames
    are those of the original, which the reference runner's own ffmpeg cut keeps too) with the
    audio of the same span, so the video stays a valid talking-head input."""
    src = clip(name)
    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        vin = inp.streams.video[0]
        vout = out.add_stream("libx264", rate=vin.average_rate)
        vout.width, vout.height, vout.pix_fmt = vin.width, vin.height, "yuv420p"
        vout.options = {"qp": "0", "preset": "ultrafast"}
        ain = inp.streams.audio[0]
        aout = out.add_stream("aac", rate=ain.rate)
        seconds = Fraction(n_frames) / vin.average_rate
        kept = 0
        for frame in inp.decode(vin):
            if kept == n_frames:
                break
            frame.pts, frame.time_base = kept, 1 / vin.average_rate
            for packet in vout.encode(frame):
                out.mux(packet)
            kept += 1
        for packet in vout.encode():
            out.mux(packet)
        inp.seek(0)
        for frame in inp.decode(ain):
            if frame.time is not None and frame.time >= seconds:
                break
            frame.pts = None
            for packet in aout.encode(frame):
                out.mux(packet)
        for packet in aout.encode():
            out.mux(packet)
    return dst


def first_frames(path: Path, n: int, fmt: str = "yuv420p") -> list[np.ndarray]:
    """Up to n decoded frames (default: the raw yuv420p planes, as the codec gave them)."""
    out = []
    with av.open(str(path)) as c:
        for frame in c.decode(video=0):
            out.append(frame.to_ndarray(format=fmt))
            if len(out) == n:
                break
    return out
