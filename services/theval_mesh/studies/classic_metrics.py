"""`theval classic`: the paper's Table 2 classic metrics of generated videos against their GT videos.

Generated and GT videos are paired by file name. Per pair: LMD-F / LMD-M (FaceMesh, one tracking
pass per video as the project's single pass) and PSNR / SSIM, frames paired by index up to the
shorter video; AKD (face-alignment's landmarks, backends/classic/fan.py) and AED (OpenFace
identity embeddings, backends/classic/openface.py) when their weights are in the store. LSE-C/LSE-D and the AV offset per generated video with SyncNet
(backends/classic/syncnet.py: syncnet_python's face tracks, crops and offset search) when its
weights are in the store. FID and FVD need network weights (backends/classic): NaN, with the
reason shown once. The math is in pure/metrics/classic.py and pure/metrics/lse.py.
"""
import json
import math
from contextlib import ExitStack, closing
from dataclasses import asdict, dataclass, field
from pathlib import Path

import cv2
import numpy as np
from tqdm import tqdm

from theval_mesh.backends.classic.networks import skip_reason
from theval_mesh.backends.landmarks.backend import FaceTracker
from theval_mesh.backends.landmarks.passes import SINGLE
from theval_mesh.backends.landmarks.series import LandmarkSeries
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.inputs import VIDEO_SUFFIXES, discover, videos_in
from theval_mesh.core.results import json_safe
from theval_mesh.outputs.results_files import SCHEMA_ID
from theval_mesh.outputs.whole_files import write_text
from theval_mesh.pure import csv_cells
from theval_mesh.pure.errors import UsageRefused, UserError, VideoError, WeightsMissing
from theval_mesh.pure.limits import Limits
from theval_mesh.pure.metrics import aed, akd, identity, lse
from theval_mesh.pure.metrics import classic as lm
from theval_mesh.pure.scoring import uncertainty
from theval_mesh.pure.scoring.tables import CI_HIGH, CI_LOW, COUNT_PREFIX

OK, FAILED = "ok", "failed"
# Network -> the summary columns it would fill (FID's and FVD's network is their variant's: set_variants).
NETWORK_COLUMNS = {"syncnet": (lm.LSE_C, lm.LSE_D), "fid-inception": (lm.FID,), "fvd-i3d": (lm.FVD,),
                   "arcface": (lm.CSIM,), "fan-2d": (lm.AKD,), "openface": (lm.AED,)}


def _networks(chosen: dict) -> list[str]:
    """The networks a run uses: FID's and FVD's are their chosen variants' ({column: variant name})."""
    return [set_variants(columns[0])[chosen[columns[0]]].network if columns[0] in chosen else name
            for name, columns in NETWORK_COLUMNS.items()]
# classic.csv column -> summary column, for the per-video metrics
PER_VIDEO = {"lmd_f": lm.LMD_F, "lmd_m": lm.LMD_M, "psnr": lm.PSNR, "ssim": lm.SSIM,
             "lse_c": lm.LSE_C, "lse_d": lm.LSE_D, "csim": lm.CSIM, "csim_drift": lm.CSIM_DRIFT, "akd": lm.AKD,
             "aed": lm.AED}


@dataclass
class ClassicRow:
    """One generated video: a line of classic.csv."""
    model: str
    video: str
    gt_video: str = ""
    status: str = OK
    reason: str = ""
    lmd_f: float = math.nan
    lmd_m: float = math.nan
    psnr: float = math.nan
    ssim: float = math.nan
    lse_c: float = math.nan
    lse_d: float = math.nan
    csim: float = math.nan       # identity: mean cosine of ArcFace embeddings to the source face
    csim_drift: float = math.nan  # CSIM of the first 5 s minus that of the last 5 s span (identity.drift)
    akd: float = math.nan        # face-alignment's 68 points against the GT's (pure/metrics/akd.py)
    akd_frames: int = 0          # frames behind AKD: both faces found (the model's AKD weighs them)
    aed: float = math.nan        # FOMM's identity AED: OpenFace embeddings against the GT's (pure/metrics/aed.py)
    aed_frames: int = 0          # frames behind AED (the model's AED weighs them)
    av_offset: float = math.nan  # SyncNet's, in 25 fps frames (syncnet_python's sign)
    lse_tracks: int = 0          # face tracks behind LSE (their mean)
    lse_reason: str = ""         # why LSE is empty for this video when the others are not
    frames_paired: int = 0
    frames_skipped: int = 0


CSV_COLUMNS = tuple(ClassicRow.__dataclass_fields__)


