"""The VAD path without torch, held to the torch-based code it replaced: silero's OnnxWrapper
(probabilities to the bit), silero's rule from probabilities to segments, and torchaudio's
resampling formula (the same float32 taps; outputs to float32 rounding). The scoring process of a
proxy-quality run then never imports torch (checked in a fresh interpreter)."""
import subprocess
import sys

import numpy as np
import pytest

from tests.support.torch_audio import WrapperVad, torch_kernel, torch_resample
from theval_mesh.backends.audio.backend import load_vad_model, speech_probabilities
from theval_mesh.backends.audio.resample import kernel, resample
from theval_mesh.pure.metrics.vad_segments import RATE, WINDOW, speech_segments


def _voice_like(seconds: float, seed: int) -> np.ndarray:
    """Bursts of harmonic, amplitude-modulated tones between silences: the VAD says speech and
    silence in turns (real speech is in the parity clips' tests)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    voiced = np.sin(2 * np.pi * 1.3 * t + rng.uniform(0, 6)) > 0
    f0 = 120 + 40 * np.sin(2 * np.pi * 0.7 * t)
    tone = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / RATE) / k for k in range(1, 8))
    return (0.3 * voiced * tone * (1 + 0.5 * np.sin(2 * np.pi * 4 * t)) + rng.normal(0, 0.003, t.size)).astype(np.float32)


def test_the_onnx_session_gives_silero_wrappers_probabilities_to_the_bit_alone_and_batched():
    waves = [_voice_like(6.0, 1), _voice_like(3.3, 2)]
    ours, theirs = load_vad_model(), WrapperVad()
    for got, want in zip(speech_probabilities(ours, waves), speech_probabilities(theirs, waves)):
        assert np.array_equal(got, want)
    alone = speech_probabilities(ours, waves[1:])[0]
    assert np.array_equal(alone, speech_probabilities(theirs, waves[1:])[0])
    assert (alone > 0.5).any() and (alone < 0.35).any()  # speech and silence: the test means something


def _silero_rule(probs, n_samples):
    """silero-vad's installed rule (get_speech_timestamps_from_probs, the defaults), rounded to
    0.1 s as 5.1.2 rounds (return_seconds)."""
    from silero_vad.utils_vad import get_speech_timestamps_from_probs
    stamps = get_speech_timestamps_from_probs([float(p) for p in probs], sampling_rate=RATE,
                                              audio_length_samples=n_samples)
    return [(round(s["start"] / RATE, 1), round(s["end"] / RATE, 1)) for s in stamps]


def test_the_segment_rule_is_silero_s_on_seeded_probability_sequences():
    """Runs of speech and silence of every length around the rule's limits (250 ms of speech,
    100 ms of silence, 30 ms of padding), probabilities at and around both thresholds, and
    audio lengths that end mid-window."""
    rng = np.random.default_rng(0)
    levels = np.array([0.0, 0.2, 0.34999, 0.35, 0.4, 0.49999, 0.5, 0.6, 1.0], np.float32)
    segments_seen = 0
    for case in range(1500):
        runs = rng.integers(1, 14, size=rng.integers(1, 12))
        probs = np.concatenate([np.full(r, levels[rng.integers(len(levels))]) for r in runs])
        probs = np.where(rng.random(probs.size) < 0.1, rng.random(probs.size), probs).astype(np.float32)
        n_samples = len(probs) * WINDOW - int(rng.integers(0, WINDOW))
        got = speech_segments(probs, n_samples)
        assert got == _silero_rule(probs, n_samples), case
        segments_seen += len(got)
    assert segments_seen > 1000
    assert speech_segments([], 0) == [] and speech_segments(np.ones(4), 0) == []


def test_edges_round_to_a_tenth_of_a_second_without_a_cap_as_5_1_2():
    """5.1.2 (utils_vad.py `round(speech_dict['end'] / sampling_rate, 1)`) does not cap the end at
    the audio's length, as later releases do: 1.06 s of speech ends at 1.1 s."""
    n = 16960
    assert speech_segments(np.ones(-(-n // WINDOW), np.float32), n) == [(0.0, 1.1)]


@pytest.mark.parametrize("orig", [44100, 48000, 22050, 8000, 32000, 24000, 11025])
def test_resampling_has_torchaudios_taps_and_its_samples_to_float32_rounding(orig):
    g = np.gcd(orig, RATE)
    assert kernel(orig // g, RATE // g)[0].dtype == np.float32
    x = _voice_like(2.0, 3)
    x = np.interp(np.arange(int(2.0 * orig)) * RATE / orig, np.arange(x.size), x).astype(np.float32)
    got, want = resample(x, orig, RATE), torch_resample(x, orig, RATE)
    assert got.shape == want.shape == (-(-len(x) * RATE // orig),)
    np.testing.assert_allclose(got, want, rtol=0, atol=6e-7)
    assert np.mean(got == want) > 0.1  # mostly the same floats, not merely close


def test_resampling_taps_equal_torchs_bit_for_bit():
    for orig, new in [(441, 160), (3, 1), (1, 2), (147, 160)]:
        taps, width = kernel(orig, new)
        want, want_width = torch_kernel(orig, new)
        assert width == want_width and np.array_equal(taps, want.numpy()[:, 0])


@pytest.mark.slow  # a few seconds: ./dev test runs it, ./dev check leaves it
def test_a_proxy_run_scores_a_video_without_importing_torch(tmp_path):
    """The start-up cut this is for: torch's import alone cost a second of every run."""
    from theval_mesh.synth import generate_kit
    kit = generate_kit(tmp_path / "kit", seed=3, n_clips=1, duration_s=1.5, size=128)
    video = next(p for p in sorted((tmp_path / "kit").rglob("*.mp4")))
    code = ("import sys\nfrom theval_mesh.jobs.pipeline import ScoringWorker, JobSpec\n"
            "from theval_mesh.pure.settings import RunSettings\n"
            "w = ScoringWorker(JobSpec(inputs=[], settings=RunSettings(quality='proxy').key()), threads=1)\n"
            f"status, r = w.score('gt', {str(video)!r})\n"
            "assert status == 'ok' and r.status == 'ok', r\n"
            "print('torch' in sys.modules, sorted(k for k, v in r.metrics.items() if v == v))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    imported, scored = out.stdout.strip().split(" ", 1)
    assert imported == "False", kit
    assert "lip_sync" in scored and "silent_lip" in scored, scored  # the VAD ran: both metrics that read it
