"""AKD, the Average Keypoint Distance of head reenactment, as AliaksandrSiarohin/pose-evaluation at
1bc4cae computes it (the evaluation of First Order Motion Model, which later reenactment papers
follow): face-alignment's 68 landmarks on every frame of the driving (ground-truth) video and of
the generated one (backends/classic/fan.py), then cmp_kp.py:25-33:

- frames are paired by their number;
- a frame where the generated video has no face is left out;
- a frame's distance is the mean ABSOLUTE difference over the 136 coordinates (68 points, x and
  y), in pixels: not the Euclidean distance between points, whatever the name says;
- AKD is the mean over the frames kept, of all videos together (a long video weighs more).

Where it stops, we go on and say so: a ground-truth frame without a face beside a generated one
with a face makes cmp_kp.py raise (None minus an array); here that frame is left out and counted.
Videos of unequal length make its frame-number assertion fail; here the common frames are compared.
Pure: arrays in, numbers out.
"""
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class KeypointDistances:
    """One video pair's per-frame distances and what was left out."""
    distances: np.ndarray   # one per frame compared
    no_face_generated: int  # frames left out as cmp_kp.py does: no face in the generated frame
    no_face_gt: int         # frames left out where cmp_kp.py raises: no face in the ground truth
    unpaired: int           # frames of the longer video beyond the shorter one's end


def frame_distance(gt: np.ndarray, generated: np.ndarray) -> float:
    """cmp_kp.py:31: mean |gt - generated| over every coordinate."""
    return float(np.mean(np.abs(np.asarray(gt, np.float64) - np.asarray(generated, np.float64))))


def keypoint_distances(gt: list, generated: list) -> KeypointDistances:
    """The per-frame distances of one video pair: gt and generated are lists, frame by frame, of
    (68, 2) landmark arrays or None where no face was found."""
    n = min(len(gt), len(generated))
    out, no_gen, no_gt = [], 0, 0
    for g, p in zip(gt[:n], generated[:n], strict=True):
        if p is None:
            no_gen += 1
        elif g is None:
            no_gt += 1
        else:
            out.append(frame_distance(g, p))
    return KeypointDistances(np.array(out, np.float64), no_gen, no_gt, abs(len(gt) - len(generated)))


def akd(pairs: list[KeypointDistances]) -> float:
    """AKD over video pairs: the mean of every compared frame's distance (NaN when none was)."""
    values = np.concatenate([p.distances for p in pairs]) if pairs else np.zeros(0)
    return float(values.mean()) if len(values) else float("nan")


def frame_weighted(means, frames):
    """A per-frame metric over video pairs (AKD, AED: pose-evaluation's mean over every frame) from
    each pair's mean distance and number of frames compared (for AKD equal to `akd` of their
    distances), and the statistic a bootstrap over pairs draws: weighted(counts) is the value when
    pair i is drawn counts[i] times (NaN when no drawn pair has a frame)."""
    means, frames = np.asarray(means, np.float64), np.asarray(frames, np.float64)
    totals = np.where(frames > 0, means * frames, 0.0)

    def weighted(counts) -> float:
        n = float(np.dot(counts, frames))
        return float(np.dot(counts, totals) / n) if n else float("nan")
    return weighted(np.ones(len(frames))), weighted
