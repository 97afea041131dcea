"""What one call takes of each mesh server's memory, measured against what it reserves
(rpc.memory_budget), and whether memory stays flat across rounds of concurrent calls.

A real mesh (`theval serve` processes on loopback, proxy quality, rigid-fit head pose) scores, one
at a time: the 600 s 64x64 silent clip, a 10 s 512 px talking head, 4 s at 1920x1080 and 1 s at
4096x2160 with 48 kHz stereo audio. Each server's peak resident memory (VmHWM, reset before each
clip) less its resident memory before, next to what its call reserved. Then `--rounds` rounds of 8
concurrent 10 s 512 px talking heads: each server's peak, and its resident memory after each round.

    .venv/bin/python bench/leaf_memory.py [--rounds 4]
"""
import argparse
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from common import kit

from tests.support.mesh_support import Mesh, peak_rss_mib, reset_peak_rss, rss_mib, sample, scrape
from tests.support.video_files import gradient, silent_gradient, write_video
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import memory_budget as mb

SETTINGS = RunSettings(quality="proxy")


def reserved_mib(path) -> dict:
    """What each server reserves for this video (the silent-lip pass at its largest: every frame)."""
    info = MediaReader(str(path)).info
    frames = mb.used_frames(info, SETTINGS)
    return {"landmarks": mb.track_bytes(info, SETTINGS, frames) / mb.MIB,
            "quality": mb.score_bytes(info, SETTINGS, 2) / mb.MIB,
            "headpose": mb.estimate_bytes(frames) / mb.MIB,
            "audio": mb.analyse_bytes(info, SETTINGS) / mb.MIB,
            "evaluator": mb.video_bytes(info, SETTINGS) / mb.MIB}


def stereo(seconds: float, rate: int = 48_000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return np.stack([0.3 * np.sin(2 * np.pi * 440 * t), 0.3 * np.sin(2 * np.pi * 660 * t)]).astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root = tmp / "videos"
        root.mkdir()
        heads = kit(n_clips=8, duration_s=10.0, size=512).videos("gt")
        clips = {"600 s 64x64 silent": silent_gradient(root / "600s.mp4", 600),
                 "10 s 512 px talking head": heads[0],
                 "4 s 1920x1080": write_video(root / "hd.mp4", gradient(100, 1920, 1080)),
                 "1 s 4096x2160, 48 kHz stereo": write_video(root / "4k.mp4", gradient(25, 4096, 2160),
                                                            audio=stereo(1.0), audio_rate=48_000)}
        mesh = Mesh(tmp, [root, heads[0].parent]).start()
        try:
            pids = {name: p.proc.pid for name, p in mesh.procs.items()}
            names = list(pids)
            print(f"{'clip':<30} " + " ".join(f"{n:>21}" for n in names) + "   (MiB: peak growth / reserved)")
            for label, clip in clips.items():
                before = {n: rss_mib(p) for n, p in pids.items()}
                for p in pids.values():
                    reset_peak_rss(p)
                mesh.evaluate(uri=clip, timeout=3600)
                grown = {n: peak_rss_mib(p) - before[n] for n, p in pids.items()}
                want = reserved_mib(clip)
                print(f"{label:<30} " + " ".join(f"{grown[n]:>10.0f} / {want[n]:>8.0f}" for n in names), flush=True)
            budgets = {n: sample(scrape(mesh.procs[n].metrics_url), "theval_memory_budget_bytes") / mb.MIB
                       for n in names}
            print("budgets (MiB):", {n: round(b) for n, b in budgets.items()})
            first = None
            for r in range(args.rounds):
                for p in pids.values():
                    reset_peak_rss(p)
                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(lambda v: mesh.evaluate(uri=v, timeout=3600), heads))
                after = {n: rss_mib(p) for n, p in pids.items()}
                first = first or after
                print(f"round {r + 1}: peak " + ", ".join(f"{n} {peak_rss_mib(p):.0f}" for n, p in pids.items())
                      + " | after " + ", ".join(f"{n} {after[n]:.0f} ({after[n] / first[n] - 1:+.0%})" for n in names),
                      flush=True)
        finally:
            mesh.stop()


if __name__ == "__main__":
    main()
