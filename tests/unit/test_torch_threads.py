"""An embedded run keeps the process's torch thread count: silero_vad's package import sets it to 1
for the whole process, which once left every network of an embedded run on one core (a run with
the real quality models and FaceXFormer took 2.1x as long)."""
import subprocess
import sys


def test_importing_the_engine_and_the_audio_backend_keeps_torch_threads():
    code = ("import torch; torch.set_num_threads(3); "
            "import theval_mesh.core.engine, theval_mesh.backends.audio.backend, silero_vad; "
            "print(torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip() == "3", out.stderr[-2000:]
