"""What a landmark pass produces for one video; shared by the embedded and mesh paths (no MediaPipe
here: the services that only carry landmarks do not load it)."""
import numpy as np


class LandmarkSeries:
    """Per-frame landmarks of one pass: points (T, N, 3) normalised, NaN rows where no face."""

    def __init__(self, num_points: int):
        self.num_points = num_points
        self._rows: list[np.ndarray] = []
        self._index: list[int] = []

    def append(self, frame_index: int, points: np.ndarray | None):
        self._index.append(frame_index)
        self._rows.append(points if points is not None
                          else np.full((self.num_points, 3), np.nan, np.float32))

    @property
    def points(self) -> np.ndarray:
        if not self._rows:
            return np.zeros((0, self.num_points, 3), np.float32)
        return np.stack(self._rows)

    @property
    def frame_index(self) -> np.ndarray:
        return np.asarray(self._index, dtype=np.int64)

    @classmethod
    def from_arrays(cls, frame_index, points):
        s = cls(points.shape[1])
        s._index, s._rows = list(np.asarray(frame_index)), list(points)
        return s

    def face_found(self) -> np.ndarray:
        return ~np.isnan(self.points[:, 0, 0]) if len(self._rows) else np.zeros(0, bool)
