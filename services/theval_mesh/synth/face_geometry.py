"""The still face photo and where its mouth, eyes and brows are (FaceMesh run on the still).

Nothing is hard-coded in pixels: the framing and every line the warps need come from the photo's
landmarks, so any frame size works.
"""
import functools
from dataclasses import dataclass

import cv2
import numpy as np

from theval_mesh.backends.native_logs import quiet_native_stderr

# FaceMesh indices (same sets as docs/metrics.md)
UPPER_INNER = (191, 80, 81, 82, 13, 312, 311, 310)
LOWER_INNER = (95, 88, 178, 87, 14, 317, 402, 318)
MOUTH_CORNERS = (78, 308)
BROW_LOWER = (46, 53, 52, 65, 55, 285, 295, 282, 283, 276)
BROW_UPPER = (70, 63, 105, 66, 107, 336, 296, 334, 293, 300)
EYE_TOP = (246, 161, 160, 159, 158, 157, 173, 398, 384, 385, 386, 387, 388, 466)
NOSE_BASE, CHIN, JAW_LEFT, JAW_RIGHT = 2, 152, 172, 397

# The frame is a head-and-shoulders crop of the photo, FRAME_FACE_WIDTHS face widths wide: on the
# whole 512 px photo the mouth is ~20 px wide at 256, too small for FaceMesh to follow a few
# pixels of lip gap. MARGIN more photo on every side is kept so that rolled and shifted frames
# show real background instead of a mirrored border.
FRAME_FACE_WIDTHS = 2.6
MARGIN = 0.15


def _astronaut() -> np.ndarray:
    from skimage.data import astronaut  # a real face photo shipped with scikit-image
    return astronaut()


@functools.lru_cache(maxsize=1)
def _photo_face():
    """(centre x, centre y, face width) of the face in the full photo, in photo pixels."""
    lm = detect_landmarks(_astronaut())
    lo, hi = lm.min(0), lm.max(0)
    return float((lo[0] + hi[0]) / 2), float((lo[1] + hi[1]) / 2), float(hi[0] - lo[0])


@functools.lru_cache(maxsize=8)
def face_photo(size: int):
    """(image, margin): the framed photo with `margin` extra px on every side, RGB uint8 of
    (size + 2 margin) px square; the visible frame is image[margin:margin+size, same]."""
    photo = _astronaut()
    cx, cy, face_w = _photo_face()
    side = min(FRAME_FACE_WIDTHS * face_w, photo.shape[0], photo.shape[1])
    # the visible frame is centred on the face, slid inside the photo if the face is near an edge
    x0 = float(np.clip(cx - side / 2, 0, photo.shape[1] - side))
    y0 = float(np.clip(cy - side / 2, 0, photo.shape[0] - side))
    margin = int(round(size * MARGIN))
    scale = size / side
    m = np.array([[scale, 0, margin - x0 * scale], [0, scale, margin - y0 * scale]])
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC
    out = size + 2 * margin
    image = np.ascontiguousarray(cv2.warpAffine(photo, m, (out, out), flags=interp,
                                                borderMode=cv2.BORDER_REFLECT101))
    image.setflags(write=False)  # cached and shared: never modified in place
    return image, margin


def detect_landmarks(rgb: np.ndarray) -> np.ndarray:
    """478 refined FaceMesh points in pixels, static-image mode (one still photo)."""
    import mediapipe as mp
    h, w = rgb.shape[:2]
    with quiet_native_stderr(), mp.solutions.face_mesh.FaceMesh(
            static_image_mode=True, refine_landmarks=True, max_num_faces=1) as mesh:
        result = mesh.process(rgb)
    if not result.multi_face_landmarks:
        raise RuntimeError("FaceMesh found no face in the synthetic-head photo")
    pts = np.array([(p.x * w, p.y * h) for p in result.multi_face_landmarks[0].landmark])
    # rounded so that a last-bit difference between runs cannot change the rendered pixels
    return np.round(pts, 2)


def _line(points: np.ndarray):
    """y as a piecewise-linear function of x through the given points."""
    order = np.argsort(points[:, 0])
    xs, ys = points[order, 0], points[order, 1]
    return lambda x: np.interp(x, xs, ys)


@dataclass(frozen=True)
class FaceGeometry:
    """Landmark-derived lines of the framed photo, in its pixels (visible frame + margin)."""
    size: int               # visible frame size
    margin: int             # photo rows/columns kept beyond the visible frame on each side
    landmarks: np.ndarray   # (478, 2) px
    mouth_cx: float         # centre and half width of the inner lips
    mouth_hw: float
    nose_y: float
    chin_y: float
    jaw_hw: float           # half width of the jaw at mouth height
    brow_x: tuple           # (min, max) x of the brows
    center: tuple           # face centre (rotation pivot)
    face_width: float       # landmark box width: the unit of the mouth and brow amplitudes

    def inner_upper(self, x):
        """y of the upper lip's inner edge (the photo's smile shows teeth below it)."""
        lm = self.landmarks
        return _line(lm[list(UPPER_INNER + MOUTH_CORNERS)])(x)

    def inner_lower(self, x):
        lm = self.landmarks
        return _line(lm[list(LOWER_INNER + MOUTH_CORNERS)])(x)

    def brow_lower(self, x):
        return _line(self.landmarks[list(BROW_LOWER)])(x)

    def brow_upper(self, x):
        return _line(self.landmarks[list(BROW_UPPER)])(x)

    def eye_top(self, x):
        return _line(self.landmarks[list(EYE_TOP)])(x)


@functools.lru_cache(maxsize=8)
def face_geometry(size: int) -> FaceGeometry:
    """Landmarks of the framed photo at this frame size (cached: one FaceMesh run per size)."""
    image, margin = face_photo(size)
    lm = detect_landmarks(image)
    left, right = lm[MOUTH_CORNERS[0]], lm[MOUTH_CORNERS[1]]
    brows = lm[list(BROW_LOWER + BROW_UPPER)]
    lm.setflags(write=False)
    return FaceGeometry(
        size=size, margin=margin, landmarks=lm,
        mouth_cx=float((left[0] + right[0]) / 2), mouth_hw=float((right[0] - left[0]) / 2),
        nose_y=float(lm[NOSE_BASE, 1]), chin_y=float(lm[CHIN, 1]),
        jaw_hw=float(abs(lm[JAW_RIGHT, 0] - lm[JAW_LEFT, 0]) / 2),
        brow_x=(float(brows[:, 0].min()), float(brows[:, 0].max())),
        center=(float(lm[:, 0].mean()), float(lm[:, 1].mean())),
        face_width=float(lm[:, 0].max() - lm[:, 0].min()))
