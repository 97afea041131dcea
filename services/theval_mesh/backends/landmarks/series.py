"""What a landmark pass produces for one video; shared by the embedded and mesh paths (no MediaPipe
here: the services that only carry landmarks do not load it)."""
import tempfile

import numpy as np

# Past this many bytes (about 3,000 frames) a series moves to a temporary file (np.memmap): a 600 s
# clip's passes take ~430 MB, which then sits in the page cache (reclaimable) instead of the
# process's own memory.
SPILL_BYTES = 16 << 20
FIRST_ROWS = 64


class LandmarkSeries:
    """Per-frame landmarks of one pass: points (T, N, 3) normalised float32, NaN rows where no face.

    One buffer that doubles as frames arrive (no object per frame), read as views: `points` copies
    nothing, however often it is read."""

    def __init__(self, num_points: int):
        self.num_points = num_points
        self._points = np.empty((0, num_points, 3), np.float32)
        self._index = np.empty(0, np.int64)
        self._n = 0
        self._file = None  # the spill file, once the series outgrew SPILL_BYTES

    def append(self, frame_index: int, points: np.ndarray | None):
        if self._n == len(self._index):
            self._grow(max(FIRST_ROWS, 2 * self._n))
        self._points[self._n] = np.nan if points is None else points
        self._index[self._n] = frame_index
        self._n += 1

    def _grow(self, rows: int):
        shape = (rows, self.num_points, 3)
        if rows * self.num_points * 12 <= SPILL_BYTES:
            points = np.empty(shape, np.float32)
            points[:self._n] = self._points[:self._n]
        else:
            if self._file is None:  # unlinked at once: the mapping keeps it until the series goes
                self._file = tempfile.TemporaryFile(prefix="theval-landmarks-")
                self._file.truncate(rows * self.num_points * 12)
                points = np.memmap(self._file, np.float32, "r+", shape=shape)
                points[:self._n] = self._points[:self._n]
            else:  # the file grows; the rows written so far are in it already
                self._file.truncate(rows * self.num_points * 12)
                points = np.memmap(self._file, np.float32, "r+", shape=shape)
        self._points = points
        self._index = np.concatenate([self._index[:self._n], np.empty(rows - self._n, np.int64)])

    @property
    def points(self) -> np.ndarray:
        return self._points[:self._n]

    @property
    def frame_index(self) -> np.ndarray:
        return self._index[:self._n]

    def __len__(self) -> int:
        return self._n

    @property
    def spilled(self) -> bool:
        return self._file is not None

    @classmethod
    def from_arrays(cls, frame_index, points: np.ndarray) -> "LandmarkSeries":
        s = cls(points.shape[1])
        s._index = np.asarray(frame_index, dtype=np.int64)
        s._points = np.asarray(points, dtype=np.float32)
        s._n = len(s._index)
        return s

    def face_found(self) -> np.ndarray:
        return ~np.isnan(self.points[:, 0, 0])
