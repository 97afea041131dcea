"""A kit of synthetic talking heads with known ground truth: GT clips, degraded variants, the
driving signals of every clip, and a manifest.

Layout of `out_dir`:
  gt/clip_XX.mp4, <variant>/clip_XX.mp4     videos (H.264 + AAC)
  signals/clip_XX.npz                       GT driving signals
  signals/<variant>/clip_XX.npz             the same for each variant (what actually drove it)
  manifest.json                             written last: a kit without it is incomplete
"""
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from theval_mesh.synth import motion
from theval_mesh.synth.face_geometry import FRAME_FACE_WIDTHS, face_geometry
from theval_mesh.synth.face_warp import FaceRenderer
from theval_mesh.synth.mp4 import Mp4Writer
from theval_mesh.synth.speech import SAMPLE_RATE, delay_audio, synthesize_speech
from theval_mesh.synth.variants import (
    ALL_VARIANTS,
    AUDIO_DELAY_S,
    DESCRIPTIONS,
    GT,
    SAME_MOTION_AS_GT,
    ClipSignals,
    pixel_filter,
    variant_signals,
)

GENERATOR_VERSION = 1
MANIFEST = "manifest.json"
PHOTO = (f"skimage.data.astronaut(), framed {FRAME_FACE_WIDTHS} face widths wide around the "
         "FaceMesh face box")
SIGNAL_ALIASES = {"mouth": "mouth_open", "roll": "roll_deg", "brow": "brow_raise",
                  "speech": "speech_segments"}
SIGNAL_UNITS = {
    "mouth_open": "px, lip gap at the mouth centre (0 = closed)",
    "roll_deg": "degrees, positive = counter-clockwise on screen, about the face centre",
    "tx": "px, positive = right", "ty": "px, positive = down",
    "brow_raise": "px, positive = up",
    "speech_segments": "seconds in the clip's own audio track",
}
# independent random streams per clip, so changing one never shifts the others
STREAM_SPEECH, STREAM_HEAD, STREAM_BROW, STREAM_CHEW, STREAM_NOISE = range(5)


def _rng(seed: int, clip: int, stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, clip, stream]))


@dataclass(frozen=True)
class KitManifest:
    out_dir: Path
    clips: tuple           # ("clip_00", ...)
    variants: tuple        # degraded variants present (GT is always there, as "gt")
    languages: tuple       # one per clip
    seed: int
    fps: int
    size: int
    duration_s: float
    n_frames: int
    sample_rate: int

    def dir(self, variant: str = GT) -> Path:
        """Folder of one variant's clips ("gt" for the ground truth)."""
        return self.out_dir / variant

    def video(self, clip: str, variant: str = GT) -> Path:
        """Path of one clip. Clip and variant names never overlap, so video("gt", "clip_00")
        works too."""
        clip, variant = self._clip_variant(clip, variant)
        return self.out_dir / variant / f"{clip}.mp4"

    def videos(self, variant: str = GT) -> list:
        return [self.video(c, variant) for c in self.clips]

    def signals_path(self, clip: str, variant: str = GT) -> Path:
        clip, variant = self._clip_variant(clip, variant)
        sub = self.out_dir / "signals"
        return (sub if variant == GT else sub / variant) / f"{clip}.npz"

    def signals(self, clip: str, variant: str = GT) -> dict:
        """Driving signals as arrays: mouth_open, roll_deg, tx, ty, brow_raise (per frame) and
        speech_segments ((k, 2) seconds), plus the short aliases mouth, roll, brow, speech."""
        with np.load(self.signals_path(clip, variant)) as z:
            out = {k: (z[k].item() if z[k].ndim == 0 else z[k]) for k in z.files}
        out.update({alias: out[key] for alias, key in SIGNAL_ALIASES.items()})
        return out

    def _clip_variant(self, a: str, b: str):
        return (b, a) if a in (GT,) + ALL_VARIANTS else (a, b)

    @property
    def manifest_path(self) -> Path:
        return self.out_dir / MANIFEST

    @classmethod
    def load(cls, out_dir) -> "KitManifest":
        out_dir = Path(out_dir).resolve()
        m = json.loads((out_dir / MANIFEST).read_text())
        return cls(out_dir=out_dir, clips=tuple(c["name"] for c in m["clips"]),
                   variants=tuple(m["variants"]),
                   languages=tuple(c["language"] for c in m["clips"]),
                   seed=m["seed"], fps=m["fps"], size=m["size"], duration_s=m["duration_s"],
                   n_frames=m["n_frames"], sample_rate=m["sample_rate"])


