"""The files of an evaluation from known per-video results: results.json valid against its
schema with every interval around its estimate, NaN as null, counts of failures; each video's
normalised scores in results.csv and results.jsonl; the intervals and significance notes in the
leaderboard tables."""
import csv
import json
import math

import numpy as np

from tests.support.results_schema import validate_results
from theval_mesh.core import aggregate
from theval_mesh.core.results import FAILED, OK, VideoResult
from theval_mesh.outputs import results_files
from theval_mesh.pure.metrics.registry import REGISTRY
from theval_mesh.pure.scoring.final_score import leaderboard, video_scores
from theval_mesh.pure.scoring.names import METRICS, NAME_OF_KEY
from theval_mesh.pure.scoring.tables import format_leaderboard_text
from theval_mesh.pure.scoring.uncertainty import bootstrap

PROVENANCE = {"profile": "reference", "quality": {"global_aesthetic": "proxy:luma", "mouth_quality": "proxy:luma",
                                                  "face_quality": "proxy:luma"}}


def results(seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for model, scale in (("GT", 1.0), ("near", 1.02), ("far", 1.6)):
        for i in range(6):
            metrics = {m.key: float(v) for m, v in zip(REGISTRY, (np.arange(1, 9) * scale + rng.normal(0, 0.05, 8)))}
            out.append(VideoResult(model, f"/videos/{model}/clip_{i}.mp4", OK, metrics=metrics, provenance=PROVENANCE))
    out[-1].metrics["lip_sync"] = math.nan  # one video without a lip-sync value
    out.append(VideoResult("far", "/videos/far/broken.mp4", FAILED, reason="not a readable video"))
    return out


def evaluation(tmp_path):
    res = results()
    names = ["GT", "near", "far"]
    rows = aggregate.model_rows(res, names)
    board = leaderboard(rows, gt_name="GT")
    values, items = aggregate.per_video(res, names)
    board.uncertainty = bootstrap(values, "GT", board.weights, [r.model for r in board.rows if r.rank], items=items,
                                  resamples=2000)
    run_info = {"job": "job-1", "gt": "/videos/GT", "models": {"near": "/videos/near", "far": "/videos/far"},
                "settings": {"profile": "reference"}, "provenance": PROVENANCE}
    paths = results_files.write_all(tmp_path, res, rows, board, run_info)
    return res, board, paths


def test_results_json_follows_its_schema_with_every_interval_around_its_estimate(tmp_path):
    res, board, paths = evaluation(tmp_path)
    document = json.loads(paths["results_json"].read_text())
    validate_results(document)
    assert [e["model"] for e in document["leaderboard"]] == ["GT", "near", "far"]
    for entry in document["leaderboard"][1:]:
        figures = [entry["final"], *entry["groups"].values(), *entry["normalised"].values(), *entry["raw"].values()]
        for f in figures:
            assert f["ci"][0] <= f["value"] <= f["ci"][1], (entry["model"], f)
    gt = document["leaderboard"][0]
    assert gt["final"]["ci"] is None and gt["raw"]["Lip sync"]["ci"] is not None  # the GT's own sampling error
    assert document["leaderboard"][2]["raw"]["Lip sync"]["videos"] == 5
    assert document["counts"] == {"videos": 19, "scored": 18, "failed": 1, "per_model": {
        "GT": {"videos": 6, "scored": 6, "failed": 0}, "near": {"videos": 6, "scored": 6, "failed": 0},
        "far": {"videos": 7, "scored": 6, "failed": 1}}}
    assert document["proxy_quality"] == ["Global aesthetic", "Mouth quality", "Face quality"]
    (comparison,) = document["comparisons"]
    assert comparison["paired_items"] == 6 and comparison["apart"] and comparison["difference_ci"][0] > 0


def test_each_video_carries_its_normalised_scores(tmp_path):
    res, board, paths = evaluation(tmp_path)
    with open(paths["results_csv"]) as f:
        rows = {r["video"]: r for r in csv.DictReader(f)}
    lines = {json.loads(line)["video"]: json.loads(line) for line in paths["results_jsonl"].read_text().splitlines()}
    for r in res:
        if r.status != OK:
            assert rows[r.video]["final_score"] == "" and lines[r.video]["final_score"] is None
            continue
        scores, final = video_scores({NAME_OF_KEY[k]: v for k, v in r.metrics.items()}, board.gt_values, board.weights)
        for m in REGISTRY:
            expected = scores[m.name]
            if math.isnan(expected):
                assert rows[r.video][f"norm_{m.key}"] == "" and lines[r.video]["normalised"][m.key] is None
            else:
                assert float(rows[r.video][f"norm_{m.key}"]) == expected == lines[r.video]["normalised"][m.key]
        assert (rows[r.video]["final_score"] == "") == math.isnan(final)
    assert VideoResult.from_json(paths["results_jsonl"].read_text().splitlines()[0]) == res[0]  # still readable


def test_tables_show_the_intervals_and_say_when_ranks_are_not_apart(tmp_path):
    _, board, _ = evaluation(tmp_path)
    text = format_leaderboard_text(board)
    assert "95% CI" in text and "2000 resamples, seed 0, GT resampled too" in text
    assert "not significantly apart" not in text  # near and far are far apart
    # two models from one distribution: a tie the bootstrap cannot separate
    values = {"GT": np.tile(np.arange(1.0, 9.0), (8, 1)) + np.random.default_rng(1).normal(0, 0.3, (8, 8))}
    values["a"] = values["GT"] * 1.3 + np.random.default_rng(2).normal(0, 0.3, (8, 8))
    values["b"] = values["a"] + np.random.default_rng(3).normal(0, 0.3, (8, 8))
    rows = [aggregate.RawRow(m, dict(zip(METRICS, v.mean(axis=0)))) for m, v in values.items()]
    tie = leaderboard(rows, gt_name="GT")
    tie.uncertainty = bootstrap(values, "GT", tie.weights, [r.model for r in tie.rows if r.rank], resamples=2000)
    assert "are not significantly apart" in format_leaderboard_text(tie)


def _contrast(a, b) -> float:
    def luminance(rgb):
        r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb[:3])
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_heat_map_labels_the_proxy_and_every_cell_reads(tmp_path):
    import matplotlib
    from matplotlib.colors import to_rgb
    _, board, paths = evaluation(tmp_path)
    assert paths["plot"].stat().st_size > 10_000
    fig = results_files.leaderboard_figure(board, results_files._proxies(PROVENANCE))
    heat, bars = fig.axes[0], fig.axes[1]
    assert "PROXY: Global aesthetic, Mouth quality, Face quality" in heat.get_title()
    labels = [t.get_text() for t in heat.get_xticklabels()]
    assert [lab.endswith("(PROXY)") for lab in labels] == [True, True, True] + [False] * 5
    assert bars.get_title() == "Final score (95% CI)"
    cmap = matplotlib.colormaps[results_files.HEAT_MAP]
    for value in np.linspace(0, 1, 101):  # WCAG AA for small text: contrast 4.5
        cell = cmap(value)
        assert _contrast(to_rgb(results_files._ink(cell)), cell) >= 4.5, value
    cells = [t for t in heat.texts]
    assert len(cells) == 2 * len(METRICS) and {t.get_color() for t in cells} <= {"black", "white"}


