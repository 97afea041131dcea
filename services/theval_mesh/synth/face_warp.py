"""Animate the still face: open the mouth, raise the brows, roll and shift the head.

Local warps are vertical displacements defined as FORWARD maps (source row -> output row) that
are monotonic per column, then inverted column by column; a forward map that only stretches or
gently compresses can never fold, even for the exaggerated mouth.
"""
import cv2
import numpy as np

from theval_mesh.synth.face_geometry import FaceGeometry, face_photo

CAVITY_RGB = np.array([48, 14, 18], np.float32)  # dark red-black inside of the mouth
UPPER_SHARE = 0.2      # the upper lip takes 20 % of the opening, the jaw the rest
STEP = 0.5             # source-row sampling of the forward maps (px)


def _smoothstep(u):
    u = np.clip(u, 0.0, 1.0)
    return u * u * (3 - 2 * u)


def _invert_columns(src_rows: np.ndarray, out_rows: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """For every column, the source row shown at each output row of `grid`: the inverse of the
    per-column monotonic map src_rows -> out_rows[:, j]. One np.interp call for all columns:
    column j is moved to its own range by adding j * spread to both axes."""
    n_cols = out_rows.shape[1]
    spread = 4.0 * (abs(out_rows).max() + abs(grid).max() + 1)
    offset = np.arange(n_cols) * spread
    xp = (out_rows + offset[None, :]).T.ravel()
    fp = np.broadcast_to((src_rows[:, None] + offset[None, :]).T, (n_cols, len(src_rows))).ravel()
    x = np.clip(grid[:, None], out_rows.min(0), out_rows.max(0)) + offset[None, :]
    return (np.interp(x.ravel(), xp, fp).reshape(x.shape) - offset[None, :]).astype(np.float32)


class FaceRenderer:
    """Renders the frames of one clip. `max_open` (px, the clip's largest lip gap) sizes the
    jaw's fade below the chin so that the jaw drop compresses the neck without folding."""

    def __init__(self, geo: FaceGeometry, max_open: float, max_brow: float):
        self.geo = geo
        self.photo = face_photo(geo.size)[0]
        self._init_mouth(geo, self.photo.shape[0], max_open)
        self._init_brows(geo, self.photo.shape[0], max_brow)
        self.closed = self.photo.copy()   # rest pose: the photo's smile closed
        self._open_mouth(self.closed, 0.0)

    # The forward maps are linear in the two amplitudes, so their parts are computed once:
    # mouth: out = m_base + upper_lift * m_up + jaw_drop * m_jaw; brows: out = src - raise * b_w
    def _init_mouth(self, g: FaceGeometry, side: int, max_open: float) -> None:
        fade = max(0.8 * (g.chin_y - g.inner_lower(g.mouth_cx)), 1.6 * max(max_open, 1.0))
        half = 1.5 * g.jaw_hw + 2
        self.m_box = x0, x1, y0, y1 = _clip_box(
            int(np.floor(g.mouth_cx - half)), int(np.ceil(g.mouth_cx + half)),
            int(np.floor(g.nose_y)), int(np.ceil(g.chin_y + fade + 2)), side)
        xs = np.arange(x0, x1, dtype=np.float64)
        self.m_xs, self.m_ys = xs, np.arange(y0, y1, dtype=np.float64)
        self.m_src = np.arange(y0, y1 - 1 + 1e-9, STEP)
        upper, lower = g.inner_upper(xs)[None, :], g.inner_lower(xs)[None, :]
        line = (upper + lower) / 2                                     # where the lips meet
        lens = np.sqrt(np.clip(1 - ((xs - g.mouth_cx) / g.mouth_hw) ** 2, 0, 1))[None, :]
        inner, outer = 1.3 * g.mouth_hw, max(1.5 * g.jaw_hw, 1.3 * g.mouth_hw + 2)
        jaw = 1 - _smoothstep((np.abs(xs - g.mouth_cx) - inner) / (outer - inner))[None, :]
        s = self.m_src[:, None]
        # above the upper lip's inner edge: the closing shift (line - upper) and the lift, both
        # fading to 0 at the nose
        rise = _smoothstep((s - g.nose_y) / np.maximum(upper - g.nose_y, 1.0))
        # below the lower lip's inner edge: the closing shift fades out by the chin; the jaw drop
        # goes from the lips' lens shape to the whole jaw, then fades out below the chin
        t = _smoothstep((s - lower) / np.maximum(g.chin_y - lower, 1.0))
        drop = ((1 - t) * lens + t * jaw) * (1 - _smoothstep((s - g.chin_y) / fade))
        # the photo's teeth band spreads over the cavity, which hides it; the tiny slope keeps
        # the map strictly monotonic
        band = np.clip((s - upper) / np.maximum(lower - upper, 1e-6), 0, 1)
        above, below = s <= upper, s >= lower
        self.m_base = np.where(above, s + (line - upper) * rise,
                               np.where(below, s + (line - lower) * (1 - t),
                                        line + 1e-3 * (s - upper)))
        self.m_up = np.where(above, -lens * rise, np.where(below, 0.0, -lens * (1 - band)))
        self.m_jaw = np.where(above, 0.0, np.where(below, drop, lens * band))
        self.m_line, self.m_lens = line, lens
        self.m_mask = (lens > 0)

    def _init_brows(self, g: FaceGeometry, side: int, max_brow: float) -> None:
        bx0, bx1 = g.brow_x
        fade_x = 0.15 * (bx1 - bx0)
        xs = np.arange(int(np.floor(bx0 - fade_x - 1)), int(np.ceil(bx1 + fade_x + 1)),
                       dtype=np.float64)
        lower, upper, eye = g.brow_lower(xs), g.brow_upper(xs), g.eye_top(xs)
        forehead = 2.5 * np.maximum(eye - upper, 2.0) + 2 * max_brow   # long: gentle stretch
        self.b_box = x0, x1, y0, y1 = _clip_box(
            int(xs[0]), int(xs[-1]) + 1, int(np.floor((upper - forehead).min() - 1)),
            int(np.ceil(eye.max() + 1)), side)
        keep = (xs >= x0) & (xs < x1)
        xs, lower, upper = xs[keep], lower[keep], upper[keep]
        eye, forehead = eye[keep], forehead[keep]
        self.b_xs, self.b_ys = xs, np.arange(y0, y1, dtype=np.float64)
        self.b_src = np.arange(y0, y1 - 1 + 1e-9, STEP)
        s = self.b_src[:, None]
        # 1 on the brows, 0 at the upper eyelid (the eyes stay put) and high on the forehead
        to_eye = 1 - _smoothstep((s - lower) / np.maximum(eye - 1 - lower, 0.5))
        from_top = _smoothstep((s - (upper - forehead)) / forehead)
        wx = 1 - _smoothstep(np.maximum(bx0 - xs, xs - bx1) / fade_x)
        self.b_w = np.minimum(to_eye, from_top) * wx[None, :]

    # ------------------------------------------------------------------ pieces
    def _open_mouth(self, frame: np.ndarray, opening: float) -> None:
        """Part the (closed) lips by `opening` px at the centre: 20 % upper lip, 80 % jaw."""
        x0, x1, y0, y1 = self.m_box
        lift = UPPER_SHARE * opening
        drop = opening - lift
        out = self.m_base + lift * self.m_up + drop * self.m_jaw
        region = _remap_rows(self.photo, self.m_xs, self.m_src, out, self.m_ys)
        if opening > 1e-3:  # dark cavity between the parted lips, anti-aliased over one pixel
            top, bottom = self.m_line - lift * self.m_lens, self.m_line + drop * self.m_lens
            y = self.m_ys[:, None]
            alpha = np.clip(np.minimum(y - top, bottom - y) + 0.5, 0, 1) * self.m_mask
            region = region.astype(np.float32)
            region += alpha[..., None].astype(np.float32) * (CAVITY_RGB - region)
            region = np.clip(region + 0.5, 0, 255).astype(np.uint8)
        frame[y0:y1, x0:x1] = region

    def _raise_brows(self, frame: np.ndarray, raise_px: float) -> None:
        x0, x1, y0, y1 = self.b_box
        out = self.b_src[:, None] - raise_px * self.b_w
        frame[y0:y1, x0:x1] = _remap_rows(self.photo, self.b_xs, self.b_src, out, self.b_ys)

    # ------------------------------------------------------------------ frame
    def render(self, opening: float, brow: float, roll_deg: float, tx: float, ty: float):
        """One RGB uint8 frame, size x size. Positive roll turns the head counter-clockwise on
        screen; the head turns about the face centre."""
        work = self.closed.copy()
        if opening > 1e-3:
            self._open_mouth(work, opening)
        if brow > 1e-3:
            self._raise_brows(work, brow)
        size, margin = self.geo.size, self.geo.margin
        if abs(roll_deg) < 1e-6 and abs(tx) < 1e-6 and abs(ty) < 1e-6:
            return work[margin:margin + size, margin:margin + size].copy()
        m = cv2.getRotationMatrix2D(self.geo.center, roll_deg, 1.0)
        m[:, 2] += (tx - margin, ty - margin)
        return cv2.warpAffine(work, m, (size, size), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_REFLECT101)


def _remap_rows(image, xs, src_rows, out_rows, grid):
    """Region at columns xs, rows grid, showing the source rows that the forward map sends there."""
    map_y = _invert_columns(src_rows, out_rows, grid)
    map_x = np.ascontiguousarray(np.broadcast_to(xs.astype(np.float32)[None, :], map_y.shape))
    return cv2.remap(image, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT101)


def _clip_box(x0, x1, y0, y1, size):
    return max(0, x0), min(size, x1), max(0, y0), min(size, y1)