def gt_signals(seed: int, index: int, language: str, duration_s: float, fps: int, size: int):
    """(ClipSignals, Speech) of GT clip number `index`."""
    speech = synthesize_speech(_rng(seed, index, STREAM_SPEECH), language, duration_s)
    n = int(round(duration_s * fps))
    face_w = face_geometry(size).face_width
    roll, tx, ty = motion.head_motion(_rng(seed, index, STREAM_HEAD), n, fps, size)
    sig = ClipSignals(
        mouth_open=motion.mouth_from_audio(speech.audio, SAMPLE_RATE, n, fps,
                                           motion.FACE_MOUTH_MAX * face_w),
        roll_deg=roll, tx=tx, ty=ty,
        brow_raise=motion.brow_raises(_rng(seed, index, STREAM_BROW), n, fps,
                                      motion.FACE_BROW_MAX * face_w),
        audio=speech.audio, speech_segments=tuple(speech.segments))
    return sig, speech


def _save_signals(path: Path, sig: ClipSignals, meta: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".part.npz")
    np.savez(tmp, mouth_open=sig.mouth_open, roll_deg=sig.roll_deg, tx=sig.tx, ty=sig.ty,
             brow_raise=sig.brow_raise,
             speech_segments=np.array(sig.speech_segments, float).reshape(-1, 2),
             **{k: np.asarray(v) for k, v in meta.items()})
    tmp.replace(path)


def _render_group(kit: KitManifest, index: int, names: tuple, gt: ClipSignals, meta: dict):
    """Render one clip's variants that share their motion (names[0]'s) and encode each of them
    (own audio track, own pixel filter) from the same rendered frames."""
    clip, geo = kit.clips[index], face_geometry(kit.size)
    sigs = {v: variant_signals(v, gt, _rng(kit.seed, index, STREAM_CHEW), kit.fps,
                               motion.FACE_MOUTH_MAX * geo.face_width) for v in names}
    _encode(geo, sigs[names[0]], kit.n_frames, [
        (kit.video(clip, v), kit.size, kit.fps, sigs[v].audio, kit.sample_rate,
         pixel_filter(v, kit.size, _rng(kit.seed, index, STREAM_NOISE))) for v in names])
    for v in names:
        _save_signals(kit.signals_path(clip, v), sigs[v], {**meta, "variant": v})


def _encode(geo, drive: ClipSignals, n_frames: int, outputs: list):
    """Render the frames `drive` moves once and encode each output from them: (path, size, fps,
    audio, sample rate, pixel filter or None); no output is left half written."""
    renderer = FaceRenderer(geo, max_open=float(drive.mouth_open.max()), max_brow=float(drive.brow_raise.max()))
    writers = []
    try:
        for path, size, fps, audio, rate, post in outputs:
            writers.append((Mp4Writer(path, size, fps, audio, rate), post))
        for t in range(n_frames):
            frame = renderer.render(drive.mouth_open[t], drive.brow_raise[t], drive.roll_deg[t],
                                    drive.tx[t], drive.ty[t])
            for writer, post in writers:
                writer.write(post(frame) if post else frame)
    except BaseException:
        for writer, _ in writers:
            writer.abort()
        raise
    for writer, _ in writers:
        writer.close()


