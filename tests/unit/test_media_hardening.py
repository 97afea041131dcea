"""Inputs a security probe sent: lying headers, images named .mp4, bogus time bases, rotated
phone videos and NaN audio. Every file is written here with PyAV, numpy and PIL (no mocks)."""
import io
import struct
import subprocess
import sys

import av
import numpy as np
import pytest

from tests.support.video_files import gradient, image_bytes, raw_h264, tone, without_decoder, write_video
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.errors import InputTooLarge, VideoError
from theval_mesh.pure.limits import Limits

# 1. Limits enforced on what is decoded, not only on the header.

def test_raw_stream_without_duration_stops_at_the_duration_limit(tmp_path):
    path = raw_h264(tmp_path / "raw.mp4", [(64, 48, 60)])  # 2.4 s at 25 fps, no duration anywhere
    r = MediaReader(path, Limits(max_duration_s=1))
    assert r.info.duration_s == 0 and r.info.header_frames == 0  # the header check cannot see it
    seen = []
    with pytest.raises(InputTooLarge, match=r"decoded more than 1 s of video \(26 frames at 25 fps\).*"
                                            r"raise THEVAL_MAX_DURATION_S or split the video"):
        for i, _ in r.frames():
            seen.append(i)
    assert len(seen) == 25  # stopped at the first frame past 1 s


def test_frames_larger_than_the_header_says_are_refused_before_conversion(tmp_path):
    # The header (first SPS) says 64x64; a second SPS switches to 8000-px frames.
    path = raw_h264(tmp_path / "grow.mp4", [(64, 64, 30), (8000, 16, 2)])
    r = MediaReader(path)  # default limits: 4096 px
    assert (r.info.width, r.info.height) == (64, 64)
    shapes = []
    with pytest.raises(InputTooLarge, match=r"decoded frame 30 is 8000x16 \(the header says 64x64\), "
                                            r"over the 4096 px limit"):
        for _, frame in r.frames():
            shapes.append(frame.shape)
    assert shapes == [(64, 64, 3)] * 30


def test_pixel_budget_while_decoding_and_from_the_header(tmp_path, clip_writer):
    assert Limits().max_pixels >= 1920 * 1080 * 60 * 600  # any normal clip up to the duration limit
    budget = Limits(max_pixels=64 * 48 * 10)
    raw = raw_h264(tmp_path / "raw.mp4", [(64, 48, 20)])  # no frame count in the header
    r = MediaReader(raw, budget)
    with pytest.raises(InputTooLarge, match=r"decoded more than 3.07e\+04 pixels \(11 frames\).*THEVAL_MAX_PIXELS"):
        list(r.frames())
    with pytest.raises(InputTooLarge, match=r"20 frames of 64x48 are over the 3.07e\+04-pixel budget"):
        MediaReader(clip_writer(frames=20, tone=None), budget)
    assert len(list(MediaReader(raw, Limits(max_pixels=64 * 48 * 20)).frames())) == 20  # exactly at the budget


def test_audio_longer_than_the_duration_limit_is_refused(tmp_path):
    # One second of video (the header check passes) with a 20 s audio track.
    path = write_video(tmp_path / "long_audio.mp4", gradient(25), audio=tone(20))
    limits = Limits(max_duration_s=5)
    with pytest.raises(InputTooLarge, match="decoded more than 5 s of audio"):
        MediaReader(path, limits).read_audio()
    with pytest.raises(InputTooLarge, match="decoded more than 5 s of audio"):
        list(MediaReader(path, limits).frames())
    assert MediaReader(path).read_audio().duration_s == pytest.approx(20, abs=0.1)  # default limits


# 2. Images named .mp4.

@pytest.mark.parametrize("fmt, frames, kind", [
    ("PNG", 1, "png"), ("JPEG", 1, "jpeg"), ("GIF", 1, "gif"), ("BMP", 1, "bmp"), ("WEBP", 1, "webp"),
    ("TIFF", 1, "tiff"),
    ("GIF", 5, "gif"),   # animated: still an image format
    ("PNG", 5, "apng"),  # animated PNG
])
def test_images_named_mp4_are_refused(tmp_path, fmt, frames, kind):
    path = tmp_path / "image.mp4"
    path.write_bytes(image_bytes(fmt, frames, duration=100))
    with pytest.raises(VideoError) as err:
        MediaReader(path)
    assert err.value.reason == f"an image ({kind}), not a video"


