"""syncnet_python's face tracks and crops (run_pipeline.py `track_shot` and `crop_video`), as
geometry: boxes in, tracks and crop windows out. Pure; the detector and the pixels are in
backends/classic/syncnet.py.

Tracking (`track_shot`): a track starts at the first unused detection; the next frames' detections
join it, in frame order, while they overlap its last box by IoU > 0.5 and come at most 25 frames
after it (`num_failed_det`). A track is kept when it has more than 100 detections (`min_track`:
4 s at 25 fps) and its interpolated boxes are on average wider or taller than 100 px
(`min_face_size`); its boxes are linearly interpolated over the frames without a detection.

Cropping (`crop_video`): the box's half-size s = max(w, h) / 2 and its centre, each smoothed by a
13-frame median filter (scipy.signal.medfilt, zero-padded at both ends); the frame padded by
bs = int(s * 1.8) on every side with grey 110; the window rows [y - s, y + 1.8 s), columns
[x - 1.4 s, x + 1.4 s) of the padded frame (crop_scale 0.4: the box widened by 40 % each side and
stretched downwards to take in the mouth and chin), resized to 224x224.
"""
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import interp1d
from scipy.signal import medfilt

IOU = 0.5            # track_shot iouThres
NUM_FAILED_DET = 25  # --num_failed_det
MIN_TRACK = 100      # --min_track
MIN_FACE_SIZE = 100  # --min_face_size (px)
CROP_SCALE = 0.40    # --crop_scale
MEDIAN = 13          # crop_video's medfilt kernel
PAD_VALUE = 110      # np.pad constant_values
CROP_SIZE = 224
DETECT_SCALE = 0.25  # --facedet_scale: S3FD runs on the frame resized by this factor
DETECT_THRESHOLD = 0.9  # detect_faces(conf_th=0.9)


@dataclass(frozen=True)
class Track:
    frames: np.ndarray  # consecutive frame indices, first..last detection
    boxes: np.ndarray   # (len(frames), 4) x1, y1, x2, y2, interpolated between detections


def iou(a, b, eps: float = 0.0) -> float:
    """Intersection over union as run_pipeline.py's bb_intersection_over_union (no +1 pixel; eps
    added to the union: MoChaBench's 1e-8)."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter + eps
    return inter / union if union > 0 else 0.0


def tracks(detections: list[list], min_track: int = MIN_TRACK, iou_eps: float = 0.0,
           stop_at_mismatch: bool = False) -> list[Track]:
    """detections[f]: the boxes (x1, y1, x2, y2) found in frame f of one shot. The tracks, in the
    order track_shot finds them (it consumes the detections it assigns). stop_at_mismatch: a face
    near enough in time but not overlapping ends the scan of its frame's faces (MoChaBench's
    `_track`), where track_shot goes on to the frame's next face."""
    pending = [[(f, tuple(map(float, b))) for b in boxes] for f, boxes in enumerate(detections)]
    found = []
    while True:
        track = []
        for faces in pending:
            for face in faces:  # removing while iterating skips the next face, as track_shot does
                if not track:
                    track.append(face)
                    faces.remove(face)
                elif face[0] - track[-1][0] <= NUM_FAILED_DET:
                    if iou(face[1], track[-1][1], iou_eps) > IOU:
                        track.append(face)
                        faces.remove(face)
                    elif stop_at_mismatch:
                        break
                else:
                    break
        if not track:
            return found
        if len(track) > min_track:
            frames = np.array([f for f, _ in track])
            boxes = np.array([b for _, b in track])
            span = np.arange(frames[0], frames[-1] + 1)
            dense = np.stack([interp1d(frames, boxes[:, j])(span) for j in range(4)], axis=1)
            if max(np.mean(dense[:, 2] - dense[:, 0]), np.mean(dense[:, 3] - dense[:, 1])) > MIN_FACE_SIZE:
                found.append(Track(span, dense))


def crop_windows(track: Track) -> np.ndarray:
    """(frames, 3): smoothed half-size s, centre y, centre x of each frame's crop."""
    b = track.boxes
    s = np.maximum(b[:, 3] - b[:, 1], b[:, 2] - b[:, 0]) / 2
    y, x = (b[:, 1] + b[:, 3]) / 2, (b[:, 0] + b[:, 2]) / 2
    return np.stack([medfilt(v, kernel_size=MEDIAN) for v in (s, y, x)], axis=1)


def crop_slices(s: float, y: float, x: float) -> tuple[int, tuple[slice, slice]]:
    """The padding and the (rows, columns) of the padded frame that crop_video takes."""
    cs = CROP_SCALE
    pad = int(s * (1 + 2 * cs))
    my, mx = y + pad, x + pad
    return pad, (slice(int(my - s), int(my + s * (1 + 2 * cs))),
                 slice(int(mx - s * (1 + cs)), int(mx + s * (1 + cs))))
