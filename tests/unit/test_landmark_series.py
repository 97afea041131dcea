"""The landmark series of a pass: one growing buffer, read without copies, moved to a temporary
file past SPILL_BYTES (a long clip's passes stay out of the process's own memory)."""
import numpy as np

from theval_mesh.backends.landmarks import series as series_module
from theval_mesh.backends.landmarks.series import LandmarkSeries


def _points(i: int, n: int = 478) -> np.ndarray:
    return np.random.default_rng(i).random((n, 3), dtype=np.float32)


def test_frames_come_back_as_appended_with_nan_rows_where_no_face():
    s = LandmarkSeries(478)
    assert s.points.shape == (0, 478, 3) and len(s.frame_index) == 0 and not s.face_found().any()
    for i in range(200):
        s.append(2 * i, None if i % 7 == 0 else _points(i))
    assert len(s) == 200 and s.frame_index.tolist() == list(range(0, 400, 2))
    assert s.face_found().tolist() == [i % 7 != 0 for i in range(200)]
    assert np.isnan(s.points[7]).all() and np.array_equal(s.points[8], _points(8))
    assert s.points.base is not None  # a view: reading copies nothing
    assert not s.spilled


def test_a_long_series_moves_to_a_file_and_keeps_every_row(monkeypatch):
    monkeypatch.setattr(series_module, "SPILL_BYTES", 100 * 478 * 12)  # past 100 frames
    s = LandmarkSeries(478)
    for i in range(1000):
        s.append(i, None if i == 500 else _points(i))
    assert s.spilled and isinstance(s.points, np.memmap)
    assert s.points.shape == (1000, 478, 3)
    assert all(np.array_equal(s.points[i], _points(i)) for i in (0, 99, 100, 101, 511, 999))
    assert np.isnan(s.points[500]).all() and int(s.face_found().sum()) == 999


def test_from_arrays_takes_the_arrays_as_they_are():
    points = np.stack([_points(i, 468) for i in range(5)])
    s = LandmarkSeries.from_arrays([3, 4, 5, 6, 7], points)
    assert s.num_points == 468 and s.frame_index.tolist() == [3, 4, 5, 6, 7]
    assert np.array_equal(s.points, points)