def test_a_single_png_frame_in_a_video_container_is_an_image(tmp_path):
    path = write_video(tmp_path / "still.mov", gradient(1), video_codec="png")
    with pytest.raises(VideoError, match=r"an image \(png\), not a video"):
        MediaReader(path)


def test_mp3_with_cover_art_is_not_a_video(tmp_path):
    mp3 = io.BytesIO()
    out = av.open(mp3, "w", format="mp3")
    aus = out.add_stream("libmp3lame", rate=16000)
    aus.layout = "mono"
    for k in range(0, 16000, 1152):
        fr = av.AudioFrame.from_ndarray(np.ascontiguousarray(tone(1)[:, k:k + 1152]), format="fltp", layout="mono")
        fr.sample_rate, fr.pts = 16000, k
        for p in aus.encode(fr):
            out.mux(p)
    for p in aus.encode():
        out.mux(p)
    out.close()
    # An ID3v2.3 tag holding the album cover (an APIC frame), as music players write it.
    png = image_bytes("PNG")
    apic = b"\x00image/png\x00\x03\x00" + png  # latin-1, mime, front cover, no description
    frame = b"APIC" + struct.pack(">I", len(apic)) + b"\x00\x00" + apic
    size = len(frame)
    syncsafe = bytes([(size >> 21) & 0x7F, (size >> 14) & 0x7F, (size >> 7) & 0x7F, size & 0x7F])
    path = tmp_path / "song.mp4"
    path.write_bytes(b"ID3\x03\x00\x00" + syncsafe + frame + mp3.getvalue())
    with pytest.raises(VideoError, match=r"an image \(png\), not a video"):
        MediaReader(path)


# 3. A bogus time base.

def test_zero_timescale_is_no_frame_rate_not_a_long_duration(tmp_path, clip_writer):
    with open(clip_writer(frames=75, tone=None), "rb") as f:
        data = bytearray(f.read())
    k = data.find(b"mdhd")  # version 0: version/flags, creation, modification, then the timescale
    assert data[k + 4] == 0 and struct.unpack(">I", data[k + 16:k + 20]) == (12800,)
    data[k + 16:k + 20] = b"\0\0\0\0"
    path = tmp_path / "timescale0.mp4"
    path.write_bytes(bytes(data))
    for limits in (Limits(), Limits(max_duration_s=1)):  # the frame-rate check wins over the duration's
        with pytest.raises(VideoError) as err:
            MediaReader(path, limits)
        assert err.value.reason == "video stream has no frame rate"
        assert not isinstance(err.value, InputTooLarge)


# 4. Rotation (display matrix).

