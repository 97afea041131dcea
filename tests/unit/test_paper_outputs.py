"""Paper-ready outputs from a hand-made leaderboard: leaderboard.tex (booktabs, mean ± half-width
of each interval, the best in bold, arrows, escaping, NaN as --), the interval columns of
leaderboard.csv, a colour-blind safe plot whose scale covers negative scores (300 dpi PNG and
SVG), and objects that print short in a notebook."""
import csv
import json
import math
import re

import matplotlib.colors
import numpy as np
import pytest
from PIL import Image

from theval_mesh.api.evaluation import Evaluation, LeaderboardRow, _rows
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.outputs import results_files
from theval_mesh.pure.metrics.registry import REGISTRY
from theval_mesh.pure.scoring import tables
from theval_mesh.pure.scoring.final_score import Leaderboard, RawRow, ScoredRow, final_score, group_scores, leaderboard
from theval_mesh.pure.scoring.names import FINAL, GROUPS, METRICS
from theval_mesh.pure.scoring.uncertainty import Bootstrap, Intervals

ODD = "a_b & c% #1 {x} ~^\\"  # every LaTeX special character


def scored(model, scores, rank, is_gt=False, note=""):
    return ScoredRow(model, scores, group_scores(scores), final_score(scores), rank,
                     counts=dict.fromkeys(METRICS, 4), is_gt=is_gt, note=note)


def interval(value, below=0.10, above=0.04):
    """An asymmetric interval around a value."""
    return (value - below, value + above)


def board() -> Leaderboard:
    """GT; "best" ahead on every column but Lip sync, where ODD is; "far" with negative scores;
    "gap" without a Lip sync value (unranked)."""
    best = dict(zip(METRICS, [0.9, 0.8, 0.85, 0.7, 0.75, 0.95, 0.6, 0.5]))
    odd = {**{m: v - 0.2 for m, v in best.items()}, "Lip sync": 0.55}
    far = {m: v - 1.3 for m, v in best.items()}
    gap = {**far, "Lip sync": math.nan}
    rows = [scored("GT", dict.fromkeys(METRICS, 1.0), None, is_gt=True), scored("best", best, 1),
            scored(ODD, odd, 2), scored("far", far, 3), scored("gap", gap, None, note="Lip sync: no value")]
    uncertainty = Bootstrap(100, 0, 0.95, gt_resampled=True)
    uncertainty.rows["GT"] = Intervals({m: (0.9, 1.1) for m in METRICS}, {}, {}, None)
    for r in rows[1:4]:
        uncertainty.rows[r.model] = Intervals(raw={m: (1.0, 2.0) for m in METRICS},
                                              normalised={m: interval(v) for m, v in r.scores.items()},
                                              groups={g: interval(v, 0.05, 0.02) for g, v in r.groups.items()},
                                              final=interval(r.final, 0.03, 0.01))
    return Leaderboard(rows, "GT", dict.fromkeys(METRICS, 2.0), dict.fromkeys(METRICS, 1.0),
                       uncertainty=uncertainty)


def value(row, name):
    return row.final if name == FINAL else row.groups[name] if name in GROUPS else row.scores[name]


def tex_rows(text) -> dict:
    """model cell -> the row's cells (\\\\ and the line end taken off)."""
    return {cells[1]: cells for cells in (line[:-len(r" \\")].split(" & ") for line in text.splitlines()
                                          if line.endswith(r" \\") and not line.startswith(("Rank", " &", "\\")))}


def number(cell) -> float:
    return float(cell.replace("$-$", "-"))


