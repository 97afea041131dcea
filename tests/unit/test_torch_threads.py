"""An embedded run keeps the process's torch thread count: silero_vad's package import sets it to 1
for the whole process, which once left every network of an embedded run on one core (a run with
the real quality models and FaceXFormer took 2.1x as long). The product now runs the VAD without
silero's package (backends/audio/silero_onnx.py), so it never imports it."""
import subprocess
import sys

import pytest


@pytest.mark.slow  # a few seconds: ./dev test runs it, ./dev check leaves it
def test_the_engine_and_the_audio_backend_keep_torch_threads_and_never_import_silero():
    code = ("import sys, torch; torch.set_num_threads(3); "
            "import theval_mesh.core.engine, theval_mesh.backends.audio.backend; "
            "from theval_mesh.pure.settings import RunSettings; "
            "e = theval_mesh.core.engine.Engine(RunSettings(quality='proxy')); "
            "import numpy; e.audio.speech_segments(numpy.zeros(16000, 'float32')); "
            "print(torch.get_num_threads(), 'silero_vad' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.split() == ["3", "False"], out.stderr[-2000:]
