"""`theval classic`'s math on arrays (pure/metrics/classic.py), the weights' loader and the model
names; real videos through real MediaPipe: tests/integration/test_classic_on_videos.py."""
import json
import math

import cv2
import numpy as np
import pytest
import torch

from theval_mesh.backends.classic import fvd, syncnet
from theval_mesh.backends.classic.networks import skip_reason
from theval_mesh.pure.errors import UserError, WeightsMissing
from theval_mesh.pure.metrics import classic as lm
from theval_mesh.studies import classic_metrics


# ---------------------------------------------------------------- pure math
def test_landmark_distances_in_256_scale_pixels_over_paired_frames():
    rng = np.random.default_rng(0)
    gt = rng.uniform(0.2, 0.8, (10, 478, 3))
    same = lm.landmark_distances(gt, gt)
    assert (same.lmd_f, same.lmd_m, same.frames_paired, same.frames_skipped) == (0.0, 0.0, 10, 0)

    shifted = gt[:7].copy()  # shorter: 7 frames paired
    shifted[:, :, 0] += 3 / 256  # 3 px to the right at 256 scale; z moves too but does not count
    shifted[:, :, 2] += 0.5
    shifted[2] = np.nan  # no face in generated frame 2
    d = lm.landmark_distances(shifted, gt)
    assert d.lmd_f == pytest.approx(3.0) and d.lmd_m == pytest.approx(3.0)
    assert (d.frames_paired, d.frames_skipped) == (7, 1)


def test_lmd_m_follows_the_mouth_and_lmd_f_dilutes_it():
    gt = np.random.default_rng(1).uniform(0.2, 0.8, (5, 478, 3))
    gen = gt.copy()
    gen[:, list(lm.MOUTH_POINTS), 1] += 4 / 256  # only the lips move, 4 px down
    d = lm.landmark_distances(gen, gt)
    assert d.lmd_m == pytest.approx(4.0)
    assert d.lmd_f == pytest.approx(4.0 * len(lm.MOUTH_POINTS) / 478)


def test_no_frame_with_faces_on_both_sides_gives_nan():
    gt = np.full((4, 478, 3), np.nan)
    d = lm.landmark_distances(np.zeros((4, 478, 3)), gt)
    assert math.isnan(d.lmd_f) and (d.frames_paired, d.frames_skipped) == (4, 4)


def test_psnr_is_capped_and_psnr_ssim_fall_with_noise():
    frame = cv2.resize(np.random.default_rng(2).integers(0, 256, (16, 16, 3), dtype=np.uint8), (64, 64))
    assert lm.psnr(frame, frame) == lm.PSNR_CAP_DB == 100.0
    assert lm.ssim(frame, frame) == 1.0
    noisy = [np.clip(frame + np.random.default_rng(3).normal(0, s, frame.shape), 0, 255).astype(np.uint8)
             for s in (5, 20)]
    p, s = [lm.psnr(n, frame) for n in noisy], [lm.ssim(n, frame) for n in noisy]
    assert 100 > p[0] > p[1] and 1 > s[0] > s[1]
    assert p[0] == pytest.approx(10 * np.log10(255 ** 2 / np.mean((noisy[0] - frame.astype(float)) ** 2)))


def test_frechet_distance_of_gaussians():
    a = np.random.default_rng(4).normal(size=(4000, 3))
    assert lm.frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)
    assert lm.frechet_distance(a + [2.0, 0, 0], a) == pytest.approx(4.0, abs=1e-6)  # |mean shift|^2


def test_summary_means_ignore_nan_and_count():
    row = lm.summary_row("m", {lm.PSNR: [30.0, math.nan, 40.0], lm.SSIM: [0.9]})
    assert list(row)[:9] == ["Model", "LMD-F", "LMD-M", "PSNR", "SSIM", "LSE-C", "LSE-D", "FID", "FVD"]
    assert row[lm.PSNR] == 35.0 and row["n:PSNR"] == 2 and row["n:SSIM"] == 1
    assert math.isnan(row[lm.FID]) and row["n:FID"] == 0

def test_absent_and_foreign_weights_are_named(tmp_path):
    assert "syncnet_v2.model not in the weights store" in skip_reason("syncnet", tmp_path)
    torch.save({"netcnnaud.0.weight": torch.zeros(2)}, tmp_path / "syncnet_v2.model")
    assert skip_reason("syncnet", tmp_path) == ""  # computed: its file is checked as it loads
    with pytest.raises(WeightsMissing, match="is not SyncNet's syncnet_v2.model"):
        syncnet.load(tmp_path)
    (tmp_path / "i3d_torchscript.pt").write_bytes(b"truncated")
    assert skip_reason("fvd-i3d", tmp_path) == ""
    with pytest.raises(WeightsMissing, match="FVD skipped: cannot load"):
        fvd.load_detector(tmp_path)
    (tmp_path / "pt_inception-2015-12-05-6726825d.pth").write_bytes(b"other")
    assert "is not the published FID Inception weights" in skip_reason("fid-inception", tmp_path)


