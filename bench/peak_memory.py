"""Peak resident memory while scoring one 60 s 512x512 clip with the full engine (all 8 metrics).

The scoring runs in a child process so its peak RSS is measured alone (ru_maxrss of children).
"""
import resource
import subprocess
import sys

from common import kit

CHILD = """
import sys
from theval_mesh.core.engine import Engine
from theval_mesh.pure.settings import RunSettings
r = Engine(RunSettings(quality="proxy")).score_video(sys.argv[1], "bench")
print(r.status, r.frames_used, r.reason or "")
"""


def main():
    k = kit(n_clips=1, duration_s=60.0, size=512)
    clip = k.videos("gt")[0]
    out = subprocess.run([sys.executable, "-c", CHILD, clip], capture_output=True, text=True, check=True)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"scored: {out.stdout.strip()}")
    print(f"peak RSS for a 60 s 512x512 clip: {peak_mb:.0f} MB  (target < 2048 MB)")


if __name__ == "__main__":
    main()