def test_the_latex_table_is_booktabs_with_intervals_bold_best_arrows_and_escaping():
    b = board()
    text = tables.leaderboard_latex(b)
    assert [line for line in text.splitlines() if line.startswith("\\") and "&" not in line][:5] == [
        r"\begin{tabular}{rl" + "c" * 12 + "}", r"\toprule",
        r"\cmidrule(lr){3-5} \cmidrule(lr){6-8} \cmidrule(lr){9-10} \cmidrule(lr){11-13}",
        r"\midrule", r"\midrule"]  # the GT a reference line above the models
    assert text.splitlines()[-1] == r"\end{tabular}"
    assert "half-width = (high - low) / 2" in text and "asymmetric" in text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("Rank & Model"))
    groups = lines[lines.index(header) - 2]  # each group over its metrics, then the group means
    assert groups == (r" &  & \multicolumn{3}{c}{Quality} & \multicolumn{3}{c}{Naturalness} & "
                      r"\multicolumn{2}{c}{Synchronization} & \multicolumn{3}{c}{Groups} &  \\")
    assert header.count(r"$\uparrow$") == 12 and header.startswith(r"Rank & Model & Aesth $\uparrow$ & Mouth")
    assert header.endswith(r"Sync. $\uparrow$ & Final $\uparrow$ \\")
    legend = next(line for line in lines if "Aesth: Global aesthetic" in line)
    assert all(f"{tables.LATEX_SHORT[n]}: {n}" in legend for n in [*METRICS, *GROUPS, FINAL])
    escaped = r"a\_b \& c\% \#1 \{x\} \textasciitilde{}\textasciicircum{}\textbackslash{}"
    rows = tex_rows(text)
    assert list(rows) == ["GT", "best", escaped, "far", "gap"] and ODD not in text
    names = [*METRICS, *GROUPS, FINAL]
    for row in b.rows:
        cells = dict(zip(names, rows[tables.latex_escape(row.model)][2:]))
        intervals = tables._intervals(b, row)
        for name, cell in cells.items():
            if math.isnan(value(row, name)):
                assert cell == "--", (row.model, name)
                continue
            bold = cell.startswith(r"\textbf{")
            champion = ODD if name == "Lip sync" else "best"
            assert bold == (row.model == champion), (row.model, name, cell)
            mean, *half = cell.removeprefix(r"\textbf{").removesuffix("}").split(r" $\pm$ ")
            assert number(mean) == round(value(row, name), 3)
            if name in intervals:
                low, high = intervals[name]
                assert number(half[0]) == round((high - low) / 2, 3)
            else:
                assert not half and row.model in ("GT", "gap")  # no interval known
    assert rows["far"][0] == "3" and rows["gap"][0] == "--" and rows["far"][2].startswith("$-$")


def test_leaderboard_csv_appends_the_interval_bounds_after_the_note(tmp_path):
    b = board()
    path = tmp_path / "leaderboard.csv"
    tables.write_leaderboard_csv(b, path)
    with open(path, newline="") as f:
        header = next(csv.reader(f))
        f.seek(0)
        rows = {r["Model"]: r for r in csv.DictReader(f)}
    note = header.index("Note")
    assert header[:note + 1] == ["Rank", "Model", *METRICS, *GROUPS, FINAL, *(f"n:{m}" for m in METRICS), "Note"]
    assert header[note + 1:] == [*tables.ci_columns(), tables.SETUP_COLUMN] and len(tables.ci_columns()) == 24
    assert {r[tables.SETUP_COLUMN] for r in rows.values()} == {"the published figures' setup"}
    assert all(rows["GT"][c] == "" for c in tables.ci_columns())  # the GT: no interval of a normalised score
    assert all(rows["gap"][c] == "" for c in tables.ci_columns())  # no interval known
    for model in ("best", "far"):
        ci = b.uncertainty.rows[model]
        bounds = {**ci.normalised, **ci.groups, FINAL: ci.final}
        for name in (*METRICS, *GROUPS, FINAL):
            assert float(rows[model][f"{name} CI low"]) == round(bounds[name][0], 4)
            assert float(rows[model][f"{name} CI high"]) == round(bounds[name][1], 4)


def test_the_plot_is_colour_blind_safe_covers_negative_scores_and_is_printable(tmp_path):
    b = board()
    fig = results_files.leaderboard_figure(b)
    heat, bars = fig.axes[0], fig.axes[1]
    image = heat.images[0]
    assert image.get_cmap().name == results_files.HEAT_MAP
    lowest = min(v for r in b.rows for v in r.scores.values() if not math.isnan(v))
    assert lowest < 0 and image.norm.vmin <= lowest and image.norm.vmax >= 1
    low_final = min(i.final[0] for i in b.uncertainty.rows.values() if i.final)
    left, right = bars.get_xlim()
    assert left <= low_final < 0 and right > 1  # every interval whole, negative ones too
    png, svg = tmp_path / "leaderboard.png", tmp_path / "leaderboard.svg"
    results_files.plot_leaderboard(b, png, svg=svg)
    assert [round(d) for d in Image.open(png).info["dpi"]] == [300, 300]
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()[:1000]