def test_model_names_default_to_folder_names(tmp_path):
    assert classic_metrics.generated_models([str(tmp_path / "a"), str(tmp_path / "b")]) == [
        ("a", str(tmp_path / "a")), ("b", str(tmp_path / "b"))]
    assert classic_metrics.generated_models(["x/v.mp4"], ["m"]) == [("m", "x/v.mp4")]
    with pytest.raises(UserError, match="--model given 2 times for 3"):
        classic_metrics.generated_models(["a", "b", "c"], ["m", "n"])


def test_summary_intervals_latex_and_json(tmp_path):
    rows = [classic_metrics.ClassicRow("m", f"v{i}.mp4", "g.mp4", lse_c=c, lse_d=10 - c, psnr=30.0)
            for i, c in enumerate([2.0, 4.0, 6.0, 8.0])]
    rows.append(classic_metrics.ClassicRow("n", "w.mp4", "g.mp4", lse_c=9.0, psnr=31.0))
    summary = classic_metrics.summarize(rows, ["m", "n"], resamples=2000)
    m = summary[0]
    assert m[lm.LSE_C] == 5.0 and 2.0 <= m["LSE-C CI low"] < 5.0 < m["LSE-C CI high"] <= 8.0
    assert m["PSNR CI low"] == m["PSNR CI high"] == 30.0  # no spread, no width
    assert math.isnan(summary[1]["LSE-D CI low"])  # no value, no interval
    run = classic_metrics.ClassicRun(rows, summary, ["FID skipped: why"], {"LSE-C/LSE-D": "SyncNet x (stand-in:0)"})
    classic_metrics.write_outputs(run, tmp_path)
    tex = (tmp_path / "classic.tex").read_text()
    assert r"LSE-C $\uparrow$ & LSE-D $\downarrow$" in tex and "STAND-IN" in tex
    assert r"\textbf{9.000}" in tex and r"5.000 $\pm$" in tex  # n has the best LSE-C; m's has a width
    doc = json.loads((tmp_path / "classic.json").read_text())
    assert doc["summary"][1]["LSE-D"] is None and doc["skipped"] == ["FID skipped: why"]
    assert doc["notes"][0].startswith("WARNING") and doc["bootstrap"]["over"] == "videos"


