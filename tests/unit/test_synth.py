"""The synthetic talking-head kit: files, determinism, variants, signals, bad inputs.

Fast tests use a tiny kit (2 clips, 3 s, 128 px). The MediaPipe/VAD checks of the ground truth
(the lips FaceMesh sees follow the driving signal) are marked slow.
"""
import argparse
import json
import shutil

import av
import numpy as np
import pytest
from scipy.signal import correlate

from theval_mesh.synth import ALL_VARIANTS, GT, KitManifest, generate_kit, load_kit, motion, write_bad_inputs
from theval_mesh.synth.face_geometry import LOWER_INNER, UPPER_INNER, face_geometry
from theval_mesh.synth.speech import PAUSE_MIN_S, SAMPLE_RATE, synthesize_speech
from theval_mesh.synth.variants import AUDIO_DELAY_S, EXAGGERATION

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                reason="espeak-ng is not installed")

SIZE, DURATION, FPS = 128, 3.0, 25
N_FRAMES = int(DURATION * FPS)


def decode(path):
    """(frames (n, h, w, 3) uint8, mono audio float32 or None, audio rate, video fps)."""
    with av.open(str(path)) as c:
        fps = float(c.streams.video[0].average_rate)
        frames = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    with av.open(str(path)) as c:
        if not c.streams.audio:
            return frames, None, None, fps
        rate = c.streams.audio[0].rate
        audio = np.concatenate([f.to_ndarray().reshape(-1) for f in c.decode(audio=0)])
    return frames, audio.astype(np.float32), rate, fps


def lag_samples(x, ref):
    """Delay of x relative to ref (samples), from the cross-correlation peak."""
    n = min(len(x), len(ref))
    cc = correlate(x[:n], ref[:n], mode="full", method="fft")
    return int(np.argmax(cc)) - (n - 1)


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return generate_kit(tmp_path_factory.mktemp("kit"), seed=3, n_clips=2, duration_s=DURATION,
                        size=SIZE, fps=FPS)


@pytest.fixture(scope="module")
def decoded(kit):
    cache = {}

    def get(clip, variant=GT):
        if (clip, variant) not in cache:
            cache[clip, variant] = decode(kit.video(clip, variant))
        return cache[clip, variant]
    return get


# ------------------------------------------------------------------ files and manifest
def test_manifest_describes_every_file(kit):
    assert kit.clips == ("clip_00", "clip_01")
    assert kit.variants == ALL_VARIANTS
    assert kit.languages == ("en", "fr")  # one language per clip, rotating
    assert KitManifest.load(kit.out_dir) == kit
    m = json.loads(kit.manifest_path.read_text())
    assert [c["name"] for c in m["clips"]] == list(kit.clips)
    for entry in m["clips"]:
        assert set(entry["videos"]) == {GT, *ALL_VARIANTS}
        for group in ("videos", "signals"):
            for rel in entry[group].values():
                assert (kit.out_dir / rel).is_file(), rel
    assert (kit.out_dir / "gt" / "clip_00.mp4").is_file()
    assert (kit.out_dir / "signals" / "clip_00.npz").is_file()
    assert not list(kit.out_dir.rglob("*.part*"))


@pytest.mark.parametrize("variant", (GT,) + ALL_VARIANTS)
def test_every_variant_decodes_with_expected_frames_and_duration(kit, decoded, variant):
    for clip in kit.clips:
        frames, audio, rate, fps = decoded(clip, variant)
        assert frames.shape == (N_FRAMES, SIZE, SIZE, 3)
        assert fps == FPS
        assert rate == SAMPLE_RATE
        # AAC pads its last frame: at most 1024 samples more than the clip
        assert N_FRAMES / FPS * rate <= len(audio) <= N_FRAMES / FPS * rate + 1024
        with av.open(str(kit.video(clip, variant))) as c:
            assert c.streams.video[0].codec_context.name == "h264"
            assert c.streams.video[0].format.name == "yuv420p"
            assert c.streams.audio[0].codec_context.name == "aac"


