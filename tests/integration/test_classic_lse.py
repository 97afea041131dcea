"""LSE-C / LSE-D in `theval classic` and `theval_mesh.classic()` on real talking-head clips of the
parity set with STAND-IN SyncNet weights (fake weights: syncnet_v2.model cannot be fetched here):
the values are computed and labelled as stand-ins; a video without audio or too short for a face
track leaves only LSE empty, with its reason; the two pipelines differ by what re-encoding does.
Their equality with syncnet_python's own code: test_syncnet_parity.py."""
import csv
import json
import math

import pytest

import theval_mesh
from tests.support.model_parity_set import cut
from theval_mesh.backends import stand_in
from theval_mesh.commands.cli import main as cli
from theval_mesh.synth.mp4 import without_audio

pytestmark = pytest.mark.slow
FRAMES = 110


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("classic-lse")
    store = root / "store"
    stand_in.write(store, 0, models=(), classic=["syncnet"])
    stand_in.write(root / "all-store", 0, models=(), classic=["syncnet", "fid-inception", "fvd-i3d", "arcface"])
    # 110 frames (4.4 s): just over syncnet_python's 100-frame track minimum, to keep the test short
    (root / "gt").mkdir()
    for name, source in (("a", "astronaut_de_gt"), ("t", "tom_it_gt")):
        cut(source, FRAMES, root / "gt" / f"{name}.mp4")
    for model, make in {
        "desync": lambda d: [cut("astronaut_de_desync", FRAMES, d / "a.mp4"), cut("tom_it_desync", FRAMES, d / "t.mp4")],
        "silent": lambda d: without_audio(root / "gt" / "a.mp4", d / "a.mp4"),
        "short": lambda d: cut("astronaut_de_gt", 60, d / "a.mp4"),  # 2.4 s: under syncnet_python's 4 s track
    }.items():
        (root / model).mkdir()
        make(root / model)
    return root


def test_the_api_computes_lse_and_leaves_only_lse_empty_where_it_cannot(folders):
    result = theval_mesh.classic(folders / "gt", {m: folders / m for m in ("desync", "silent", "short")},
                                store=folders / "store", lse_pipeline="in-process")
    rows = {(r.model, r.video.split("/")[-1]): r for r in result.rows}
    desync = rows[("desync", "a.mp4")]
    assert desync.status == "ok" and desync.lse_tracks == 1 and math.isfinite(desync.lse_c)
    assert desync.lse_d > 0 and desync.av_offset in range(-15, 16)
    silent, short = rows[("silent", "a.mp4")], rows[("short", "a.mp4")]
    assert silent.status == short.status == "ok"  # LMD, PSNR and SSIM are still there
    assert math.isfinite(silent.lmd_f) and math.isnan(silent.lse_c) and "no audio track" in silent.lse_reason
    assert math.isnan(short.lse_c) and "no face track of more than 100 frames" in short.lse_reason
    assert "(stand-in:0)" in result.provenance["LSE-C/LSE-D"] and "in-process" in result.provenance["LSE-C/LSE-D"]
    summary = {s["Model"]: s for s in result.summary}
    assert summary["desync"]["n:LSE-C"] == 2 and summary["silent"]["n:LSE-C"] == 0
    assert summary["desync"]["LSE-C CI low"] <= summary["desync"]["LSE-C"] <= summary["desync"]["LSE-C CI high"]


