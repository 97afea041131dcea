"""Single shared FaceMesh pass vs the reference code's own passes (--exact-reference).

Per landmark metric, the relative difference |single - exact| / |exact| per clip, on the
synthetic kit at 512x512 (so the reference's 256x256 resize is exercised), GT clips and
the variants that exercise each metric. Quality models are left out (proxy, same crops but
for the mouth boxes, which come from the static non-refined pass in the exact mode).
"""
import sys

import numpy as np

from common import kit
from theval_mesh.orchestrator.engine import Engine
from theval_mesh.orchestrator.settings import RunSettings

METRICS = ("mouth_quality", "lip_dynamics", "eyebrow_dynamics", "silent_lip_stability", "lip_sync")


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    k = kit(n_clips=3, duration_s=6.0, size=size, variants=("silent_mouth", "audio_shift"))
    single = Engine(RunSettings(quality="proxy"))
    exact = Engine(RunSettings(quality="proxy", exact_reference=True))
    diffs = {m: [] for m in METRICS}
    for variant in ("gt",) + tuple(k.variants):
        for path in k.videos(variant):
            a, b = single.score_video(path), exact.score_video(path)
            for m in METRICS:
                x, y = a.metrics[m], b.metrics[m]
                if not (np.isnan(x) or np.isnan(y)):
                    diffs[m].append(abs(x - y) / abs(y))
    print(f"single pass vs reference passes, {size}x{size} kit, {len(diffs[METRICS[0]])} clips")
    print(f"{'metric':24s} {'mean rel. diff':>15s} {'max':>8s}")
    for m in METRICS:
        d = np.array(diffs[m])
        print(f"{m:24s} {d.mean():15.2%} {d.max():8.2%}")


if __name__ == "__main__":
    main()