# ------------------------------------------------------------------ determinism
def test_same_seed_same_bytes_and_other_seed_differs(tmp_path):
    args = {"n_clips": 1, "duration_s": 2.0, "size": SIZE, "variants": ("noise", "silent_mouth")}
    a = generate_kit(tmp_path / "a", seed=7, **args)
    b = generate_kit(tmp_path / "b", seed=7, workers=1, **args)  # thread count must not matter
    c = generate_kit(tmp_path / "c", seed=8, **args)
    files = sorted(p.relative_to(a.out_dir) for p in a.out_dir.rglob("*") if p.is_file())
    assert len(files) == 7  # 3 videos, 3 signal files, manifest
    for rel in files:
        if rel.name != "manifest.json":
            assert (a.out_dir / rel).read_bytes() == (b.out_dir / rel).read_bytes(), rel
    fa, aa, _, _ = decode(a.video("clip_00"))
    fc, ac, _, _ = decode(c.video("clip_00"))
    assert not np.array_equal(fa, fc)
    assert not np.array_equal(aa, ac)
    assert not np.array_equal(a.signals("clip_00")["roll_deg"], c.signals("clip_00")["roll_deg"])


def test_reuse_returns_an_existing_complete_kit(kit):
    stamp = kit.video("clip_00").stat().st_mtime_ns
    same = {"seed": 3, "n_clips": 2, "duration_s": DURATION, "size": SIZE, "fps": FPS}
    assert generate_kit(kit.out_dir, reuse=True, **same) == kit
    assert kit.video("clip_00").stat().st_mtime_ns == stamp
    assert load_kit(kit.out_dir, **same) == kit
    assert load_kit(kit.out_dir, **{**same, "seed": 4}) is None
    assert load_kit(kit.out_dir / "nothing-here", **same) is None


def test_paths_and_signal_aliases(kit):
    assert kit.dir("blur") == kit.out_dir / "blur" and kit.dir() == kit.out_dir / "gt"
    assert kit.video("noise", "clip_01") == kit.video("clip_01", "noise")  # either order
    assert kit.videos("noise") == [kit.dir("noise") / f"{c}.mp4" for c in kit.clips]
    s = kit.signals("clip_00")
    assert s["mouth"] is s["mouth_open"] and s["roll"] is s["roll_deg"]
    assert s["brow"] is s["brow_raise"] and s["speech"] is s["speech_segments"]


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown variants"):
        generate_kit(tmp_path, variants=("sepia",))
    with pytest.raises(ValueError, match="too short"):
        generate_kit(tmp_path, duration_s=0.8, n_clips=1, size=SIZE)


# ------------------------------------------------------------------ variants
def test_audio_shift_is_gt_audio_delayed_by_0_4_s_with_the_same_video(kit, decoded):
    for clip in kit.clips:
        gt_frames, gt_audio, rate, _ = decoded(clip)
        frames, audio, _, _ = decoded(clip, "audio_shift")
        assert lag_samples(audio, gt_audio) == pytest.approx(AUDIO_DELAY_S * rate, abs=2)
        assert lag_samples(gt_audio, gt_audio) == 0
        assert np.array_equal(frames, gt_frames)
        assert len(audio) == len(gt_audio)
        shifted = kit.signals(clip, "audio_shift")["speech_segments"]
        original = kit.signals(clip)["speech_segments"]
        np.testing.assert_allclose(shifted[:, 0], original[:, 0] + AUDIO_DELAY_S)


def test_other_variants_keep_the_gt_audio(kit, decoded):
    for variant in set(ALL_VARIANTS) - {"audio_shift"}:
        _, audio, _, _ = decoded("clip_00", variant)
        _, gt_audio, _, _ = decoded("clip_00")
        assert lag_samples(audio, gt_audio) == 0
        assert np.abs(audio - gt_audio).max() < 0.02  # same track, up to AAC's determinism