def write_shifted_clips(out_dir, shifts_s, seed: int = 0, duration_s: float = 6.0, size: int = 256,
                        fps: int = 25, language: str = "en") -> dict:
    """One GT clip with its audio shifted by each of `shifts_s` (seconds; positive: the audio comes
    late), the same frames in every file: {shift: path}. For the audio-visual offset estimate."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    gt, _ = gt_signals(seed, 0, language, duration_s, fps, size)
    paths = {s: out_dir / f"shift_{round(s * 1000):+05d}ms.mp4" for s in shifts_s}
    _encode(face_geometry(size), gt, len(gt.mouth_open),
            [(paths[s], size, fps, delay_audio(gt.audio, s), SAMPLE_RATE, None) for s in shifts_s])
    return paths


def _groups(variants: tuple) -> list:
    """GT with the variants that reuse its pixels, then every other variant alone."""
    shared = tuple(v for v in variants if v in SAME_MOTION_AS_GT)
    return [(GT,) + shared] + [(v,) for v in variants if v not in shared]


def generate_kit(out_dir, seed: int = 0, n_clips: int = 3, duration_s: float = 6.0,
                 size: int = 256, fps: int = 25, variants=ALL_VARIANTS,
                 languages=("en", "fr", "de"), workers=None, reuse: bool = False) -> KitManifest:
    """Write a kit (see the module doc) and return its manifest. Deterministic for a seed.

    workers: parallel encoder threads (x264/cv2 release the GIL); the output does not depend on
    it. reuse: return an existing complete kit made with the same parameters instead.
    """
    out_dir = Path(out_dir).resolve()
    variants = tuple(variants)
    params = _params(seed, n_clips, duration_s, size, fps, variants, languages)
    if reuse:
        existing = load_kit(out_dir, seed, n_clips, duration_s, size, fps, variants, languages)
        if existing is not None:
            return existing

    clips = tuple(f"clip_{i:02d}" for i in range(n_clips))
    langs = tuple(languages[i % len(languages)] for i in range(n_clips))
    kit = KitManifest(out_dir=out_dir, clips=clips, variants=variants, languages=langs,
                      seed=int(seed), fps=int(fps), size=int(size), duration_s=float(duration_s),
                      n_frames=int(round(duration_s * fps)), sample_rate=SAMPLE_RATE)
    (out_dir / MANIFEST).unlink(missing_ok=True)
    face_geometry(size)  # one FaceMesh run, before the threads start

    jobs, clip_entries = [], []
    for i, clip in enumerate(clips):
        gt, speech = gt_signals(kit.seed, i, langs[i], kit.duration_s, kit.fps, kit.size)
        meta = {"fps": kit.fps, "size": kit.size, "language": langs[i], "seed": kit.seed,
                "sample_rate": SAMPLE_RATE, "n_frames": kit.n_frames,
                "texts": np.array(speech.texts)}
        jobs += [(i, names, gt, meta) for names in _groups(variants)]
        clip_entries.append({
            "name": clip, "language": langs[i], "texts": speech.texts,
            "speech_segments": [[round(s, 6), round(e, 6)] for s, e in speech.segments],
            "videos": {v: str(kit.video(clip, v).relative_to(out_dir)) for v in (GT,) + variants},
            "signals": {v: str(kit.signals_path(clip, v).relative_to(out_dir))
                        for v in (GT,) + variants}})

    workers = workers or min(2, os.cpu_count() or 1)
    jobs.sort(key=lambda job: -len(job[1]))  # biggest first: the threads finish together
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for f in [pool.submit(_render_group, kit, *job) for job in jobs]:
            f.result()

    manifest = {**params, "n_frames": kit.n_frames, "sample_rate": SAMPLE_RATE,
                "audio_delay_s": AUDIO_DELAY_S, "photo": PHOTO,
                "variant_descriptions": {v: DESCRIPTIONS[v] for v in (GT,) + variants},
                "signal_units": SIGNAL_UNITS, "clips": clip_entries}
    tmp = out_dir / (MANIFEST + ".part")
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    tmp.replace(out_dir / MANIFEST)
    return kit


def load_kit(out_dir, seed: int = 0, n_clips: int = 3, duration_s: float = 6.0, size: int = 256,
             fps: int = 25, variants=ALL_VARIANTS, languages=("en", "fr", "de")):
    """The complete kit in out_dir if it was made with these parameters (and this generator
    version), else None."""
    out_dir = Path(out_dir).resolve()
    params = _params(seed, n_clips, duration_s, size, fps, tuple(variants), languages)
    try:
        m = json.loads((out_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if any(m.get(k) != v for k, v in params.items()):
        return None
    complete = all((out_dir / p).is_file() for c in m["clips"] for group in ("videos", "signals")
                   for p in c[group].values())
    return KitManifest.load(out_dir) if complete else None


def _params(seed, n_clips, duration_s, size, fps, variants, languages) -> dict:
    unknown = set(variants) - set(ALL_VARIANTS)
    if unknown:
        raise ValueError(f"unknown variants {sorted(unknown)}; known: {', '.join(ALL_VARIANTS)}")
    if n_clips < 1 or size < 64 or fps < 1 or not languages:
        raise ValueError("need n_clips >= 1, size >= 64, fps >= 1 and at least one language")
    return {"generator_version": GENERATOR_VERSION, "seed": int(seed), "n_clips": int(n_clips),
            "duration_s": float(duration_s), "size": int(size), "fps": int(fps),
            "variants": list(variants), "languages": list(languages)}
