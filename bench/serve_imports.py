"""Start-up cost of each mesh service process: import time and RSS after importing what
`theval serve SERVICE` imports, against a bare interpreter measured in the same run, and the heavy
libraries each loads. The deployment images install one service each (pyproject extras)."""
import statistics

import common  # noqa: F401 - first: puts the repository's root on sys.path (tests.support)

from tests.support.service_imports import measure
from theval_mesh.pure.services import SERVICES

HEAVY = ("torch", "ray", "pyiqa", "mediapipe", "cv2", "matplotlib", "tritonclient", "onnxruntime")
REPEATS = 3


def median(service):
    runs = [measure(service) for _ in range(REPEATS)]
    return (statistics.median(r["seconds"] for r in runs), statistics.median(r["rss_mb"] for r in runs),
            runs[0]["modules"])


def main():
    _, base_rss, _ = median(None)
    print(f"bare interpreter: {base_rss:.0f} MB RSS (median of {REPEATS})")
    print(f"{'service':<10} {'import s':>8} {'RSS MB':>7} {'x bare':>7}  heavy libraries loaded")
    for s in SERVICES:
        seconds, rss, modules = median(s)
        heavy = ", ".join(m for m in HEAVY if m in modules) or "-"
        print(f"{s:<10} {seconds:>8.2f} {rss:>7.0f} {rss / base_rss:>7.1f}  {heavy}")


if __name__ == "__main__":
    main()