# The tkhd matrix {a b u, c d v, x y w} (16.16 fixed point; w 2.30) a camera writes: a phone
# filming in portrait stores landscape frames with the matrix that turns them 90 degrees clockwise.
_IDENTITY = struct.pack(">9i", 65536, 0, 0, 0, 65536, 0, 0, 0, 1 << 30)
_MATRIX = {90: (0, 65536, 0, -65536, 0, 0, 0, 0, 1 << 30),
           180: (-65536, 0, 0, 0, -65536, 0, 0, 0, 1 << 30),
           270: (0, -65536, 0, 65536, 0, 0, 0, 0, 1 << 30)}


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_rotated_phone_video_is_decoded_upright(tmp_path, rotation):
    w, h = 64, 48
    stored = np.zeros((h, w, 3), np.uint8)
    # The side of the stored picture that a player shows on top: turning it clockwise by 90
    # brings the left edge up, by 180 the bottom, by 270 the right.
    if rotation == 90:
        stored[:, : w // 2] = 255
    elif rotation == 180:
        stored[h // 2:] = 255
    else:
        stored[:, w // 2:] = 255
    path = write_video(tmp_path / "phone.mp4", [stored] * 5)
    data = path.read_bytes()
    k = data.find(b"tkhd") + 44  # version 0: the matrix follows 40 bytes of fields
    assert data[k:k + 36] == _IDENTITY
    path.write_bytes(data[:k] + struct.pack(">9i", *_MATRIX[rotation]) + data[k + 36:])

    r = MediaReader(path)
    upright = (w, h) if rotation == 180 else (h, w)  # (width, height)
    assert r.info.rotation == rotation and (r.info.width, r.info.height) == upright
    frames = [f for _, f in r.frames()]
    assert len(frames) == 5
    for f in frames:
        assert f.shape == (upright[1], upright[0], 3) and f.flags.c_contiguous
        top, bottom = f[: f.shape[0] // 2 - 2], f[f.shape[0] // 2 + 2:]
        assert top.mean() > 240 and bottom.mean() < 15  # face-up content comes out upright


def test_unrotated_video_has_rotation_zero(clip_writer):
    r = MediaReader(clip_writer(frames=3, tone=None))
    assert r.info.rotation == 0 and (r.info.width, r.info.height) == (64, 48)
    assert all(f.shape == (48, 64, 3) for _, f in r.frames())


# 5. NaN / inf audio samples.

@pytest.mark.parametrize("name", ["nan.mov", "nan.mkv"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_audio_makes_the_track_unusable_not_silent(tmp_path, name, bad):
    audio = tone(1.0)
    audio[0, 4000:4100] = bad
    path = write_video(tmp_path / name, gradient(25), audio=audio, audio_codec="pcm_f32le", audio_format="flt")
    r = MediaReader(path, reference_audio=True)
    assert len(list(r.frames())) == 25  # the video still scores
    assert r.audio.problem == "audio track has NaN or infinite samples"
    assert len(r.audio.samples) == 0 and len(r.audio.pcm16) == 0 and len(r.audio.moviepy) == 0
    alone = MediaReader(path).read_audio()  # the audio-only decode says the same
    assert alone.problem == r.audio.problem and len(alone.samples) == 0


def test_finite_float_pcm_audio_is_kept(tmp_path):
    path = write_video(tmp_path / "ok.mov", gradient(25), audio=tone(1.0), audio_codec="pcm_f32le", audio_format="flt")
    r = MediaReader(path)
    list(r.frames())
    assert r.audio.problem is None and r.audio.rate == 16000
    assert np.sqrt(np.mean(r.audio.samples ** 2)) == pytest.approx(0.5 / np.sqrt(2), abs=0.01)


@pytest.mark.slow
def test_a_video_with_nan_audio_scores_with_nan_sync_metrics_and_the_reason(tmp_path):
    """End to end through the scoring composition: the sync metrics carry the track's problem."""
    from theval_mesh.core.engine import Engine
    from theval_mesh.pure.settings import RunSettings
    from theval_mesh.synth import generate_kit

    kit = generate_kit(tmp_path / "kit", seed=3, n_clips=1, duration_s=2.0, size=128)
    frames = [f for _, f in MediaReader(kit.video("clip_00", "gt")).frames()]
    audio = tone(len(frames) / 25)
    audio[0, 100] = np.nan
    path = write_video(tmp_path / "nan.mov", frames, audio=audio, audio_codec="pcm_f32le", audio_format="flt")
    result = Engine(RunSettings(quality="proxy")).score_video(path)
    assert result.status == "ok" and result.face_frames > 0
    for key in ("lip_sync", "silent_lip_stability"):
        assert np.isnan(result.metrics[key]) and "NaN or infinite" in result.nan_reasons[key]
    assert any("NaN or infinite" in w for w in result.warnings)


# 5. Large frames waiting for their quality batch.

@pytest.mark.slow  # encodes and decodes 16 frames of 4096x4096 (about 15 s)
def test_large_frames_wait_for_the_proxy_scaled_down_and_score_the_same(tmp_path):
    """A 4096x4096 clip: the quality pass keeps each frame as the proxy sees it (<= 256 px), not
    64 full frames (3.2 GB), and the scores equal the proxy's on the full frames."""
    import subprocess
    import sys
    a, b = np.full((4096, 4096, 3), 60, np.uint8), np.full((4096, 4096, 3), 90, np.uint8)
    a[::7, ::5], b[::5, ::3] = 200, 10
    path = write_video(tmp_path / "big.mp4", [a, b] * 8)  # 16 frames: 805 MB if they waited whole
    code = f"""
import numpy as np
from theval_mesh.backends.landmarks.series import LandmarkSeries
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.frame_pass import run_quality_pass
from theval_mesh.pure.settings import RunSettings
from theval_mesh.backends.quality import proxy
from theval_mesh.backends.quality.backend import QualityBackend
reader = MediaReader({str(path)!r})
pts = np.full((reader.frame_count, 478, 3), 0.5, np.float32)
single = LandmarkSeries.from_arrays(np.arange(reader.frame_count), pts)
out = run_quality_pass(reader, RunSettings(quality="proxy"), QualityBackend(mode="proxy"), {{"single": single}})
direct = [proxy.score(f) for _, f in MediaReader({str(path)!r}).frames()]
assert np.array_equal(out.global_aesthetic, direct), (out.global_aesthetic[:3], direct[:3])
# VmHWM: this program's own peak (ru_maxrss would carry the forking test process's)
print("PEAK_MB", next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) // 1024)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    peak = int(run.stdout.split("PEAK_MB")[1])
    assert peak < 700, f"peak RSS {peak} MB"  # measured 372 MB; the 16 frames alone would be 805 MB


# 6. Damage a fuzzer found: a stream whose codec ffmpeg cannot name.

def test_a_video_stream_without_a_decoder_is_a_video_error(tmp_path):
    path = without_decoder(write_video(tmp_path / "v.mp4", gradient(5), audio=tone(0.2)), "video")
    with pytest.raises(VideoError, match=r"the video stream's codec is unknown to ffmpeg .*re-encode it"):
        MediaReader(path)


def test_an_audio_stream_without_a_decoder_is_an_unusable_track_with_the_reason(tmp_path):
    path = without_decoder(write_video(tmp_path / "a.mp4", gradient(5), audio=tone(0.2)), "audio")
    r = MediaReader(path)
    assert len(list(r.frames())) == 5
    assert r.audio.problem == "the audio stream's codec is unknown to ffmpeg" and not len(r.audio.samples)
    assert MediaReader(path).read_audio().problem == r.audio.problem


# 7. Limits before any frame is decoded.

def test_a_huge_header_is_refused_before_any_frame_is_decoded(tmp_path):
    """The header's size is checked before the first frame is decoded for its rotation: opening a
    6000x6000 file used to decode a 54 MB picture first. Measured in a fresh process: its peak RSS
    (VmHWM; ru_maxrss would carry this test process's peak over the exec)."""
    path = raw_h264(tmp_path / "huge.mp4", [(6000, 6000, 1)])
    code = ("import re, sys\n"
            "from theval_mesh.backends.media.decode import MediaReader\n"
            "from theval_mesh.pure.errors import InputTooLarge\n"
            "def peak():\n    return int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])\n"
            "before = peak()\n"
            "try:\n    MediaReader(sys.argv[1])\nexcept InputTooLarge as err:\n    print(err.reason)\n"
            "print(peak() - before)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    reason, grown_kb = out.stdout.strip().splitlines()
    assert reason.startswith("resolution 6000x6000 is over the 4096 px limit")
    assert int(grown_kb) < 20_000, f"opening grew the process by {int(grown_kb) // 1024} MB"


def test_the_decoder_itself_refuses_a_picture_over_the_bound(tmp_path):
    """A header that says 64x64 and a stream that switches to 3000x3000: ffmpeg's max_pixels stops
    the decoder before it allocates the big picture (the per-frame check would only come after it,
    as InputTooLarge naming the decoded size)."""
    path = raw_h264(tmp_path / "switch.mp4", [(64, 64, 30), (3000, 3000, 1)])
    r = MediaReader(path, Limits(max_side_px=1000))
    assert (r.info.width, r.info.height) == (64, 64)
    with pytest.raises(VideoError, match=r"corrupt stream after 30 frames"):
        list(r.frames())
