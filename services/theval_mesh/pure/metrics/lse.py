"""LSE-C / LSE-D and the SyncNet AV offset from SyncNet features, as syncnet_python computes them
(joonson/syncnet_python, SyncNetInstance.py `calc_pdist` and `evaluate`; the values Wav2Lip's
evaluation calls LSE-D = the minimum of the mean distances, LSE-C = their median minus it).

Pure: features in, numbers out. `backends/classic/syncnet.py` runs the network that makes them.

The windows: video feature i covers frames i..i+4 (5 frames at 25 fps), audio feature i covers
MFCC steps 4i..4i+19 (the same 0.2 s at 100 MFCC steps/s). For each video window i and each shift
s in -vshift..+vshift, the Euclidean distance to audio window i+s (zero-padded past either end, as
`torch.nn.functional.pad` does); mean over i per shift; the minimum is the best alignment.
"""
from dataclasses import dataclass

import numpy as np

VSHIFT = 15          # run_syncnet.py --vshift default: +-15 frames (+-0.6 s at 25 fps)
FPS = 25             # the pipeline resamples every video to 25 fps (run_pipeline.py -r 25)
AUDIO_RATE = 16000   # and the audio to 16 kHz mono 16-bit (ffmpeg -ac 1 -ar 16000)
WINDOW = 5           # video frames per SyncNet window
MFCC_PER_FRAME = 4   # 100 MFCC steps/s / 25 fps
MFCC_WINDOW = 20     # MFCC steps per window (0.2 s)
PAIRWISE_EPS = 1e-6  # torch.nn.functional.pairwise_distance adds eps to the difference
# How the face tracks' crops and audio are made (backends/classic/face_track.py): syncnet_python's
# ffmpeg and OpenCV conversions (the published numbers'), the decoded pixels as they are,
# Wav2Lip's calculate_scores_LRS.py (every frame of the video, whole, resized to 224x224), or
# LatentSync's eval_sync_conf.py (syncnet_python's steps in MP4 with AAC audio, tracks from 51 frames),
# or MoChaBench's SyncNetPipeline (the speech straight from the input, the best track's values).
SYNCNET_PYTHON, IN_PROCESS, WAV2LIP_LRS, LATENTSYNC, MOCHABENCH = PIPELINES = (
    "syncnet_python", "in-process", "wav2lip-lrs", "latentsync", "mochabench")


@dataclass(frozen=True)
class Sync:
    offset: int        # frames; positive: vshift - argmin, as syncnet_python prints "AV offset"
    lse_d: float       # minimum over shifts of the mean distance (lower is better)
    lse_c: float       # median over shifts minus that minimum (higher is better)
    windows: int       # 5-frame windows behind it


def windows(frames: int, audio_samples: int) -> int:
    """The 5-frame windows evaluated: min(frames, floor(samples / 640)) - 5, as evaluate's
    `lastframe` (640 samples = one 25 fps frame at 16 kHz)."""
    return max(0, min(frames, audio_samples // (AUDIO_RATE // FPS)) - WINDOW)


def shift_distances(video: np.ndarray, audio: np.ndarray, vshift: int = VSHIFT) -> np.ndarray:
    """(windows, 2*vshift+1): distance of video window i to audio window i+s-vshift, the audio
    features zero-padded by vshift on both ends (calc_pdist)."""
    video, audio = np.asarray(video, np.float64), np.asarray(audio, np.float64)
    n, dim = video.shape
    padded = np.concatenate([np.zeros((vshift, dim)), audio, np.zeros((vshift, dim))])
    span = 2 * vshift + 1
    out = np.empty((n, span))
    for i in range(n):
        out[i] = np.linalg.norm(video[i] - padded[i:i + span] + PAIRWISE_EPS, axis=1)
    return out


def sync(distances: np.ndarray, vshift: int = VSHIFT) -> Sync:
    """Offset, LSE-D and LSE-C from shift_distances' matrix. torch.median of an even count takes the
    lower of the two middle values (not their mean), as syncnet_python's `torch.median(mdist)`."""
    mean = distances.mean(axis=0)
    best = int(np.argmin(mean))
    lower_median = float(np.sort(mean)[(len(mean) - 1) // 2])
    return Sync(vshift - best, float(mean[best]), lower_median - float(mean[best]), len(distances))