def test_the_command_takes_the_syncnet_python_way_by_default_and_labels_stand_ins(folders, capsys):
    out = folders / "out"
    assert cli(["classic", "--gt", str(folders / "gt"), "--generated", str(folders / "desync"), str(folders / "silent"),
                "--store", str(folders / "all-store"), "--out", str(out), "--no-progress", "--all-variants",
                "--fid-frames", "count:22"]) == 0  # 22 of each video's 110 frames: FID's Inception is most of the cost
    printed = capsys.readouterr().out
    assert "WARNING: computed with STAND-IN weights" in printed and "pipeline syncnet_python" in printed
    # FID and FVD: one value per model, with the sample sizes behind it
    assert "desync: FID over 44 generated vs 44 GT frames (2 vs 2 videos)" in printed
    assert "desync: FVD over 12 generated vs 12 GT 16-frame clips" in printed
    doc = json.loads((out / "classic.json").read_text())
    assert doc["notes"][0].startswith("WARNING") and doc["summary"][0]["n:LSE-C"] == 2
    assert doc["summary"][0]["FID"] > 0 and doc["summary"][0]["FVD"] > 0
    # --all-variants names the variants whose network file this store lacks, and nothing else is
    # skipped but AKD and AED, whose FAN and OpenFace are not in this store either
    assert [s for s in doc["skipped"] if not s.startswith(("FID variant clean-fid: ", "FVD variant disco: ",
                                                           "FVD variant common-metrics-videogpt: ",
                                                           "FVD variant cd-fvd-i3d: ", "FVD variant cd-fvd-videomae: ",
                                                           "AKD skipped: ", "AED skipped: "))] == []
    assert any("i3d_pretrained_400.pt not in the weights store" in s for s in doc["skipped"])
    assert "(stand-in:0)" in doc["provenance"]["FID"] and "(stand-in:0)" in doc["provenance"]["FVD"]
    assert "frames of each video: count:22" in doc["provenance"]["FID"]
    # their intervals: a bootstrap over the 2 video pairs, each resample's distance computed anew.
    # A resample repeats videos, so it has fewer distinct frames: FID and FVD, biased upward with
    # few samples, sit higher on it, and with 2 videos the interval lies above the point estimate.
    row = doc["summary"][0]
    for column in ("FID", "FVD"):
        assert 0 < row[f"{column} CI low"] < row[f"{column} CI high"], column
        assert row[f"{column} CI high"] > row[column], column
    assert "FID over 44 generated vs 44 GT frames (2 vs 2 videos); biased with few samples: compare values of " \
           "equal sample sizes only; its interval: [" in printed
    assert "95% bootstrap over the 2 video pairs, 1000 resamples (over videos; it does not correct the bias)" in printed
    tex = (out / "classic.tex").read_text()
    # one video pair (silent): FID and FVD, but no interval anywhere
    one = doc["summary"][1]
    # (its video is its GT's, the audio dropped: both distances 0 up to rounding)
    assert one["Model"] == "silent" and one["FID"] == pytest.approx(0, abs=1e-5) and one["FVD"] == pytest.approx(0, abs=1e-5)
    assert one["FID CI low"] is one["FID CI high"] is one["FVD CI low"] is one["FVD CI high"] is None
    assert "silent: FID over 22 generated vs 22 GT frames (1 vs 1 videos); biased with few samples: compare values " \
           "of equal sample sizes only; no interval (fewer than 2 video pairs with frames)" in printed
    assert {(s["model"], s["metric"]): s["resamples"] for s in doc["sets"]} == {
        ("desync", "FID"): 1000, ("desync", "FVD"): 1000, ("silent", "FID"): 0, ("silent", "FVD"): 0}
    columns = tex.split(r"\toprule")[1].split(r"\\")[0].strip().split(" & ")
    cells = {m: dict(zip(columns, next(line for line in tex.splitlines() if line.startswith(f"{m} &")).split(" & ")))
             for m in ("desync", "silent")}
    set_columns = [c for c in columns if c.startswith(("FID", "FVD"))]
    assert len(set_columns) == 2 and all(r"$\pm$" in cells["desync"][c] for c in set_columns)
    assert all(r"$\pm$" not in cells["silent"][c] and cells["silent"][c] != "--" for c in set_columns)
    with open(out / "classic_summary.csv") as f:
        summary_csv = {r["Model"]: r for r in csv.DictReader(f)}
    assert float(summary_csv["desync"]["FID CI low"]) == row["FID CI low"] and summary_csv["silent"]["FVD CI high"] == ""
    assert "(stand-in:0)" in doc["provenance"]["CSIM"] and "first frame with a face" in doc["provenance"]["CSIM"]
    assert all(0.5 < v["csim"] <= 1.0 for v in doc["videos"])  # the same speakers as their sources
    assert all(v["csim_drift"] is None for v in doc["videos"])  # 110 frames: one 5 s span, no drift
    assert r"CSIM $\uparrow$" in (out / "classic.tex").read_text()
    assert r"LSE-C $\uparrow$ & LSE-D $\downarrow$ & FVD $\downarrow$ & FID $\downarrow$" in (out / "classic.tex").read_text()
    # --all-variants: the other LSE pipeline and FID variants on the same videos. The re-encodings
    # (MPEG-4, JPEG, XVID, JPEG) move the stand-in's LSE: why the default is syncnet_python's
    with open(out / "classic_variants.csv") as f:
        variants = {(r["model"], r["metric"], r["variant"]): r for r in csv.DictReader(f)}
    lse_d = {p: float(variants[("desync", "LSE-D", p)]["value"]) for p in ("syncnet_python", "in-process")}
    assert lse_d["syncnet_python"] == pytest.approx(row["LSE-D"]) and lse_d["in-process"] != pytest.approx(
        lse_d["syncnet_python"], rel=1e-4)
    # Wav2Lip's LRS way: whole frames, no face crop (its own code: test_syncnet_parity.py)
    assert float(variants[("desync", "LSE-D", "wav2lip-lrs")]["value"]) != pytest.approx(lse_d["syncnet_python"], rel=1e-3)
    assert "calculate_scores_LRS.py" in variants[("desync", "LSE-D", "wav2lip-lrs")]["follows"]
    assert "eval_sync_conf.py" in variants[("desync", "LSE-C", "latentsync")]["follows"]
    assert "syncnet_pipeline.py" in variants[("desync", "LSE-C", "mochabench")]["follows"]
    assert float(variants[("desync", "FID", "clean-fid-legacy-pytorch")]["value"]) == pytest.approx(row["FID"], rel=1e-4)
    assert ("desync", "FID", "clean-fid") not in variants  # its TorchScript file is not in this store: said why
    assert "common_metrics_on_video_quality" in variants[("desync", "FVD", "common-metrics-styleganv")]["follows"]
    assert "FID variant clean-fid: FID (clean-fid) skipped: FID Inception (TorchScript) weights inception-2015-12-05.pt" \
           in printed
    assert "variants side by side:" in printed
