"""The reference's audio path, checked against the reference scripts' own outputs.

What the reference does (Newbyl/THEval at 3603338):
- Synchronization/lip_sync.py lines 23-30: moviepy writes the track as a 44.1 kHz WAV
  (`write_audiofile` defaults), `librosa.load(sr=None)` reads it for the RMS; lines 32-34: silero's
  `read_audio` of that same WAV and `get_speech_timestamps(..., return_seconds=True)`; lines 36-42:
  segment [s, e] covers frames int(s*fps)..int(e*fps), the ratio is over decord's frame count.
- Synchronization/silent_lip_stability.py lines 25-46: pydub extracts the track at its native rate,
  exports a WAV, `read_audio` + `get_speech_timestamps`; lines 51-73: silence = frames of OpenCV's
  count not covered by speech, in runs of at least 0.3 s; line 21/23: `load_silero_vad()` (5.1.2's
  JIT model by default).
The parity set's oracle.csv records, per clip, lip_sync.py's speech ratio and the number of silent
frames silent_lip_stability.py kept: both must come out identical here.
"""
import numpy as np
import pytest

from tests.support.parity_set import clip, oracle
from tests.support.torch_audio import JitVad, torch_resample
from theval_mesh.backends.audio.backend import AudioBackend, load_vad_model, speech_probabilities
from theval_mesh.backends.audio.resample import resample
from theval_mesh.backends.media.audio import MOVIEPY_RATE
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.metrics.speech_frames import silent_frames, speech_mask
from theval_mesh.pure.metrics.vad_segments import speech_segments

pytestmark = pytest.mark.slow
ORACLE = oracle()


def _reference_audio(name):
    reader = MediaReader(clip(name), reference_audio=True)
    return reader.info, reader.read_audio()


def test_speech_ratio_and_silent_frames_equal_the_reference_scripts_on_every_parity_clip():
    backend = AudioBackend()
    for name, row in ORACLE.items():
        info, audio = _reference_audio(name)
        series = backend.analyse(audio, "reference")
        ratio = speech_mask(series.speech, info.fps, info.header_frames).mean()
        assert round(float(ratio), 4) == float(row["ls_speech_ratio"]), name
        kept = silent_frames(series.silence_speech, info.fps, info.header_frames)
        assert len(kept) == int(row["sls_silent_frames"]), name


def test_the_onnx_export_gives_the_jit_models_segments_in_three_languages():
    """The reference loads 5.1.2's JIT model; we run its ONNX export (about 4x faster). Same
    segments on German, English and Italian speech, through both of the reference's extractions."""
    onnx, jit = load_vad_model(), JitVad()
    names = [n for n in ORACLE if n.endswith(("_gt", "_long"))]
    assert {ORACLE[n]["lang"] for n in names if ORACLE[n]["lang"]} >= {"de", "en", "it"}
    for name in names:
        _, audio = _reference_audio(name)
        for wave in (resample(audio.moviepy, MOVIEPY_RATE, 16000), resample(audio.pcm16, audio.rate, 16000)):
            by_jit = speech_probabilities(jit, [wave])[0]
            by_onnx = speech_probabilities(onnx, [wave])[0]
            assert speech_segments(by_onnx, len(wave)) == speech_segments(by_jit, len(wave)), name
            assert np.max(np.abs(by_onnx - by_jit)) < 1e-3, name


def test_numpy_resampling_gives_torchs_segments_on_every_parity_clip():
    """The resampler moved from torch's conv1d to numpy (the same float32 taps; the sums in
    another order): on both of the reference's extractions of every parity clip, the VAD's
    probabilities stay within float32 noise and the segments are the same."""
    vad, compared, worst = load_vad_model(), 0, 0.0
    for name in ORACLE:
        _, audio = _reference_audio(name)
        for samples, rate in ((audio.moviepy, MOVIEPY_RATE), (audio.pcm16, audio.rate)):
            ours, torchs = resample(samples, rate, 16000), torch_resample(samples, rate, 16000)
            assert np.max(np.abs(ours - torchs)) < 1e-6, name
            p_ours, p_torch = speech_probabilities(vad, [ours, torchs])
            worst = max(worst, float(np.max(np.abs(p_ours - p_torch))))
            assert speech_segments(p_ours, len(ours)) == speech_segments(p_torch, len(torchs)), name
            compared += 1
    assert compared == 2 * len(ORACLE) and worst < 1e-4, worst
