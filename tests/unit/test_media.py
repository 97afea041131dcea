"""Decoding with real PyAV on real files, and the errors a user sees for bad inputs."""
import numpy as np
import pytest

from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.errors import VideoError
from theval_mesh.pure.limits import Limits


def test_frames_and_audio_decoded_in_one_pass(clip_writer):
    path = clip_writer(frames=12, size=(64, 48), tone=[0.5])
    r = MediaReader(path)
    assert (r.info.width, r.info.height, r.info.fps) == (64, 48, 25.0)
    frames = list(r.frames())
    assert [i for i, _ in frames] == list(range(12)) and r.frame_count == 12
    assert frames[0][1].shape == (48, 64, 3) and frames[0][1].dtype == np.uint8
    assert r.audio.rate == 16000
    assert abs(r.audio.duration_s - 12 / 25) < 0.1
    # a 0.5-amplitude sine survives AAC: RMS near 0.5/sqrt(2)
    assert np.sqrt(np.mean(r.audio.samples[2000:6000] ** 2)) == pytest.approx(0.354, abs=0.03)


def test_stereo_is_averaged_to_mono(clip_writer):
    path = clip_writer(frames=25, audio_rate=44100, channels=2, tone=[0.8, 0.0])
    r = MediaReader(path)
    list(r.frames())
    rms = np.sqrt(np.mean(r.audio.samples[5000:30000] ** 2))
    assert rms == pytest.approx(0.4 / np.sqrt(2), abs=0.03)  # (0.8 + 0) / 2


def test_video_without_audio_has_no_audio(clip_writer):
    r = MediaReader(clip_writer(frames=5, tone=None))
    list(r.frames())
    assert r.info.has_audio is False and r.audio is None


@pytest.mark.parametrize("make, reason", [
    (lambda d: d / "missing.mp4", "file not found"),
    (lambda d: d, "a folder, not a video file"),
    (lambda d: _write(d / "empty.mp4", b""), "empty file"),
    (lambda d: _write(d / "text.mp4", b"this is not a video\n" * 50), "not a readable video"),
])
def test_bad_files_name_the_problem(tmp_path, make, reason):
    with pytest.raises(VideoError) as err:
        MediaReader(make(tmp_path))
    assert reason in err.value.reason


def test_truncated_file_is_reported(clip_writer, tmp_path):
    data = open(clip_writer(frames=30, tone=[0.3]), "rb").read()
    bad = _write(tmp_path / "half.mp4", data[: len(data) // 2])
    with pytest.raises(VideoError) as err:
        r = MediaReader(bad)
        list(r.frames())
    assert str(bad) in str(err.value)


def test_limits_on_resolution_and_duration(clip_writer):
    path = clip_writer(frames=50, size=(64, 48), tone=None)
    with pytest.raises(VideoError, match="resolution 64x48 is over the 32 px limit"):
        MediaReader(path, Limits(max_side_px=32))
    with pytest.raises(VideoError, match="duration .* over the 1 s limit"):
        MediaReader(path, Limits(max_duration_s=1))
    with pytest.raises(VideoError, match="over the"):
        MediaReader(path, Limits(max_bytes=100))


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name, video_codec, audio_codec, rate", [
    ("clip.mov", "libx264", "aac", 16000),
    ("clip.mkv", "libx264", "aac", 16000),
    ("clip.avi", "mpeg4", "libmp3lame", 16000),
    ("clip.webm", "libvpx-vp9", "libopus", 48000),
])
def test_every_supported_container_decodes(clip_writer, name, video_codec, audio_codec, rate):
    path = clip_writer(name, frames=25, tone=[0.5], video_codec=video_codec, audio_codec=audio_codec,
                       audio_rate=rate)
    r = MediaReader(path)
    frames = list(r.frames())
    assert len(frames) == 25 and r.info.fps == 25.0
    assert r.audio is not None and abs(r.audio.duration_s - 1.0) < 0.15
    assert np.sqrt(np.mean(r.audio.samples[r.audio.rate // 4: r.audio.rate // 2] ** 2)) == pytest.approx(0.354, abs=0.05)
