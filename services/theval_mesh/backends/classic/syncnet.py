"""LSE-C / LSE-D and the AV offset with SyncNet, the way joonson/syncnet_python computes them.

The network is SyncNet's published architecture (syncnet_python SyncNetModel.py `S`: an audio
CNN on 13 MFCCs x 20 steps and a lip CNN on 5 frames of 224x224 BGR crops, each to 1024-d), built
here layer for layer under the same state-dict names, so `syncnet_v2.model` loads strictly: every
tensor of the file has a place of the same shape and every parameter and statistic is filled
(`num_batches_tracked`, which that file predates, excepted: inference never reads it).

Inputs as SyncNetInstance.evaluate feeds them: crops as float 0..255 in BGR order, no mean or
scale; the MFCCs of python_speech_features' defaults on the 16-bit PCM samples (not scaled to
[-1, 1]); windows of 5 frames / 20 MFCC steps, one per frame; the offset search and the two
numbers in pure/metrics/lse.py.
"""
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from theval_mesh.backends.classic.networks import weight_file
from theval_mesh.pure.errors import WeightsMissing
from theval_mesh.pure.metrics import lse

EMBEDDING = 1024
BATCH = 20  # run_syncnet.py --batch_size (BatchNorm in eval: the batch does not change values)

# (kind, in, out, kernel, stride, padding) then what follows it; "pool" rows: kernel, stride(, pad)
_AUDIO = [("conv", 1, 64, (3, 3), (1, 1), (1, 1)), ("pool", (1, 1), (1, 1)),
          ("conv", 64, 192, (3, 3), (1, 1), (1, 1)), ("pool", (3, 3), (1, 2)),
          ("conv", 192, 384, (3, 3), (1, 1), (1, 1)),
          ("conv", 384, 256, (3, 3), (1, 1), (1, 1)),
          ("conv", 256, 256, (3, 3), (1, 1), (1, 1)), ("pool", (3, 3), (2, 2)),
          ("conv", 256, 512, (5, 4), (1, 1), (0, 0))]
_LIPS = [("conv", 3, 96, (5, 7, 7), (1, 2, 2), 0), ("pool", (1, 3, 3), (1, 2, 2)),
         ("conv", 96, 256, (1, 5, 5), (1, 2, 2), (0, 1, 1)), ("pool", (1, 3, 3), (1, 2, 2), (0, 1, 1)),
         ("conv", 256, 256, (1, 3, 3), (1, 1, 1), (0, 1, 1)),
         ("conv", 256, 256, (1, 3, 3), (1, 1, 1), (0, 1, 1)),
         ("conv", 256, 256, (1, 3, 3), (1, 1, 1), (0, 1, 1)), ("pool", (1, 3, 3), (1, 2, 2)),
         ("conv", 256, 512, (1, 6, 6), (1, 1, 1), 0)]


def _cnn(rows, dims: int) -> nn.Sequential:
    """conv -> batch norm -> ReLU per conv row, the pools where the table puts them: the module
    indices are the state-dict names of SyncNetModel.S."""
    conv, norm, pool = (nn.Conv2d, nn.BatchNorm2d, nn.MaxPool2d) if dims == 2 else \
        (nn.Conv3d, nn.BatchNorm3d, nn.MaxPool3d)
    layers = []
    for row in rows:
        if row[0] == "conv":
            _, cin, cout, k, s, p = row
            layers += [conv(cin, cout, kernel_size=k, stride=s, padding=p), norm(cout), nn.ReLU()]
        else:
            layers.append(pool(row[1], stride=row[2], padding=row[3] if len(row) > 3 else 0))
    return nn.Sequential(*layers)


def _head() -> nn.Sequential:
    return nn.Sequential(nn.Linear(512, 512), nn.BatchNorm1d(512), nn.ReLU(), nn.Linear(512, EMBEDDING))


class SyncNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.netcnnaud, self.netfcaud = _cnn(_AUDIO, 2), _head()
        self.netfclip, self.netcnnlip = _head(), _cnn(_LIPS, 3)

    def audio(self, mfcc: torch.Tensor) -> torch.Tensor:  # (N, 1, 13, 20) -> (N, 1024)
        return self.netfcaud(self.netcnnaud(mfcc).flatten(1))

    def lips(self, crops: torch.Tensor) -> torch.Tensor:  # (N, 3, 5, 224, 224) -> (N, 1024)
        return self.netfclip(self.netcnnlip(crops).flatten(1))


def load_state(net: nn.Module, state: dict, path) -> nn.Module:
    """Strict: the file's tensors and the network's must be the same names and shapes
    (num_batches_tracked, absent from files older than torch 0.4.1, is not required)."""
    own = net.state_dict()
    needed = {k for k in own if not k.endswith("num_batches_tracked")}
    extra, missing = set(state) - set(own), needed - set(state)
    wrong = [k for k in set(state) & set(own) if tuple(state[k].shape) != tuple(own[k].shape)]
    if extra or missing or wrong:
        raise WeightsMissing(
            f"LSE-C/LSE-D skipped: {path} is not SyncNet's syncnet_v2.model (unknown tensors "
            f"{sorted(extra)[:3]}, missing {sorted(missing)[:3]}, other shapes {sorted(wrong)[:3]}); fetch it again")
    own.update({k: torch.as_tensor(v) for k, v in state.items()})
    net.load_state_dict(own)
    return net.eval()


def stand_in_state(seed: int) -> dict:
    """The stand-in syncnet_v2.model (backends/stand_in's rules), as the real file holds it:
    syncnet_v2.model predates BatchNorm's num_batches_tracked (torch 0.4.1), so it has none."""
    from theval_mesh.backends.stand_in.rules import seeded_state

    state = seeded_state(SyncNet(), seed, last_linear=("netfcaud.3", "netfclip.3"))
    # SyncNet reads raw 0..255 pixels and unscaled MFCCs: He-random first kernels would answer
    # the brightness and the loudness, the same in every window, and distances would differ by
    # 0.05 % between shifts. Zero-mean first kernels answer edges, motion and spectral shape,
    # as a trained front end does, so that the offset search has something to find.
    for first in ("netcnnlip.0.weight", "netcnnaud.0.weight"):
        w = state[first]
        state[first] = (w - w.mean(axis=tuple(range(1, w.ndim)), keepdims=True)).astype(np.float32)
    return {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}


def load(store=None) -> tuple[SyncNet, str]:
    """The network with syncnet_v2.model from the store, and the file's path (WeightsMissing with
    the reason when it is absent or not that network)."""
    path = weight_file("syncnet", store)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file: torch raises many kinds
        raise WeightsMissing(f"LSE-C/LSE-D skipped: cannot load {path} ({type(err).__name__}: {err})") from None
    return load_state(SyncNet(), state, path), str(path)


def mfcc(pcm16: np.ndarray) -> np.ndarray:
    """(13, steps) MFCCs of 16 kHz mono 16-bit samples (python_speech_features' defaults: 25 ms
    windows every 10 ms, 26 filters, 512-point FFT, pre-emphasis 0.97, lifter 22, energy as c0)."""
    import python_speech_features

    return python_speech_features.mfcc(np.asarray(pcm16, np.int16), lse.AUDIO_RATE).T


@dataclass(frozen=True)
class Features:
    video: np.ndarray  # (windows, 1024)
    audio: np.ndarray  # (windows, 1024)