def test_fid_fvd_intervals_reach_every_output_and_a_single_video_has_none(tmp_path):
    """Model m: 8 video pairs, FID with its bootstrap interval over them (the pure route SetMetrics
    takes); model n: one video pair, so no interval. The CSV, classic.tex, classic.json (valid against
    results.json's "classic" schema), its notes and the LaTeX comments carry it, or say there is none."""
    import csv

    import jsonschema

    from theval_mesh.outputs.results_files import RESULTS_SCHEMA
    from theval_mesh.pure.scoring import uncertainty

    rng = np.random.default_rng(11)
    # 40 frames of 4 features per video: enough rows that the small-sample bias (which lifts every
    # resample, with fewer distinct rows) does not push the interval past the point estimate
    gen, gt = rng.normal(size=(8 * 40, 4)), rng.normal(0.5, 1.0, size=(8 * 40, 4))
    point = lm.frechet_distance(gen, gt)
    statistic = lm.pair_resample_distance(gen, [40] * 8, gt, [40] * 8, range(8), ddof=1)
    assert statistic(np.ones(8)) == pytest.approx(point, rel=1e-9)
    low, high = uncertainty.set_interval(statistic, 8, resamples=200)
    assert low < point < high and all(math.isnan(v) for v in uncertainty.set_interval(statistic, 1))
    rows = [classic_metrics.ClassicRow("m", f"v{i}.mp4", f"g{i}.mp4", psnr=30.0 + i) for i in range(8)]
    rows.append(classic_metrics.ClassicRow("n", "v0.mp4", "g0.mp4", psnr=31.0))
    one = lm.frechet_distance(gen[:40], gt[:40])
    summary = classic_metrics.summarize(rows, ["m", "n"], {"m": {lm.FID: point}, "n": {lm.FID: one}},
                                       resamples=500, network_intervals={("m", lm.FID): (low, high),
                                                                         ("n", lm.FID): (math.nan, math.nan)})
    run = classic_metrics.ClassicRun(rows, summary, [], {lm.FID: "pytorch-fid's FID Inception"},
                                   {("m", lm.FID): (320, 320, 8, 8, 200), ("n", lm.FID): (40, 40, 1, 1, 0)})
    classic_metrics.write_outputs(run, tmp_path)
    with open(tmp_path / "classic_summary.csv") as f:
        csv_rows = {r["Model"]: r for r in csv.DictReader(f)}
    assert float(csv_rows["m"]["FID CI low"]) == low and float(csv_rows["m"]["FID CI high"]) == high
    assert csv_rows["n"]["FID"] != "" and csv_rows["n"]["FID CI low"] == csv_rows["n"]["FID CI high"] == ""
    tex = (tmp_path / "classic.tex").read_text()
    m_line = next(line for line in tex.splitlines() if line.startswith("m &"))
    n_line = next(line for line in tex.splitlines() if line.startswith("n &"))
    assert lm.tex_number((high - low) / 2, 3) in m_line and r"$\pm$" in m_line.split("&")[-1]
    assert r"$\pm$" not in n_line.split("&")[-1]  # FID, the last column: no interval from one video
    assert "FID, FVD: the set's value" in tex and f"[{low:.4g}, {high:.4g}]" in tex
    doc = json.loads((tmp_path / "classic.json").read_text())
    assert doc["summary"][0]["FID CI low"] == low and doc["summary"][1]["FID CI low"] is None
    notes = [n for n in doc["notes"] if " over " in n and "FID" in n]
    assert "m: FID over 320 generated vs 320 GT frames (8 vs 8 videos)" in notes[0]
    assert f"its interval: [{low:.4g}, {high:.4g}], 95% bootstrap over the 8 video pairs, 200 resamples" in notes[0]
    assert notes[1].endswith("no interval (fewer than 2 video pairs with frames)")
    assert doc["sets"][1] == {"model": "n", "metric": "FID", "generated": 40, "gt": 40, "videos": 1, "gt_videos": 1,
                              "resamples": 0}
    block = {k: v for k, v in doc.items() if k != "videos"}
    jsonschema.Draft202012Validator(json.loads(RESULTS_SCHEMA.read_text())["properties"]["classic"]).validate(block)


def test_the_variants_table_puts_the_default_first_with_the_spread():
    from theval_mesh.pure.metrics.classic import variant_spread, variants_markdown

    assert variant_spread([10.0, 11.0, 9.5], 10.0) == pytest.approx(0.15)
    assert math.isnan(variant_spread([10.0], 10.0)) and math.isnan(variant_spread([1.0, 2.0], 0.0))
    variants = {("m", "FID", "b"): 12.0, ("m", "FID", "a"): 10.0, ("n", "FID", "b"): 8.0,
                ("m", "LSE-C", "x"): 6.0}
    text = variants_markdown(variants, {"a": "repo A 1.0", "b": "repo B"}, {"FID": "b", "LSE-C": "x"})
    assert "| model | b (default) | a | spread |" in text
    assert "| m | 12 | 10 | 16.67% |" in text and "| n | 8 | -- | -- |" in text
    assert "- a: repo A 1.0" in text and "### LSE-C" in text and "| m | 6 | spread |" not in text


def test_disco_fvd_reads_a_video_only_up_to_its_whole_clip_limit():
    """DisCo's FVD puts a whole video into the I3D at once: a video longer than the limit gives no
    row (counted as skipped, as a short one is in the other variants), read no further than that."""
    low, high = fvd.WHOLE_VIDEO_FRAMES
    read = []

    def video(n):
        for i in range(n):
            read.append(i)
            yield np.zeros((8, 8, 3), np.uint8)

    assert fvd.VARIANTS["disco"].features(None, video(high + 50)).shape == (0, fvd.FEATURES)
    assert len(read) == high + 1
    assert fvd.VARIANTS["disco"].features(None, video(low - 1)).shape == (0, fvd.FEATURES)


def test_a_video_shorter_than_a_clip_gives_no_row_of_each_cd_fvd_variants_width():
    """cd-fvd's two networks give 400 (I3D) and 1,408 (VideoMAE) values a clip; a 15-frame video
    gives no clip, so an empty row block of that width, before any network runs."""
    from theval_mesh.backends.classic import videomae

    frames = [np.zeros((8, 8, 3), np.uint8)] * 15
    assert fvd.VARIANTS["cd-fvd-i3d"].features(None, frames).shape == (0, fvd.FEATURES)
    assert fvd.VARIANTS["cd-fvd-videomae"].features(None, frames).shape == (0, videomae.FEATURES)
