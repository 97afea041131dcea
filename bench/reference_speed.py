"""The whole default run against the reference's own scripts, per video frame, on the same clips in
one run: `theval evaluate --profile reference --quality paper --inline` (8 metrics, the real quality
networks) vs Newbyl/THEval 3603338's scripts run unmodified in their pinned environments, each as
the README runs it (one process per script over the list of clips).

Both sides use the deterministic STAND-IN weights (`theval weights stand-in`): a network's speed
does not depend on its weights' values. The clips are parity clips cut losslessly to their first
FRAMES frames (with their audio). Wall times include each side's start-up (loading models), as a
user waits for them; the per-frame compute of each side is printed too.

Needs the reference environments (tests/data/parity/reference-env): ORACLE_VENV (setup.sh, the
landmark/VAD scripts) and ORACLE_MODELS_VENV (setup_models.sh, the model-based ones), and a
snapshot of Newbyl/THEval (THEVAL_OFFICIAL_REPO); head motion runs on the reference side only
when the store holds its head-pose stand-ins and FACEXFORMER_REPO is set.

    THEVAL_OFFICIAL_REPO=... ORACLE_VENV=... ORACLE_MODELS_VENV=... \\
        .venv/bin/python bench/reference_speed.py [CLIPS] [FRAMES]      # default 4 clips x 48 frames
"""
import atexit
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT  # first: puts the repository's root on sys.path (tests.support)

from tests.support.model_parity_set import cut
from tests.support.parity_set import oracle
from theval_mesh.backends import stand_in

ENV = ROOT / "tests" / "data" / "parity" / "reference-env"
LANDMARK_SCRIPTS = ("Naturalness/lip_dynamics.py", "Naturalness/eyebrow_dynamics.py",
                    "Synchronization/silent_lip_stability.py", "Synchronization/lip_sync.py")
MODEL_METRICS = ("global_aesthetic", "mouth_quality", "face_quality")


