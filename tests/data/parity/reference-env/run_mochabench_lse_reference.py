"""LSE-C / LSE-D / AV offset by congwei1230/MoChaBench's OWN SyncNet pipeline (043908d), on stand-in
weights.

Runs, unmodified, eval-lipsync/script/syncnet_pipeline.py's `SyncNetPipeline.inference` from a copy
of a MoChaBench checkout: ffmpeg (through ffmpeg-python) re-encodes the video to a 25 fps AVI and
writes its frames as JPEG; the speech is resampled to 16 kHz from `audio_path`, which the runner
sets to the video itself (the benchmark passes its own speech file; a generated video carries its
speech); its S3FD copy at conf 0.9 and scale 0.25; PySceneDetect; `_track` with min_track=50;
`_crop` to an XVID AVI with the cut speech; its SyncNetInstance.evaluate on each crop. inference
returns every track's offset, confidence and distance, and the video's best confidence (max) and
distance (min): the values its batch scripts average per category.

Environment only, nothing that computes: the stand-in `syncnet_v2.model` and `sfd_face.pth` (seed 0)
passed as its `s3fd_weights` / `syncnet_weights`, device "cpu". Its imports need, beside the
project's venv, scenedetect 0.5.6.1 and ffmpeg-python in a folder of their own:

    .venv/bin/python -m pip install --no-deps --target EXTRA scenedetect==0.5.6.1 click ffmpeg-python future
    theval weights stand-in --model syncnet --model s3fd --seed 0 --store STORE
    .venv/bin/python tests/data/parity/reference-env/run_mochabench_lse_reference.py \
        --mochabench MOCHABENCH_CHECKOUT --extra EXTRA --weights STORE \
        --clips tests/data/parity/clips/{astronaut_de_gt,tom_it_desync}.mp4 --out tests/data/parity/classic
"""
import argparse
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import oracle_files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mochabench", type=Path, required=True, help="a checkout of congwei1230/MoChaBench")
    ap.add_argument("--commit", default="043908d")
    ap.add_argument("--extra", type=Path, required=True, help="the folder with scenedetect and ffmpeg-python")
    ap.add_argument("--weights", type=Path, required=True, help="a store with syncnet_v2.model and sfd_face.pth")
    ap.add_argument("--clips", type=Path, nargs="+", required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mochabench-oracle-"))
    script = work / "script"
    shutil.copytree(args.mochabench / "eval-lipsync" / "script", script)
    sys.path[:0] = [str(script), str(args.extra.resolve())]

    import torch
    from syncnet_pipeline import SyncNetPipeline

    torch.set_num_threads(2)
    pipe = SyncNetPipeline({"s3fd_weights": str(args.weights / "sfd_face.pth"),
                            "syncnet_weights": str(args.weights / "syncnet_v2.model")}, device="cpu")
    rows = []
    for clip in args.clips:
        offsets, confs, dists, best_conf, min_dist, _, has_face = pipe.inference(
            video_path=str(clip), audio_path=str(clip), cache_dir=str(work / "cache" / clip.stem))
        best = confs.index(best_conf)
        rows.append({"clip": clip.name, "offset": offsets[best], "lse_c": repr(best_conf), "lse_d": repr(min_dist),
                     "tracks": len(offsets), "track_offsets": " ".join(map(str, offsets)),
                     "track_lse_c": " ".join(map(repr, confs)), "track_lse_d": " ".join(map(repr, dists))})
        print(rows[-1], flush=True)
    oracle_files.write(args.out, "mochabench_lse_oracle", rows, [
        f"congwei1230/MoChaBench {args.commit}: eval-lipsync/script/syncnet_pipeline.py SyncNetPipeline.inference"
        f"(video_path=CLIP, audio_path=CLIP), unmodified, device cpu; offset: the track with the best confidence",
        f"torch {torch.__version__}, scenedetect {version('scenedetect')}, ffmpeg-python {version('ffmpeg-python')}, "
        f"python_speech_features {version('python_speech_features')}, ffmpeg on PATH",
        *oracle_files.weights_sha256(args.weights)])
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