def test_variant_signals_change_what_they_should(kit):
    for clip in kit.clips:
        gt = kit.signals(clip)
        sig = {v: kit.signals(clip, v) for v in ALL_VARIANTS}
        assert not np.any(sig["static_head"]["roll_deg"]) and not np.any(sig["static_head"]["tx"])
        assert not np.any(sig["frozen_mouth"]["mouth_open"])
        assert not np.any(sig["still_brows"]["brow_raise"])
        np.testing.assert_allclose(sig["exaggerated_mouth"]["mouth_open"],
                                   EXAGGERATION * gt["mouth_open"])
        for v in ("blur", "noise", "audio_shift", "static_head", "frozen_mouth", "still_brows"):
            assert np.array_equal(sig[v]["brow_raise"], gt["brow_raise"]) or v == "still_brows"
        # silent_mouth: GT is closed in the silences, silent_mouth moves there as much as in speech
        speaking = motion.speech_mask(gt["speech_segments"], N_FRAMES, FPS, margin_frames=3)
        assert gt["mouth_open"][~speaking].max() == 0
        chew = sig["silent_mouth"]["mouth_open"][~speaking]
        assert chew.max() > 0.5 * gt["mouth_open"].max()
        during = motion.speech_mask(gt["speech_segments"], N_FRAMES, FPS, margin_frames=1)
        np.testing.assert_array_equal(sig["silent_mouth"]["mouth_open"][during],
                                      gt["mouth_open"][during])


def _mouth_box(clip_signals):
    g = face_geometry(SIZE)
    lm = g.landmarks - g.margin  # photo landmarks in visible-frame pixels
    lips = lm[list(UPPER_INNER + LOWER_INNER)]
    x0, y0 = np.floor(lips.min(0)).astype(int) - 4
    x1, y1 = np.ceil(lips.max(0)).astype(int) + 12
    return slice(y0, y1), slice(x0, x1)


def test_pixels_follow_the_variants(kit, decoded):
    clip = "clip_00"
    gt_frames = decoded(clip)[0].astype(np.float32)
    sig = kit.signals(clip)
    open_t = int(np.argmax(sig["mouth_open"]))
    rows, cols = _mouth_box(sig)
    # the mouth region darkens when GT opens; frozen_mouth stays as at rest
    frozen = decoded(clip, "frozen_mouth")[0].astype(np.float32)
    static = decoded(clip, "static_head")[0].astype(np.float32)
    closed_t = int(np.argmin(sig["mouth_open"] + np.abs(sig["roll_deg"]) + np.abs(sig["tx"])
                             + np.abs(sig["ty"]) + sig["brow_raise"]))
    assert static[open_t][rows, cols].mean() < static[closed_t][rows, cols].mean() - 5
    # frozen_mouth differs from GT only once GT's mouth opens (later frames also differ a little
    # through the encoder's inter-frame prediction)
    assert sig["mouth_open"][0] == 0
    assert np.abs(gt_frames[0] - frozen[0]).mean() < 0.5
    assert np.abs(gt_frames[open_t] - frozen[open_t]).max() > 60
    # static head: silent, brow-free frames are identical up to compression
    still = np.flatnonzero((sig["mouth_open"] == 0) & (sig["brow_raise"] < 1e-3))
    assert np.abs(static[still[0]] - static[still[-1]]).mean() < 1.5
    assert np.abs(gt_frames[still[0]] - gt_frames[still[-1]]).mean() > 3  # GT moved meanwhile

    # blur removes detail, noise adds about 20/255 of it
    def lap(f):
        return np.var(np.diff(f, 2, axis=1))

    blur = decoded(clip, "blur")[0].astype(np.float32)
    noise = decoded(clip, "noise")[0].astype(np.float32)
    assert lap(blur[10]) < 0.2 * lap(gt_frames[10])
    assert 10 < np.std(noise[10] - gt_frames[10]) < 25