def test_a_run_of_the_gt_alone_writes_every_file(tmp_path):
    """No model to rank: the heat map shows the GT row, which has no Final-score interval."""
    gt = [r for r in results() if r.model == "GT"]
    rows = aggregate.model_rows(gt, ["GT"])
    board = leaderboard(rows, gt_name="GT")
    values, items = aggregate.per_video(gt, ["GT"])
    board.uncertainty = bootstrap(values, "GT", board.weights, [], items=items, resamples=100)
    paths = results_files.write_all(tmp_path, gt, rows, board, {"provenance": PROVENANCE})
    document = json.loads(paths["results_json"].read_text())
    validate_results(document)
    assert paths["plot"].stat().st_size > 0 and document["comparisons"] == []


def test_results_json_summarises_each_models_audio_visual_offsets(tmp_path):
    res = results()
    for k, r in enumerate(r for r in res if r.model == "far" and r.status == OK):
        r.fps = 25.0
        if k < 4:  # 4 of its 5 scored videos have an estimate: 3 within a frame (40 ms), one beyond
            r.av_offset = {"ms": [10.0, -20.0, 30.0, 200.0][k], "confidence": 0.5}
    summary = results_files.offset_summary(res)
    assert summary["far"] == {"videos": 4, "median_ms": 20.0, "mean_abs_ms": 65.0,
                              "p90_abs_ms": np.percentile([10, 20, 30, 200], 90), "beyond_one_frame": 0.25}
    assert summary["GT"] == {"videos": 0, "median_ms": None, "mean_abs_ms": None, "p90_abs_ms": None,
                             "beyond_one_frame": None}