@dataclass
class ClassicRun:
    rows: list[ClassicRow]
    summary: list[dict]                              # one per model, pure.metrics.classic.summary_row
    skipped: list[str] = field(default_factory=list)  # why the network columns are NaN, once each
    provenance: dict = field(default_factory=dict)   # column(s) -> what computed them
    # (model, FID|FVD) -> (generated, GT) frames|clips, (generated, GT) videos, resamples of its interval
    samples: dict = field(default_factory=dict)
    # --all-variants: (model, column, variant) -> the model's value as that implementation computes it
    variants: dict = field(default_factory=dict)

    @property
    def failed(self) -> list[ClassicRow]:
        return [r for r in self.rows if r.status == FAILED]

    def to_latex(self, decimals: int = 3) -> str:
        """The booktabs table classic.tex holds: a paper's column order, mean +- half-width."""
        return lm.summary_latex(self.summary, notes(self), decimals)


# ---------------------------------------------------------------- pairing
def generated_models(paths: list[str], names: list[str] | None = None) -> list[tuple[str, str]]:
    """(model, path) per --generated path: the model is the folder's name (a file's folder), unless
    --model gives one name for all of them or one per path."""
    names = names or []
    if len(names) not in (0, 1, len(paths)):
        raise UsageRefused(f"--model given {len(names)} times for {len(paths)} --generated paths: give one "
                        "name for all of them or one per path, in the same order")
    out = []
    for i, path in enumerate(paths):
        p = Path(path)
        is_file = p.is_file() or p.suffix.lower() in VIDEO_SUFFIXES + (".txt",)
        default = (p.parent if is_file else p).resolve().name
        out.append((names[i] if len(names) == len(paths) else names[0] if names else default, path))
    return out


def gt_videos(gt_dir) -> dict[str, Path]:
    """GT videos by stem (the first one in sorted order when two share a stem)."""
    folder = Path(gt_dir)
    if not folder.is_dir():
        raise UserError(f"--gt {gt_dir}: not a folder; classic metrics pair each generated video with the GT "
                        "video of the same file name in that folder")
    found = {}
    for v in videos_in(folder):
        found.setdefault(v.stem, v)
    if not found:
        raise UserError(f"--gt {gt_dir}: no video files ({', '.join(VIDEO_SUFFIXES)}) in the folder")
    return found


def pair_by_name(models: list[tuple[str, str]], gt_dir) -> list[ClassicRow]:
    """A row per generated video, with its GT video, or failed with the reason it has none."""
    gts = gt_videos(gt_dir)
    rows = []
    for model, path in models:
        for item in discover(model, path):
            if item.missing:
                rows.append(ClassicRow(model, item.video, status=FAILED, reason=f"{item.video}: {item.missing}"))
                continue
            name = Path(item.video)
            gt = gts.get(name.stem)
            if gt is None:
                rows.append(ClassicRow(model, item.video, status=FAILED, reason=(
                    f"no GT video named {name.name} in {gt_dir}: classic metrics pair generated and GT "
                    "videos by file name")))
            else:
                rows.append(ClassicRow(model, item.video, str(gt)))
    if not any(r.gt_video for r in rows):
        raise UserError(f"none of the {len(rows)} generated video(s) has a GT video of the same file name in "
                        f"{gt_dir}: classic metrics pair generated and GT videos by file name")
    return rows