# ------------------------------------------------------------------ signals
def test_signals_saved_and_consistent(kit):
    g = face_geometry(SIZE)
    for i, clip in enumerate(kit.clips):
        s = kit.signals(clip)
        for key in ("mouth_open", "roll_deg", "tx", "ty", "brow_raise"):
            assert s[key].shape == (N_FRAMES,), key
        assert (s["fps"], s["size"], s["seed"], s["language"]) == (FPS, SIZE, 3, kit.languages[i])
        assert s["sample_rate"] == SAMPLE_RATE and s["variant"] == GT
        assert np.abs(s["roll_deg"]).max() <= motion.ROLL_MAX_DEG + 1e-9
        assert np.abs(s["roll_deg"]).max() > 2  # it does move
        assert max(np.abs(s["tx"]).max(), np.abs(s["ty"]).max()) <= 6 * SIZE / 256 + 1e-9
        assert np.abs(np.diff(s["roll_deg"])).max() < 1.0  # smooth: < 1 degree per frame
        assert 0 < s["brow_raise"].max() <= motion.FACE_BROW_MAX * g.face_width + 1e-9
        assert 0 < s["mouth_open"].max() <= motion.FACE_MOUTH_MAX * g.face_width + 1e-9
        _check_segments(s["speech_segments"], DURATION)
        assert len(s["texts"]) == len(s["speech_segments"])


def _check_segments(segments, duration):
    segments = np.asarray(segments)
    assert len(segments) >= 1
    assert np.all(segments[:, 1] > segments[:, 0])
    assert 0.3 - 1e-6 <= segments[0, 0] <= 0.5 + 1e-6                # leading silence
    assert duration - segments[-1, 1] >= 0.3 - 1e-6                   # trailing silence
    assert np.all(segments[1:, 0] - segments[:-1, 1] >= PAUSE_MIN_S - 1e-6)


@pytest.mark.parametrize("language", ["en", "fr", "de", "es", "it"])
@pytest.mark.parametrize("seed", [0, 1])
def test_speech_layout(language, seed):
    sp = synthesize_speech(np.random.default_rng(seed), language, 6.0)
    assert sp.audio.dtype == np.float32 and len(sp.audio) == 6 * SAMPLE_RATE
    assert 2 <= len(sp.segments) <= 4
    _check_segments(sp.segments, 6.0)
    inside = np.zeros(len(sp.audio), bool)
    for s, e in sp.segments:
        a, b = int(round(s * SAMPLE_RATE)), int(round(e * SAMPLE_RATE))
        inside[a:b] = True
        seg = sp.audio[a:b]  # tight: speech starts and ends at the segment edges
        assert np.abs(seg[:80]).max() > 0.01 and np.abs(seg[-80:]).max() > 0.01
    assert not np.any(sp.audio[~inside])  # digital silence between utterances


# ------------------------------------------------------------------ bad inputs
def test_bad_inputs_have_their_defect(tmp_path):
    paths = write_bad_inputs(tmp_path, size=SIZE)
    assert set(paths) == {"corrupt", "not_a_video", "no_audio", "no_face"}
    for name in ("corrupt", "not_a_video"):
        with pytest.raises(av.error.FFmpegError), av.open(str(paths[name])) as c:
            list(c.decode(video=0))
    frames, audio, _, _ = decode(paths["no_audio"])
    assert audio is None and len(frames) == 50 and frames.shape[1:] == (SIZE, SIZE, 3)
    frames, audio, rate, _ = decode(paths["no_face"])
    assert len(frames) == 50 and rate == SAMPLE_RATE and np.abs(audio).max() > 0.1
    assert paths["corrupt"].stat().st_size > 1000  # real bytes, just not a whole file