def need(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        sys.exit(f"set {var} (see this file's docstring)")
    return value


def export_scripts(repo: str, dest: Path) -> Path:
    """The reference's tree at its release commit, unmodified."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", f"--git-dir={repo}" if not (Path(repo) / ".git").exists()
                              else f"--git-dir={Path(repo) / '.git'}", "archive", "3603338"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def timed(cmd, **kwargs) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    return time.perf_counter() - t


NETWORKS = (("global aesthetic (topiq_iaa)", "QualityBackend", "global_aesthetic"),
            ("mouth quality (musiq)", "QualityBackend", "mouth_quality"),
            ("face quality (topiq_nr-face)", "QualityBackend", "face_quality"),
            ("head pose: retina-face detector", "RetinaFaceDetector", "outputs"),
            ("head pose: FaceXFormer", "FaceXFormerHeadPose", "angles"))


def networks_alone(store: Path, paths: list[Path], runtime: str = "auto") -> dict[str, float]:
    """Seconds each network takes ALONE on the inputs an in-process run gives it: one run through
    the API records every call's arguments, then each call is replayed by itself, one network at a
    time on all the cores. Their sum is what the run would cost if decoding, FaceMesh and the
    threads cost nothing: the floor of any schedule of these networks with these kernels."""
    from theval_mesh.api.scorer import Scorer
    from theval_mesh.backends.headpose.facexformer import FaceXFormerHeadPose
    from theval_mesh.backends.headpose.retinaface_net import RetinaFaceDetector
    from theval_mesh.backends.quality.backend import QualityBackend
    from theval_mesh.pure.settings import RunSettings

    classes = {c.__name__: c for c in (QualityBackend, RetinaFaceDetector, FaceXFormerHeadPose)}
    calls, originals = [], {}
    for _, cls, method in NETWORKS:
        original = originals[(cls, method)] = getattr(classes[cls], method)

        def recorded(obj, *args, _key=(cls, method), _f=original, **kwargs):
            calls.append((_key, obj, args, kwargs))
            return _f(obj, *args, **kwargs)
        setattr(classes[cls], method, recorded)
    try:
        scorer = Scorer(RunSettings(quality="paper", headpose="facexformer"), weights_store=str(store),
                        runtime=runtime)
        for path in paths:
            scorer.score(path)
    finally:
        for (cls, method), original in originals.items():
            setattr(classes[cls], method, original)
    seconds = dict.fromkeys((key for key, _, _, _ in calls), 0.0)
    for key, obj, args, kwargs in calls:
        start = time.perf_counter()
        originals[key](obj, *args, **kwargs)
        seconds[key] += time.perf_counter() - start
    return {label: seconds.get((cls, method), 0.0) for label, cls, method in NETWORKS}


def main():
    n_clips = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    frames = int(sys.argv[2]) if len(sys.argv) > 2 else 48
    repo, venv, models_venv = need("THEVAL_OFFICIAL_REPO"), need("ORACLE_VENV"), need("ORACLE_MODELS_VENV")
    names = sorted(oracle())[:: max(1, len(oracle()) // n_clips)][:n_clips]
    tmp = Path(tempfile.mkdtemp(prefix="theval-bench-reference-speed-"))  # ~5 GB: removed at exit
    atexit.register(shutil.rmtree, tmp, True)
    store = tmp / "stand-in-weights-seed0"
    stand_in.write(store, 0, reference_extras=True, headpose=True)
    clips = tmp / "clips"
    clips.mkdir()
    paths = [cut(name, frames, clips / f"{name}.mp4") for name in names]
    (tmp / "list.txt").write_text("".join(f"{p}\n" for p in paths))
    total = len(paths) * frames
    print(f"{len(paths)} clips x {frames} frames = {total} frames; stand-in weights seed 0")

    def evaluate(runtime: str) -> float:
        """One run start to exit; the networks' exports are made before, as a user's first run
        makes them once (and every later run finds them in the cache)."""
        return timed([str(Path(sys.executable).parent / "theval"), "evaluate", "--gt", str(clips),
                      "--out", str(tmp / f"ours-{runtime}"), "--inline", "--quiet", "--quality", "paper",
                      "--no-cache", "--weights-store", str(store), "--runtime", runtime])

    first = timed([str(Path(sys.executable).parent / "theval"), "evaluate", "--gt", paths[0], "--out",
                   str(tmp / "export-run"), "--inline", "--quiet", "--quality", "paper", "--no-cache",
                   "--weights-store", str(store)])
    print(f"first run on one clip, exporting the networks once: {first:.1f} s", flush=True)
    yardstick = evaluate("torch")
    print(f"theval evaluate --runtime torch (8 metrics):  {yardstick:7.1f} s  {yardstick / total:6.3f} s/frame",
          flush=True)
    ours = evaluate("auto")
    print(f"theval evaluate (default runtime, 8 metrics):  {ours:7.1f} s  {ours / total:6.3f} s/frame", flush=True)

    alone = networks_alone(store, paths)
    for label, seconds in alone.items():
        print(f"  ours alone: {label:<34} {seconds / total:6.3f} s/frame")
    floor = sum(alone.values())
    print(f"  ours alone, the networks' sum (the floor):  {floor / total:6.3f} s/frame", flush=True)

    tree = export_scripts(repo, tmp / "reference")
    reference = {}
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    for script in LANDMARK_SCRIPTS:
        reference[script] = timed([f"{venv}/bin/python", Path(script).name, "--video_txt",
                                   str(tmp / "list.txt"), "--output_txt",
                                   str(tmp / f"{Path(script).stem}.csv")],
                                  cwd=tree / Path(script).parent, env=env)
    metrics = list(MODEL_METRICS)
    if (store / "model.pt").exists() and os.environ.get("FACEXFORMER_REPO"):
        metrics.append("head_motion_dynamics")
    subprocess.run([f"{models_venv}/bin/python", str(ENV / "run_model_scripts.py"),
                    "--official-repo", repo, "--weights", str(store), "--only", ",".join(names),
                    "--frames", str(frames), "--metrics", ",".join(metrics), "--out", str(tmp / "models"),
                    *(["--facexformer-repo", os.environ["FACEXFORMER_REPO"]]
                      if "head_motion_dynamics" in metrics else [])],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(tmp / "models" / "model_oracle_timing.csv") as f:
        for row in csv.DictReader(f):
            reference[row["metric"]] = float(row["wall_s"])

    width = max(map(len, reference))
    for name, seconds in reference.items():
        print(f"  reference {name:<{width}}  {seconds:7.1f} s  {seconds / total:6.3f} s/frame")
    ref_total = sum(reference.values())
    print(f"reference, {len(reference)} scripts: {ref_total:7.1f} s  {ref_total / total:6.3f} s/frame")
    print(f"the reference's 8 scripts over our networks' floor: {ref_total / floor:.2f}x (what a run of "
          "these networks with these kernels could reach if everything else were free)")
    print(f"speed-up, --runtime torch: {ref_total / yardstick:.2f}x")
    print(f"speed-up: {ref_total / ours:.2f}x"
          + ("" if "head_motion_dynamics" in reference else
             "  (the reference side without head motion, which costs it about 1.7 s/frame; ours "
             "includes the rigid-fit head pose)"))


if __name__ == "__main__":
    main()