def test_one_far_out_score_is_an_outlier_not_the_scale_and_a_final_below_0_names_its_metric():
    """The issue's case: one -10.16 cell among scores of 0.6-1 made 0.76 and 1.00 look alike."""
    gt = dict.fromkeys(METRICS, 2.0)
    near = {m: 2.0 * (1.2 + 0.05 * i) for i, m in enumerate(METRICS)}  # normalised 0.8 down to 0.45
    off = {**near, "Face quality": 2.0 * 12.16}  # normalised 1 - 11.16 = -10.16
    b = leaderboard([RawRow("GT", gt), RawRow("near", near), RawRow("off", off)], gt_name="GT")
    row = next(r for r in b.rows if r.model == "off")
    assert row.scores["Face quality"] == pytest.approx(-10.16) and row.final < 0
    assert row.note == ("Final score below 0, driven by Face quality: -10.16 (its raw mean is 1116% of the "
                        "GT's value away from it)")
    assert next(r for r in b.rows if r.model == "near").note == ""

    fig = results_files.leaderboard_figure(b)
    heat, bars = fig.axes[0], fig.axes[1]
    norm = heat.images[0].norm
    assert (norm.vmin, norm.vmax) == (0.0, 1.0)  # the other scores keep the whole colour range
    cmap = heat.images[0].get_cmap()
    assert matplotlib.colors.to_hex(cmap(norm(-10.16))) == results_files.OUTLIER_COLOUR.lower()
    assert "-10.16" in [t.get_text() for t in heat.texts]  # its value printed in the cell
    assert "outliers below 0.00" in heat.get_title()
    assert any(t.get_text().endswith("(Face quality)") for t in bars.texts)
    tables_md = tables.leaderboard_markdown(b)
    assert "driven by Face quality" in tables_md


def three_videos_each(provenance: dict) -> tuple[list, list]:
    """Three videos each of a GT and a model `m` (1.1 x the GT's values), and their raw rows."""
    res = [VideoResult(model, f"/v/{model}/{i}.mp4", OK, provenance=provenance,
                       metrics={m.key: float(v) for m, v in zip(REGISTRY, np.arange(1, 9) * scale + 0.01 * i)})
           for model, scale in (("GT", 1.0), ("m", 1.1)) for i in range(3)]
    rows = [RawRow(m, {k: float(np.mean([r.metrics[g.key] for r in res if r.model == m]))
                       for k, g in zip(METRICS, REGISTRY)}, dict.fromkeys(METRICS, 3)) for m in ("GT", "m")]
    return res, rows


PROXY_SETUP = ["training-free proxy for face_quality: the published figures come from the quality models"]


def proxy_provenance(setup: list) -> dict:
    return {"profile": "reference", "quality": {"face_quality": "proxy:luma"}, "published_gt_blockers": setup}


def test_write_all_writes_the_tex_table_and_the_svg(tmp_path):
    res, rows = three_videos_each({"profile": "reference"})
    b = leaderboard(rows, gt_name="GT")
    paths = results_files.write_all(tmp_path, res, rows, b, {"settings": {}})
    assert paths["leaderboard_tex"].name == "leaderboard.tex" and paths["plot_svg"].name == "leaderboard.svg"
    assert paths["leaderboard_tex"].read_text() == tables.leaderboard_latex(b)
    assert "No bootstrap intervals" in paths["leaderboard_tex"].read_text() and paths["plot_svg"].stat().st_size > 0


def test_results_print_short_in_a_notebook():
    trace = {"mouth_open": [0.1] * 5000, "yaw": [math.nan] * 5000}
    r = VideoResult("hallo2", "/data/videos/hallo2/a/long/path/clip_0001.mp4", OK,
                    metrics={m.key: 1 / 3 for m in REGISTRY}, frames_total=250, frames_used=248, trace=trace,
                    warnings=["w"] * 50, provenance={"profile": "paper", "x": "y" * 1000})
    text = repr(r)
    assert len(r.to_json()) > 50_000 and len(text) < 500, text
    assert text.startswith("VideoResult(model='hallo2', video='clip_0001.mp4', status='ok'")
    assert "lip_sync=0.3333" in text and "frames=248/250" in text and "mouth_open" not in text
    failed = VideoResult("hallo2", "x.mp4", "failed", reason="not a video " * 40)
    assert "status='failed'" in repr(failed) and "reason='not a video" in repr(failed) and len(repr(failed)) < 500
    # fields, equality, to_json and from_json as they were
    assert r.to_dict()["trace"] == trace and r.to_dict() is not r.to_dict()
    assert VideoResult.from_json(r.to_json()).to_json() == r.to_json() and r == VideoResult(**r.to_dict())


def test_the_api_gives_the_latex_table_and_short_rows():
    b = board()
    raw = [RawRow(r.model, dict.fromkeys(METRICS, 1.0), r.counts) for r in b.rows]
    evaluation = Evaluation(results=[], leaderboard=_rows(b, raw), board=b, paths={})
    assert evaluation.to_latex() == tables.leaderboard_latex(b)
    assert evaluation.to_latex(decimals=2).count(r"\textbf{0.90 $\pm$ 0.07}") == 1
    row = evaluation.leaderboard[1]
    assert isinstance(row, LeaderboardRow) and len(repr(row)) < 300, repr(row)
    assert re.match(r"LeaderboardRow\(rank=1, model='best', final=0\.7\d+ \[", repr(row))
    assert row.to_dict()["normalised_ci"] == b.uncertainty.rows["best"].normalised
    assert len(repr(evaluation)) < 2000


