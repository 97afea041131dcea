"""The audio-visual offset estimate (pure.metrics.av_offset) on the synthetic kit's own signals:
the mouth opening that drives a clip and its speech, the speech shifted by known amounts."""
import math

import numpy as np
import pytest

from theval_mesh.pure.metrics.av_offset import av_offset
from theval_mesh.pure.metrics.loudness import rms_envelope
from theval_mesh.pure.metrics.speech_frames import speech_mask
from theval_mesh.synth.kit import gt_signals
from theval_mesh.synth.speech import SAMPLE_RATE, delay_audio

FPS = 25


@pytest.fixture(scope="module")
def clip():
    signals, _ = gt_signals(seed=7, index=0, language="en", duration_s=6.0, fps=FPS, size=256)
    return signals


def shifted(signals, shift_s):
    audio = delay_audio(signals.audio, shift_s)
    segments = [(s + shift_s, e + shift_s) for s, e in signals.speech_segments]
    n = len(signals.mouth_open)
    rms, times = rms_envelope(audio, SAMPLE_RATE)
    return signals.mouth_open, np.arange(n) / FPS, rms, times, speech_mask(segments, FPS, n)


@pytest.mark.parametrize("shift_s", [-0.4, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3, 0.4])
def test_each_known_shift_is_recovered_within_one_frame(clip, shift_s):
    found = av_offset(*shifted(clip, shift_s))
    assert abs(found.ms - 1000 * shift_s) <= 1000 / FPS, found
    assert found.confidence > 0.2 and found.frames >= 100


def test_no_speech_or_no_face_gives_no_estimate(clip):
    openness, times, rms, rms_times, speech = shifted(clip, 0.0)
    assert math.isnan(av_offset(openness, times, rms, rms_times, np.zeros_like(speech)).ms)
    assert av_offset(np.full_like(openness, np.nan), times, rms, rms_times, speech).frames == 0


def test_a_clip_shorter_than_the_largest_lag_is_no_error(clip):
    openness, times, rms, rms_times, speech = (x[:20] if len(x) == len(clip.mouth_open) else x
                                               for x in shifted(clip, 0.0))
    found = av_offset(openness, times, rms, rms_times, speech)
    assert found.frames == 20 and abs(found.ms) <= 500


def test_a_mouth_unrelated_to_the_voice_has_little_confidence(clip):
    openness, times, rms, rms_times, speech = shifted(clip, 0.0)
    frozen = np.random.default_rng(0).normal(0, 1, len(openness))
    assert av_offset(frozen, times, rms, rms_times, speech).confidence < \
        av_offset(openness, times, rms, rms_times, speech).confidence / 2