# ---------------------------------------------------------------- one pair
def _to_size(rgb: np.ndarray, shape) -> np.ndarray:
    """The generated frame at the GT frame's size (area when shrinking, bilinear when enlarging)."""
    h, w = shape[:2]
    if rgb.shape[:2] == (h, w):
        return rgb
    shrink = rgb.shape[0] * rgb.shape[1] > h * w
    return cv2.resize(rgb, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def _check_faces(video: str, gt_video: str, gen: LandmarkSeries, gt: LandmarkSeries):
    for path, series in ((video, gen), (gt_video, gt)):
        if not series.face_found().any():
            raise VideoError(path, "no face found by FaceMesh in any frame: no landmark distance")
    n = min(len(gen.frame_index), len(gt.frame_index))
    if not (gen.face_found()[:n] & gt.face_found()[:n]).any():
        raise VideoError(video, f"no frame where both it and its GT {gt_video} show a face")


def _face(rgb: np.ndarray, points: np.ndarray | None) -> np.ndarray | None:
    """The 112x112 ArcFace-aligned face of a frame from its FaceMesh points (normalised), or None."""
    from theval_mesh.backends.classic import arcface

    if points is None:
        return None
    h, w = rgb.shape[:2]
    return arcface.aligned(rgb, identity.five_points(points[:, :2] * (w, h)))


def source_face(path) -> np.ndarray:
    """The aligned face of a --source-image (VideoError when it cannot be read or shows no face)."""
    bgr = cv2.imread(str(path))
    if bgr is None:
        raise UserError(f"--source-image {path}: not an image OpenCV can read")
    rgb = np.ascontiguousarray(bgr[:, :, ::-1])
    with FaceTracker(SINGLE) as tracker:
        face = _face(rgb, tracker.process(rgb))
    if face is None:
        raise UserError(f"--source-image {path}: no face found by FaceMesh")
    return face


class FrameMeasure:
    """What a per-frame metric reads off one frame (AKD's landmarks, AED's embedding): `of(rgb)`.
    A GT frame's is computed once per run: every model compared with that GT video reuses it."""

    def __init__(self, of):
        self.of, self.gt_frames = of, {}  # gt video -> the values of its frames so far

    def of_gt(self, gt_video: str, position: int, rgb: np.ndarray):
        """The value of the GT video's frame at `position` (0, 1, ... in decoding order)."""
        seen = self.gt_frames.setdefault(gt_video, [])
        if position == len(seen):
            seen.append(self.of(rgb))
        return seen[position]


def keypoints(face_alignment) -> FrameMeasure:
    """face-alignment's landmarks for AKD: the first face of a frame, as pose-evaluation keeps it."""
    def first(rgb: np.ndarray) -> np.ndarray | None:
        found = face_alignment.get_landmarks(rgb, first_only=True)
        return None if found is None else found[0]
    return FrameMeasure(first)


def identities(openface_net) -> FrameMeasure:
    """OpenFace's embedding of a whole frame for AED (backends/classic/openface.py)."""
    from theval_mesh.backends.classic import openface

    return FrameMeasure(lambda rgb: openface.embeddings(openface_net, [rgb])[0])


def compare(video: str, gt_video: str, limits: Limits = Limits(), arcface_net=None,
            source: np.ndarray | None = None, keypoints: FrameMeasure | None = None,
            identities: FrameMeasure | None = None) -> dict:
    """The per-video classic metrics of one generated video against its GT video (decoded once
    each, side by side). VideoError for a video that cannot be read or has no face. arcface_net:
    also CSIM, against `source` (an aligned face) or else the GT video's first frame with a face.
    keypoints: also AKD, on the generated frames at the GT's size (pose-evaluation compares frames
    of one size). identities: also AED, on the frames as decoded (each is resized to 96 x 96)."""
    gen_lm, gt_lm = LandmarkSeries(478), LandmarkSeries(478)  # SINGLE is refined: 478 points
    psnrs, ssims, faces, face_frames, gen_kp, gt_kp, gen_id, gt_id = [], [], [], [], [], [], [], []
    with ExitStack() as stack:
        readers = []
        for path in (video, gt_video):
            readers.append(MediaReader(path, limits))
            stack.callback(readers[-1].close)  # also when the other one cannot be opened
        gen_tracker = stack.enter_context(FaceTracker(SINGLE))
        gt_tracker = stack.enter_context(FaceTracker(SINGLE))
        gen_frames, gt_frames = (stack.enter_context(closing(r.frames())) for r in readers)
        for (i, gen), (_, gt) in zip(gen_frames, gt_frames):
            resized = _to_size(gen, gt.shape)
            psnrs.append(lm.psnr(resized, gt))
            ssims.append(lm.ssim(resized, gt))
            # Landmarks on the frames as decoded: normalised coordinates do not depend on the size.
            gen_points, gt_points = gen_tracker.process(gen), gt_tracker.process(gt)
            gen_lm.append(i, gen_points)
            gt_lm.append(i, gt_points)
            if arcface_net is not None:
                if source is None and gt_points is not None:
                    source = _face(gt, gt_points)  # the GT's first frame with a face
                faces.append(_face(gen, gen_points))
                face_frames.append(i)
            if keypoints is not None:
                gen_kp.append(keypoints.of(resized))
                gt_kp.append(keypoints.of_gt(gt_video, len(gt_kp), gt))
            if identities is not None:
                gen_id.append(identities.of(gen))
                gt_id.append(identities.of_gt(gt_video, len(gt_id), gt))
    if not psnrs:
        raise VideoError(video, "no frame to compare")
    _check_faces(video, gt_video, gen_lm, gt_lm)
    d = lm.landmark_distances(gen_lm.points, gt_lm.points)
    out = {"lmd_f": d.lmd_f, "lmd_m": d.lmd_m, "psnr": float(np.mean(psnrs)), "ssim": float(np.mean(ssims)),
           "frames_paired": d.frames_paired, "frames_skipped": d.frames_skipped}
    if arcface_net is not None and source is not None and any(f is not None for f in faces):
        from theval_mesh.backends.classic import arcface

        emb = arcface.embeddings(arcface_net, [source, *(f for f in faces if f is not None)])
        cosines = identity.cosine(emb[1:], emb[0])
        out["csim"] = float(np.mean(cosines))
        with_face = [i for i, f in zip(face_frames, faces, strict=True) if f is not None]
        out["csim_drift"] = identity.drift(identity.segment_similarities(cosines, with_face, readers[0].info.fps))
    if keypoints is not None:
        distances = akd.keypoint_distances(gt_kp, gen_kp).distances
        out["akd"] = float(distances.mean()) if len(distances) else math.nan
        out["akd_frames"] = len(distances)
    if identities is not None:
        distances = aed.embedding_distances(gt_id, gen_id)
        out["aed"] = float(distances.mean()) if len(distances) else math.nan
        out["aed_frames"] = len(distances)
    return out


# ---------------------------------------------------------------- a run
def summarize(rows: list[ClassicRow], models: list[str], network_values: dict | None = None,
              resamples: int = uncertainty.RESAMPLES, network_intervals: dict | None = None) -> list[dict]:
    """Per model: the mean of each metric over its scored videos, the counts behind them and the
    bootstrap interval of each mean over videos. network_values: {model: {column: value}} for the
    set-level FID / FVD, network_intervals: {(model, column): (low, high)} their intervals."""
    out = []
    for model in models:
        done = [r for r in rows if r.model == model and r.status == OK]
        table = np.array([[getattr(r, key) for key in PER_VIDEO] for r in done], float).reshape(len(done), -1)
        bounds = uncertainty.mean_intervals(table, resamples)
        values = {column: list(table[:, j]) for j, column in enumerate(PER_VIDEO.values())}
        intervals = dict(zip(PER_VIDEO.values(), bounds, strict=True))
        for column, value in (network_values or {}).get(model, {}).items():
            values[column] = [value]
            if (model, column) in (network_intervals or {}):
                intervals[column] = network_intervals[(model, column)]
        row = lm.summary_row(model, values, intervals)
        # AKD and AED weigh frames, not videos (pose-evaluation's mean over every frame), their
        # intervals a bootstrap over the video pairs; the count stays that of videos
        for column, key in ((lm.AKD, "akd"), (lm.AED, "aed")):
            with_frames = [r for r in done if getattr(r, f"{key}_frames")]
            if with_frames:
                row[column], weighted = akd.frame_weighted([getattr(r, key) for r in with_frames],
                                                           [getattr(r, f"{key}_frames") for r in with_frames])
                row[column + CI_LOW], row[column + CI_HIGH] = uncertainty.set_interval(weighted, len(with_frames))
        out.append(row)
    return out


def run(models: list[tuple[str, str]], gt_dir, store=None, limits: Limits = Limits(),
        progress: bool = True, lse_pipeline: str = lse.SYNCNET_PYTHON, source_image=None,
        fid_variant: str = "pytorch-fid", all_variants: bool = False, fid_frames: str = "all",
        fvd_variant: str = "stylegan-v") -> ClassicRun:
    """The classic metrics of each generated video against its GT video, and per model. The
    columns follow lse_pipeline, fid_variant and fvd_variant; FID takes fid_frames of each video
    (lm.fid_frame_indices); all_variants: also every other variant's value per model
    (ClassicRun.variants), from the same decoded frames."""
    if lse_pipeline not in lse.PIPELINES:
        raise UsageRefused(f"--lse-pipeline {lse_pipeline!r}: one of {', '.join(lse.PIPELINES)}")
    chosen = {lm.FID: fid_variant, lm.FVD: fvd_variant}
    for column, name in chosen.items():
        if name not in set_variants(column):
            raise UsageRefused(f"--{column.lower()}-variant {name!r}: one of {', '.join(set_variants(column))}")
    try:
        lm.fid_frame_indices(0, fid_frames)
    except ValueError as err:
        raise UsageRefused(f"--fid-frames: {err}") from None
    rows = pair_by_name(models, gt_dir)
    skipped = [r for r in (skip_reason(name, store) for name in _networks(chosen)) if r]
    provenance = {"LMD-F/LMD-M": "MediaPipe FaceMesh (478 points, one tracking pass), 256-scale px",
                  "PSNR/SSIM": "scikit-image, generated frames resized to the GT's"}
    net, s3fd = None, None
    if not skip_reason("syncnet", store):
        from theval_mesh.backends.classic import syncnet  # torch only when SyncNet runs

        try:
            net, _ = syncnet.load(store)
            s3fd = _s3fd(store, skipped)
            provenance["LSE-C/LSE-D"] = syncnet.provenance(store, lse_pipeline, s3fd)
        except WeightsMissing as err:  # present but not that network: LSE empty, the rest scored
            skipped.insert(0, str(err))
    arcface_net, source = None, None
    if not skip_reason("arcface", store):
        from theval_mesh.backends.classic import arcface  # torch only when ArcFace runs
        from theval_mesh.backends.classic.networks import describe

        try:
            arcface_net = arcface.load(store)
            provenance[lm.CSIM] = (f"ArcFace iresnet100 {describe('arcface', store)}; faces: {arcface.DETECTOR}; "
                                   "source: " + (f"{source_image}" if source_image else "each GT video's first frame "
                                                                                       "with a face"))
            source = source_face(source_image) if source_image else None
        except WeightsMissing as err:
            skipped.insert(0, str(err))
    measures = {}  # the per-frame metrics: AKD's landmarks, AED's embeddings
    if not skip_reason("fan-2d", store):
        from theval_mesh.backends.classic import fan  # torch only when FAN runs

        try:
            measures["keypoints"] = keypoints(fan.FaceAlignment(store))
            provenance[lm.AKD] = fan.provenance(store)
        except WeightsMissing as err:
            skipped.insert(0, str(err))
    if not skip_reason("openface", store):
        from theval_mesh.backends.classic import openface  # torch only when OpenFace runs

        try:
            measures["identities"] = identities(openface.load(store))
            provenance[lm.AED] = openface.provenance(store)
        except WeightsMissing as err:
            skipped.insert(0, str(err))
    todo = [r for r in rows if r.status == OK]
    other_lse = {}  # (video, pipeline) -> (LSE-C, LSE-D) of the pipelines not chosen (all_variants)
    for row in tqdm(todo, desc="pairs", unit="pair", disable=not progress):
        try:
            for key, value in compare(row.video, row.gt_video, limits, arcface_net, source, **measures).items():
                setattr(row, key, value)
        except VideoError as err:  # this pair fails alone, with its reason
            row.status, row.reason = FAILED, str(err)
            continue
        if net is not None:
            _add_sync(row, net, limits, lse_pipeline, s3fd)
            for pipeline in (p for p in lse.PIPELINES if all_variants and p != lse_pipeline):
                other = ClassicRow(row.model, row.video)
                _add_sync(other, net, limits, pipeline, s3fd)
                other_lse[(row.video, pipeline)] = (other.lse_c, other.lse_d)
    names = list(dict.fromkeys(m for m, _ in models))
    sets = SetMetrics(store, limits, skipped, provenance, chosen, all_variants, fid_frames)
    values = ({m: sets.of([r for r in rows if r.model == m and r.status == OK]) for m in names}
              if sets.nets or sets.others else {})
    result = ClassicRun(rows, summarize(rows, names, values, network_intervals=sets.intervals), skipped, provenance)
    result.samples = {key: (*sizes, sets.resamples.get(key, 0)) for key, sizes in sets.samples.items()}
    if all_variants:
        result.variants = _variant_values(result, lse_pipeline if net is not None else None, other_lse,
                                          chosen, sets.variant_values)
    return result


def _variant_values(result: ClassicRun, lse_pipeline: str | None, other_lse: dict, chosen: dict,
                    set_values: dict) -> dict:
    """(model, column, variant) -> value: LSE-C and LSE-D per pipeline (the mean over the model's
    videos with a value, as the summary's), FID and FVD per variant (chosen: {column: the run's own};
    set_values: (model, column, variant) -> value of the others)."""
    out = {}
    for s in result.summary:
        model = s["Model"]
        if lse_pipeline is not None:
            ok = [r for r in result.rows if r.model == model and r.status == OK]
            for column, j in ((lm.LSE_C, 0), (lm.LSE_D, 1)):
                out[(model, column, lse_pipeline)] = s[column]
                for (video, pipeline), pair in other_lse.items():
                    if any(r.video == video for r in ok):
                        out.setdefault((model, column, pipeline), [])
                        out[(model, column, pipeline)].append(pair[j])
        for column, variant in chosen.items():
            if column in result.provenance:
                out[(model, column, variant)] = s[column]
            out.update({k: v for k, v in set_values.items() if k[:2] == (model, column)})
    return {k: (_finite_mean(v) if isinstance(v, list) else v) for k, v in out.items()}


def _finite_mean(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


class SetMetrics:
    """FID and FVD of a model: its generated videos' frames (clips) against those of the GT videos
    they pair with, one value per model with a bootstrap interval over video pairs (the sample
    sizes are stated, since both are biased with few samples, a bias the interval does not
    correct). Each GT video's features are computed once. `chosen` {column: variant name} picks
    the implementation of each column (fid.VARIANTS, fvd.VARIANTS); all_variants: also the point
    estimate of every other variant whose network is in the store (variant_values)."""

    def __init__(self, store, limits: Limits, skipped: list[str], provenance: dict, chosen: dict,
                 all_variants: bool = False, fid_frames: str = "all"):
        from theval_mesh.backends.classic.networks import describe

        self.limits, self.skipped, self.nets, self.samples, self.cache = limits, skipped, {}, {}, {}
        self.intervals, self.resamples = {}, {}  # (model, column) -> (low, high), resamples
        self.fid_frames = fid_frames
        self.chosen = {column: set_variants(column)[name] for column, name in chosen.items()}
        self.others, self.variant_values = {}, {}  # (column, variant) -> its net; (model, column, variant) -> value
        frames_used = {lm.FID: f"frames of each video: {'every frame' if fid_frames == 'all' else fid_frames}",
                       lm.FVD: "its clips"}
        for column, variant in self.chosen.items():
            if skip_reason(variant.network, store):
                continue
            try:
                self.nets[column] = variant.load(store)
            except WeightsMissing as err:
                skipped.append(str(err))
                continue
            provenance[column] = (f"{describe(variant.network, store)}; {column} variant {variant.name} "
                                  f"({variant.follows}): {variant.what}; {frames_used[column]}")
        for column, variant in ((c, v) for c in self.chosen for v in set_variants(c).values()
                                if all_variants and v.name != self.chosen[c].name):
            if skip_reason(variant.network, store):
                skipped.append(f"{column} variant {variant.name}: {skip_reason(variant.network, store)}")
                continue
            self.others[(column, variant.name)] = variant.load(store)
            provenance[f"{column} ({variant.name})"] = (f"{describe(variant.network, store)}; {variant.follows}: "
                                                        f"{variant.what}; {frames_used[column]}")

    def _features(self, path: str) -> dict:
        """{column or (column, variant): features} of one video, from one decoding."""
        if path not in self.cache:
            frames = [f for _, f in MediaReader(path, self.limits).frames()]
            taken = {lm.FID: [frames[i] for i in lm.fid_frame_indices(len(frames), self.fid_frames)], lm.FVD: frames}
            out = {column: _video_features(column, self.chosen[column], net, taken[column])
                   for column, net in self.nets.items()}
            for (column, name), net in self.others.items():
                out[(column, name)] = _video_features(column, set_variants(column)[name], net, taken[column])
            self.cache[path] = out
        return self.cache[path]

    def of(self, rows: list[ClassicRow]) -> dict:
        """{column: value} of one model's scored rows; the sample sizes in self.samples."""
        if not rows:
            return {}
        model = rows[0].model
        gen = [self._features(r.video) for r in rows]
        gt = [self._features(p) for p in dict.fromkeys(r.gt_video for r in rows)]
        gt_of = list(dict.fromkeys(r.gt_video for r in rows))
        gt_index = np.array([gt_of.index(r.gt_video) for r in rows])
        values = {}
        for column in self.nets:
            variant = self.chosen[column]
            a, b = (np.concatenate([f[column] for f in side]) for side in (gen, gt))
            key = (model, column)
            self.samples[key] = (len(a), len(b), len(rows), len(gt))
            values[column] = self._distance(variant, a, b, f"{column} of {model}")
            if math.isfinite(values[column]):
                self.intervals[key] = self._interval(a, b, [len(f[column]) for f in gen],
                                                     [len(f[column]) for f in gt], gt_index, variant.ddof, key)
        for column, name in self.others:  # the point estimate only: the intervals are the chosen variant's
            a, b = (np.concatenate([f[(column, name)] for f in side]) for side in (gen, gt))
            self.variant_values[(model, column, name)] = self._distance(
                set_variants(column)[name], a, b, f"{column} ({name}) of {model}")
        return values

    def _distance(self, variant, a: np.ndarray, b: np.ndarray, what: str) -> float:
        """The variant's distance of (generated, GT) features; NaN with fewer than 2 rows a side, or
        with the reason in skipped when its code refuses (pytorch-fid's large imaginary part)."""
        if min(len(a), len(b)) < 2:
            return math.nan
        try:
            return variant.distance(a, b)
        except ValueError as err:
            self.skipped.append(f"{what}: {err}")
            return math.nan

    def _interval(self, a, b, gen_rows, gt_rows, gt_index, ddof: int, key) -> tuple:
        """The bootstrap interval over video pairs: a generated video and its GT video are drawn
        together, their frames (clips) with them (lm.pair_resample_distance). No interval unless
        2 pairs have frames (clips) on both sides: the per-video metrics' rule."""
        if sum(g > 0 and gt_rows[j] > 0 for g, j in zip(gen_rows, gt_index)) < 2:
            return (math.nan, math.nan)
        resamples = (uncertainty.SET_RESAMPLES if min(len(a), len(b)) <= a.shape[1]
                     else uncertainty.LARGE_SET_RESAMPLES)
        self.resamples[key] = resamples
        statistic = lm.pair_resample_distance(a, gen_rows, b, gt_rows, gt_index, ddof)
        return uncertainty.set_interval(statistic, len(gen_rows), resamples)


def set_variants(column: str) -> dict:
    """The implementations of a set metric: {name: variant} (fid.VARIANTS or fvd.VARIANTS)."""
    from theval_mesh.backends.classic import fid, fvd

    return {lm.FID: fid.VARIANTS, lm.FVD: fvd.VARIANTS}[column]


def _video_features(column: str, variant, net, frames: list) -> np.ndarray:
    """(rows, dims) features of one video's frames by one variant of FID or FVD."""
    from theval_mesh.backends.classic import fid

    if column == lm.FID:
        return fid.inception_features(frames, net=net, variant=variant.name).features
    return variant.features(net, frames)


def _s3fd(store, skipped: list[str]):
    """syncnet_python's face detector when its sfd_face.pth is in the store, else None (BlazeFace
    finds the faces, and provenance says so); a file that is not S3FD's is named in `skipped`."""
    from theval_mesh.backends.classic.s3fd import NAME, S3FD

    if skip_reason(NAME, store):
        return None
    try:
        return S3FD(store)
    except WeightsMissing as err:
        skipped.append(f"{err}: faces found by BlazeFace instead")
        return None


def _add_sync(row: ClassicRow, net, limits: Limits, pipeline: str, s3fd=None) -> None:
    """LSE of the generated video; without audio or a long enough face track only LSE is empty."""
    from theval_mesh.backends.classic import syncnet

    try:
        s = syncnet.video_sync(net, row.video, limits, pipeline, s3fd)
    except VideoError as err:
        row.lse_reason = str(err)
        return
    row.lse_c, row.lse_d, row.av_offset, row.lse_tracks = s.lse_c, s.lse_d, float(s.offset), s.tracks


# ---------------------------------------------------------------- outputs
def _cell(value) -> str:
    """Numbers as the project's CSVs write them: NaN as an empty cell."""
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return str(value)


def _write_csv(path: Path, columns, records) -> None:
    with open(path, "w", newline="") as f:
        w = csv_cells.Writer(f)
        w.writerow(columns)
        for rec in records:
            w.writerow([_cell(rec[c]) for c in columns])


def notes(result: ClassicRun) -> list[str]:
    """What every number was computed with, the sample sizes, and stand-in warnings: the lines
    above the LaTeX table and in classic.json."""
    lines = [f"{columns}: {what}" for columns, what in result.provenance.items()]
    lines += [f"{s['Model']}: {s.get(COUNT_PREFIX + lm.LMD_F, 0)} video pairs for LMD/PSNR/SSIM, "
              f"{s.get(COUNT_PREFIX + lm.LSE_C, 0)} videos with LSE" for s in result.summary]
    unit = {lm.FID: "frames", lm.FVD: "16-frame clips"}
    rows = {s["Model"]: s for s in result.summary}
    for (model, column), (a, b, videos, gt_videos, resamples) in result.samples.items():
        line = (f"{model}: {column} over {a} generated vs {b} GT {unit[column]} ({videos} vs {gt_videos} videos); "
                "biased with few samples: compare values of equal sample sizes only")
        low, high = (rows.get(model, {}).get(column + bound, math.nan) for bound in (CI_LOW, CI_HIGH))
        if resamples and not math.isnan(low):
            # the bounds themselves: with few videos the interval sits off-centre, which mean +- half-width hides
            line += (f"; its interval: [{low:.4g}, {high:.4g}], {uncertainty.LEVEL:.0%} bootstrap over the {videos} "
                     f"video pairs, {resamples} resamples (over videos; it does not correct the bias)")
        else:
            line += "; no interval (fewer than 2 video pairs with frames)"
        lines.append(line)
    if any("stand-in:" in what for what in result.provenance.values()):
        lines.insert(0, "WARNING: computed with STAND-IN weights: the values mean nothing as scores")
    return lines


def sets(result: ClassicRun) -> list[dict]:
    """FID and FVD per model: the frames (clips) and videos behind the value, the resamples of its
    interval (0: none)."""
    return [{"model": model, "metric": column, "generated": a, "gt": b, "videos": videos, "gt_videos": gt_videos,
             "resamples": resamples}
            for (model, column), (a, b, videos, gt_videos, resamples) in result.samples.items()]


def write_outputs(result: ClassicRun, out_dir, hf_dataset: str | None = None) -> tuple[Path, Path]:
    """In out_dir: classic.csv (one line per generated video), classic_summary.csv (one per model:
    `Model`, the Table 2 columns, "n:<column>" counts, "<column> CI low/high" bounds), classic.tex
    (the booktabs table in a paper's column order), classic.json (all of it with the provenance
    and why any column is empty), and per model vbench/<model>_eval_results.json (VBench's
    per-video format) and, given the benchmark's Hub dataset id, hf/<model>/.eval_results/
    theval-classic.yaml (Hugging Face's eval results)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    videos, summary = out / "classic.csv", out / "classic_summary.csv"
    _write_csv(videos, CSV_COLUMNS, [asdict(r) for r in result.rows])
    _write_csv(summary, list(result.summary[0]) if result.summary else ["Model", *lm.COLUMNS], result.summary)
    (out / "classic.tex").write_text(lm.summary_latex(result.summary, notes(result)))
    block = {"schema": "theval-classic/1", "notes": notes(result), "provenance": result.provenance,
             "skipped": result.skipped, "bootstrap": {"resamples": uncertainty.RESAMPLES, "seed": uncertainty.SEED,
                                                      "level": uncertainty.LEVEL, "over": "videos",
                                                      "sets_over": "video pairs (FID, FVD: resamples in `sets`)"},
             "summary": result.summary, "sets": sets(result)}
    doc = {**block, "videos": [asdict(r) for r in result.rows]}
    (out / "classic.json").write_text(json.dumps(json_safe(doc), indent=1, allow_nan=False) + "\n")
    _add_to_results_json(out / "results.json", json_safe(block))
    _write_exchange_formats(result, out, hf_dataset)
    if result.variants:
        _write_variants(result, out)
    return videos, summary


def variant_follows() -> dict[str, str]:
    """Every variant of a classic metric -> the code it follows."""
    return {lse.SYNCNET_PYTHON: "joonson/syncnet_python's pipeline (its ffmpeg re-encodings, JPEG frames, XVID crops)",
            lse.IN_PROCESS: "syncnet_python's network and math on the decoded pixels, nothing re-encoded",
            lse.WAV2LIP_LRS: "Rudrabha/Wav2Lip (5c90fa9) evaluation/scores_LSE/calculate_scores_LRS.py: whole frames "
                             "resized to 224x224, no face detection, the video's own frame rate",
            lse.LATENTSYNC: "bytedance/LatentSync (a229c39) eval/eval_sync_conf.py: syncnet_python's steps in MP4 "
                            "with the crops' audio in AAC, tracks of more than 50 frames, int(fmean) of the offsets",
            lse.MOCHABENCH: "congwei1230/MoChaBench (043908d) eval-lipsync/script/syncnet_pipeline.py: syncnet_python's "
                            "steps with the speech straight from the input, tracks of more than 50 frames, the best "
                            "track's confidence and distance",
            **{name: v.follows for column in (lm.FID, lm.FVD) for name, v in set_variants(column).items()}}


def _write_variants(result: ClassicRun, out: Path) -> None:
    """classic_variants.csv (model, metric, variant, follows, value, spread) and classic_variants.md
    (a table per metric): how far the implementations disagree on the same videos."""
    defaults = {}
    for (_, column, variant) in result.variants:  # the run's own variant comes first per column
        defaults.setdefault(column, variant)
    follows = variant_follows()
    records = []
    for (model, column, variant), value in result.variants.items():
        row = [v for (m, c, _), v in result.variants.items() if m == model and c == column]
        records.append({"model": model, "metric": column, "variant": variant, "follows": follows.get(variant, ""),
                        "value": value, "spread": lm.variant_spread(row, result.variants[(model, column, defaults[column])])})
    _write_csv(out / "classic_variants.csv", ["model", "metric", "variant", "follows", "value", "spread"], records)
    stand_in = [n for n in notes(result) if n.startswith("WARNING")]
    (out / "classic_variants.md").write_text(
        "\n".join(stand_in + ["", "How far the implementations of each metric disagree on the same videos "
                               "(spread: max - min over |the default's value|).", ""])
        + lm.variants_markdown(result.variants, follows, defaults))


# summary column -> its key in other tools' files (VBench's dimensions, the Hub's task ids)
COLUMN_KEYS = {**{column: key for key, column in PER_VIDEO.items()}, lm.FID: "fid", lm.FVD: "fvd"}


def _write_exchange_formats(result: ClassicRun, out: Path, hf_dataset: str | None) -> None:
    """Each model's values in VBench's per-video JSON and (hf_dataset given) the Hub's eval results,
    each metric's notes its provenance (the implementation, its weights' checksums)."""
    from datetime import date

    from theval_mesh.outputs.exchange_formats import file_stem, hf_eval_results, vbench_results

    notes = {key: " ".join(what for names, what in result.provenance.items() if column in names.split("/"))
             for column, key in COLUMN_KEYS.items()}
    if any("stand-in:" in what for what in result.provenance.values()):
        notes = {key: f"STAND-IN weights, values mean nothing as scores. {text}" for key, text in notes.items()}
    for row in result.summary:
        model = row["Model"]
        means = {key: row.get(column) for column, key in COLUMN_KEYS.items()}
        per_video = {key: [(r.video, getattr(r, key)) for r in result.rows if r.model == model]
                     for key in PER_VIDEO}
        (out / "vbench").mkdir(exist_ok=True)
        (out / "vbench" / f"{file_stem(model)}_eval_results.json").write_text(
            json.dumps(vbench_results(per_video, means), indent=4, allow_nan=False) + "\n")
        if hf_dataset:
            folder = out / "hf" / file_stem(model) / ".eval_results"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "theval-classic.yaml").write_text(
                hf_eval_results(hf_dataset, means, date.today().isoformat(), notes))


def _add_to_results_json(path: Path, block: dict) -> None:
    """Into a THEval results folder: the summary goes into its results.json too (key "classic"),
    where `theval report` shows it beside the leaderboard. A results.json that cannot be read is
    left as it is."""
    if not path.is_file():
        return
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(doc, dict) and doc.get("schema") == SCHEMA_ID:
        doc.pop("legacy", None)  # the block's name before the rename
        doc["classic"] = block
        write_text(path, json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n")  # whole, links replaced


def format_summary(result: ClassicRun) -> str:
    """The summary as a table: each mean, then the videos scored (of those paired by name)."""
    head = ["Model", *lm.COLUMNS, "Videos"]
    body = []
    for s in result.summary:
        total = sum(r.model == s["Model"] for r in result.rows)
        done = sum(r.model == s["Model"] and r.status == OK for r in result.rows)
        body.append([s["Model"], *("-" if math.isnan(s[c]) else f"{s[c]:.4f}" for c in lm.COLUMNS),
                     f"{done}/{total}"])
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(head)] + [line(r) for r in body])
