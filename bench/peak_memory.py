"""Peak memory and time of scoring one long video with the full engine (all 8 metrics, every
reference FaceMesh pass), in one run: a 60 s and a 600 s clip of the same kind (64x64, silent,
faceless: the probe's clip that once ran unbounded), their ratios, and a 60 s 512x512 talking head.

Each clip is scored in a child process of its own, so its memory is measured alone: the peak of its
anonymous memory (sampled every 0.1 s; a landmark series past 64 MB lives in a temporary file, in
the page cache) and its peak resident set (VmHWM, page cache of that file included).
"""
import subprocess
import sys
import tempfile
from pathlib import Path

from common import kit

from tests.support.video_files import silent_gradient

CHILD = """
import re, sys, threading, time
from theval_mesh.core.engine import Engine
from theval_mesh.pure.settings import RunSettings

def status(key):
    return int(re.search(key + r":\\s+(\\d+)", open("/proc/self/status").read())[1]) // 1024
peak, stop = [0], threading.Event()
def sample():
    while not stop.wait(0.1):
        peak[0] = max(peak[0], status("RssAnon"))
engine = Engine(RunSettings(quality="proxy"))
loaded = status("RssAnon")
threading.Thread(target=sample, daemon=True).start()
start = time.perf_counter()
r = engine.score_video(sys.argv[1], "bench")
seconds = time.perf_counter() - start
stop.set()
print(r.status, r.frames_used, round(seconds, 1), loaded, max(peak[0], status("RssAnon")), status("VmHWM"))
"""


def measure(clip) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(clip)], capture_output=True, text=True, check=True)
    status, frames, seconds, loaded, anon, hwm = out.stdout.split()
    return {"status": status, "frames": int(frames), "seconds": float(seconds), "loaded": int(loaded),
            "anon": int(anon), "hwm": int(hwm)}


def show(name: str, m: dict):
    print(f"{name:<28} {m['status']:<4} {m['frames']:>6} frames {m['seconds']:>7.1f} s "
          f"({m['frames'] / m['seconds']:.0f} frames/s)  anonymous memory: {m['loaded']} MB loaded, peak "
          f"{m['anon']} MB (+{m['anon'] - m['loaded']} MB)  peak RSS {m['hwm']} MB")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        short = measure(silent_gradient(Path(tmp) / "60s.mp4", 60))
        long = measure(silent_gradient(Path(tmp) / "600s.mp4", 600))
    head = measure(kit(n_clips=1, duration_s=60.0, size=512).videos("gt")[0])
    show("60 s 64x64 faceless", short)
    show("600 s 64x64 faceless", long)
    show("60 s 512x512 talking head", head)
    grown = [m["anon"] - m["loaded"] for m in (short, long)]
    print(f"600 s / 60 s: time x{long['seconds'] / short['seconds']:.1f} (linear: x10), growth of anonymous "
          f"memory x{grown[1] / max(grown[0], 1):.1f} ({grown[0]} -> {grown[1]} MB; a series held in memory "
          f"would be x10)")


if __name__ == "__main__":
    main()