def test_a_table_cut_out_of_its_folder_keeps_its_labels(tmp_path):
    """grep -ci proxy leaderboard.tex leaderboard.csv gave 0 and 0: the proxy's columns and how the
    setup differs from the published one now travel with the .tex, .csv and .md tables."""
    setup = [*PROXY_SETUP, "head pose by rigid-fit, an offline stand-in"]
    provenance = proxy_provenance(setup)
    res, rows = three_videos_each(provenance)
    b = leaderboard(rows, gt_name="GT")
    paths = results_files.write_all(tmp_path, res, rows, b, {"settings": {}, "provenance": provenance})
    tex = paths["leaderboard_tex"].read_text()
    assert r"Face$^\dagger$ $\uparrow$" in tex and r"Mouth $\uparrow$" in tex
    assert r"$^\dagger$ training-free proxy, not the paper's quality models (or a mean that includes one)." in tex
    assert r"Qual.$^\dagger$" in tex and r"Final$^\dagger$" in tex and r"Nat. $\uparrow$" in tex
    assert "not comparable with the published figures: training-free proxy for face" in tex
    assert tex.index(r"\bottomrule") < tex.index("not comparable") < tex.index(r"\end{tabular}")
    with open(paths["leaderboard_csv"], newline="") as f:
        cells = {r[tables.SETUP_COLUMN] for r in csv.DictReader(f)}
    assert cells == {"not comparable with the published figures: " + "; ".join(setup)}
    assert "Not comparable with the published figures" in paths["leaderboard_md"].read_text()
    evaluation = Evaluation(results=res, leaderboard=_rows(b, rows), board=b, paths={})
    assert evaluation.to_latex() == tex
    groups = paths["leaderboard_groups_tex"].read_text()  # the groups alone: labelled the same way
    assert evaluation.to_latex(groups_only=True) == groups
    assert r"Qual.$^\dagger$ $\uparrow$" in groups and r"Final$^\dagger$" in groups  # they average the proxy's
    assert "not comparable with the published figures: training-free proxy for face" in groups
    assert r"\begin{tabular}{rlcccc}" in groups


def test_the_published_gt_refuses_results_it_cannot_be_compared_with(tmp_path, capsys):
    """theval score --gt-published on a proxy run's raw_metrics.csv exited 0 (face quality -75.5);
    the run.json beside it says how it was scored: refused in one line, or labelled with
    --allow-mixed."""
    from theval_mesh.commands.cli import main

    provenance = proxy_provenance(PROXY_SETUP)
    rows = [RawRow("m", dict.fromkeys(METRICS, 1.0), dict.fromkeys(METRICS, 3))]
    tables.write_raw_csv(rows, tmp_path / "raw_metrics.csv")
    (tmp_path / "run.json").write_text(json.dumps({"provenance": provenance}))
    assert main(["score", "--metrics", str(tmp_path / "raw_metrics.csv"), "--gt-published"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not comparable with the published GT: training-free proxy" in err
    assert main(["score", "--metrics", str(tmp_path / "raw_metrics.csv"), "--gt-published", "--allow-mixed"]) == 0
    assert "MIXED BACKENDS (allowed by --allow-mixed)" in capsys.readouterr().out


def test_the_report_shows_no_published_overlay_beside_results_it_cannot_be_compared_with(tmp_path):
    from theval_mesh.outputs import html_report

    provenance = proxy_provenance(PROXY_SETUP)
    res, rows = three_videos_each(provenance)
    results_files.write_all(tmp_path, res, rows, leaderboard(rows, gt_name="GT"), {"settings": {}, "provenance": provenance})
    page = html_report.build_report(tmp_path, thumbnails=0, progress=False).read_text()
    assert "The published leaderboard is not shown beside these results: not comparable" in page
    assert "published (paper)" not in page and 'class="published"' not in page
    page = html_report.build_report(tmp_path, thumbnails=0, progress=False, published=True).read_text()
    assert "The published leaderboard is offered (--published) beside these results, which are not" in page
    assert "published (paper)" in page and 'class="published"' in page


def test_report_title_names_the_page_escaped(tmp_path, capsys):
    """`theval report --title`: the page's <title> and heading, as text (a name with markup stays text)."""
    from tests.unit.test_results_document import evaluation
    from theval_mesh.commands.cli import main
    evaluation(tmp_path)
    assert main(["report", str(tmp_path), "--thumbnails", "0", "--no-progress", "--title", "Table 2 <draft>"]) == 0
    page = (tmp_path / "report.html").read_text()
    assert "<title>Table 2 &lt;draft&gt;</title>" in page and "<h1>Table 2 &lt;draft&gt;</h1>" in page
    assert main(["report", str(tmp_path), "--thumbnails", "0", "--no-progress"]) == 0
    assert f"<title>THEval report: {tmp_path.name}</title>" in (tmp_path / "report.html").read_text()