# ------------------------------------------------------------------ CLI command
def test_synth_command(tmp_path, capsys):
    from theval_mesh.commands import synth

    parser = argparse.ArgumentParser()
    synth.register(parser.add_subparsers())
    args = parser.parse_args(["synth", "--out", str(tmp_path / "k"), "--seed", "2", "--clips", "1",
                              "--duration", "2", "--size", str(SIZE)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "1 clips x (gt + 8 variants) = 9 videos" in out
    kit = KitManifest.load(tmp_path / "k")
    assert kit.seed == 2 and kit.size == SIZE and kit.duration_s == 2.0
    assert all(kit.video("clip_00", v).is_file() for v in (GT,) + ALL_VARIANTS)


# ------------------------------------------------------------------ real models (slow)
LEFT_EYE = [263, 249, 390, 373, 374, 380, 381, 382, 362, 466, 388, 387, 386, 385, 384, 398]
RIGHT_EYE = [33, 7, 163, 144, 145, 153, 154, 155, 133, 246, 161, 160, 159, 158, 157, 173]
LEFT_BROW = [276, 283, 282, 295, 285, 300, 293, 334, 296, 336]
RIGHT_BROW = [46, 53, 52, 65, 55, 70, 63, 105, 66, 107]


def _facemesh_track(path):
    """Per frame (NaN without a face), from tracking FaceMesh: mean inner-lip gap (px), mean
    brow-to-eye distance over the eye distance, and roll (degrees, counter-clockwise) of the
    line between the eye centres."""
    import mediapipe as mp
    rows = []
    with av.open(str(path)) as c, mp.solutions.face_mesh.FaceMesh(
            static_image_mode=False, refine_landmarks=True, max_num_faces=1) as mesh:
        for frame in c.decode(video=0):
            rgb = frame.to_ndarray(format="rgb24")
            res = mesh.process(rgb)
            if not res.multi_face_landmarks:
                rows.append((np.nan, np.nan, np.nan))
                continue
            h, w = rgb.shape[:2]
            lm = np.array([(p.x * w, p.y * h) for p in res.multi_face_landmarks[0].landmark])
            gap = np.mean(np.abs(lm[list(UPPER_INNER), 1] - lm[list(LOWER_INNER), 1]))
            left, right = lm[LEFT_EYE].mean(0), lm[RIGHT_EYE].mean(0)
            scale = np.linalg.norm(left - right)
            brow = (np.linalg.norm(lm[LEFT_BROW].mean(0) - left)
                    + np.linalg.norm(lm[RIGHT_BROW].mean(0) - right)) / (2 * scale)
            roll = np.degrees(np.arctan2(right[1] - left[1], left[0] - right[0]))
            rows.append((gap, brow, roll))
    gap, brow, roll = np.array(rows).T
    return {"gap": gap, "brow": brow, "roll": roll}


@pytest.mark.slow
def test_facemesh_follows_the_driving_signals(tmp_path):
    kit = generate_kit(tmp_path / "k", seed=0, n_clips=3, duration_s=6.0, size=256,
                       variants=("frozen_mouth",))
    for clip in kit.clips:
        seen, sig = _facemesh_track(kit.video(clip)), kit.signals(clip)
        found = ~np.isnan(seen["gap"])
        assert found.mean() >= 0.95, clip

        def r(key, signal):
            return np.corrcoef(seen[key][found], sig[signal][found])[0, 1]  # noqa: B023
        assert r("gap", "mouth_open") >= 0.8, (clip, r("gap", "mouth_open"))
        assert r("brow", "brow_raise") >= 0.7, (clip, r("brow", "brow_raise"))
        assert r("roll", "roll_deg") >= 0.95, (clip, r("roll", "roll_deg"))
        slope = np.polyfit(sig["roll_deg"][found], seen["roll"][found], 1)[0]
        assert slope == pytest.approx(1.0, abs=0.1)  # degrees, counter-clockwise positive
        frozen = _facemesh_track(kit.video(clip, "frozen_mouth"))["gap"]
        assert np.nanstd(frozen) < 0.3 * np.nanstd(seen["gap"]), clip


@pytest.mark.slow
def test_no_face_video_has_no_face(tmp_path):
    gaps = _facemesh_track(write_bad_inputs(tmp_path)["no_face"])["gap"]
    assert np.isnan(gaps).mean() >= 0.95


@pytest.mark.slow
def test_vad_finds_the_known_speech_segments():
    from theval_mesh.backends.audio.backend import VAD_RATE, AudioBackend

    assert SAMPLE_RATE == VAD_RATE
    vad = AudioBackend()  # the reference's VAD model (silero-vad 5.1.2)
    for seed, language in [(0, "en"), (1, "fr"), (2, "de")]:
        sp = synthesize_speech(np.random.default_rng(seed), language, 6.0)
        found, = vad.speech_segments(sp.audio)
        assert found
        for s, e in sp.segments:  # every known utterance is mostly covered by detected speech
            overlap = sum(max(0.0, min(e, end) - max(s, start)) for start, end in found)
            assert overlap >= 0.7 * (e - s), (language, s, e, found)
        for start, end in found:  # and nothing is detected in the middle of a pause
            assert any(start < e + 0.15 and end > s - 0.15 for s, e in sp.segments)