def features(net: SyncNet, crops_bgr: np.ndarray, pcm16: np.ndarray) -> Features:
    """SyncNet's features of a face track: crops_bgr (T, 224, 224, 3) uint8 BGR at 25 fps and its
    audio (16 kHz mono int16), one window per frame up to `lse.windows`."""
    cc = mfcc(pcm16)
    n = lse.windows(len(crops_bgr), len(pcm16))
    video, audio = [], []
    clip = torch.from_numpy(np.ascontiguousarray(crops_bgr.transpose(3, 0, 1, 2))).float()  # (3, T, H, W)
    cct = torch.from_numpy(cc).float()
    with torch.inference_mode():
        for start in range(0, n, BATCH):
            idx = range(start, min(n, start + BATCH))
            video.append(net.lips(torch.stack([clip[:, i:i + lse.WINDOW] for i in idx])))
            audio.append(net.audio(torch.stack([
                cct[None, :, i * lse.MFCC_PER_FRAME:i * lse.MFCC_PER_FRAME + lse.MFCC_WINDOW] for i in idx])))
    if not video:
        return Features(np.zeros((0, EMBEDDING)), np.zeros((0, EMBEDDING)))
    return Features(torch.cat(video).numpy(), torch.cat(audio).numpy())


def evaluate(net: SyncNet, crops_bgr: np.ndarray, pcm16: np.ndarray, vshift: int = lse.VSHIFT) -> lse.Sync | None:
    """Offset, LSE-D and LSE-C of one face track; None when it has no 5-frame window."""
    f = features(net, crops_bgr, pcm16)
    if not len(f.video):
        return None
    return lse.sync(lse.shift_distances(f.video, f.audio, vshift), vshift)


@dataclass(frozen=True)
class VideoSync:
    """A video's SyncNet numbers: each face track's, averaged (mean over tracks, as LatentSync's and
    Wav2Lip's evaluation scripts average a video's crops); the offset of the longest track, or
    with LatentSync's pipeline its eval_sync_conf's int(fmean) of the tracks' offsets. MoChaBench
    keeps the best track's instead: the highest LSE-C, the lowest LSE-D, the offset of the
    track with that LSE-C."""
    offset: int
    lse_d: float
    lse_c: float
    tracks: int
    windows: int


def video_sync(net: SyncNet, path: str, limits, pipeline: str, s3fd=None) -> VideoSync:
    """LSE of one video; VideoError when it has no audio or no face track long enough. s3fd: an
    s3fd.S3FD finding the faces (None: BlazeFace)."""
    from statistics import fmean

    from theval_mesh.backends.classic import face_track
    from theval_mesh.pure.errors import VideoError

    tracks = face_track.face_tracks(path, limits, pipeline, s3fd)
    scored = [s for s in (evaluate(net, t.crops, t.pcm16) for t in tracks) if s is not None]
    if not scored:
        shortest = face_track.CONVERSIONS.get(pipeline, face_track.CONVERSIONS[face_track.SYNCNET_PYTHON]).min_track
        raise VideoError(path, f"no face track of more than {shortest} frames ({shortest / lse.FPS:.0f} s "
                               f"at 25 fps) with its audio: {pipeline} scores no shorter track")
    windows = sum(s.windows for s in scored)
    if pipeline == face_track.MOCHABENCH:  # SyncNetPipeline.inference: max(confs), min(dists)
        best = max(scored, key=lambda s: s.lse_c)
        return VideoSync(best.offset, min(s.lse_d for s in scored), best.lse_c, len(scored), windows)
    if pipeline == face_track.LATENTSYNC:  # eval_sync_conf.py: int(fmean(offsets)), fmean(confidences)
        offset = int(fmean(s.offset for s in scored))
    else:
        offset = max(scored, key=lambda s: s.windows).offset
    return VideoSync(offset, float(np.mean([s.lse_d for s in scored])),
                     float(np.mean([s.lse_c for s in scored])), len(scored), windows)


def provenance(store, pipeline: str, s3fd=None) -> str:
    """What LSE values were computed with: network file, pipeline, face detector."""
    from theval_mesh.backends.classic import face_track
    from theval_mesh.backends.classic.networks import describe

    faces = ("none: whole frames resized to 224x224, as Wav2Lip's calculate_scores_LRS.py"
             if pipeline == face_track.WAV2LIP_LRS else face_track.detector_name(s3fd))
    return f"SyncNet {describe('syncnet', store)}; pipeline {pipeline}; faces: {faces}"
