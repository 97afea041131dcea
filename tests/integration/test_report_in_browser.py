"""`theval report` on the kit's evaluation, opened in headless chromium: it renders without a
console error or a single network request, the leaderboard sorts, the published leaderboard
switches on, a video page shows its plots and thumbnails. Screenshots are kept as artefacts."""
import json
import re

import pytest

from tests.support.browser import artefacts, browser_page
from theval_mesh.commands.cli import main
from theval_mesh.outputs.html_report import build_report
from theval_mesh.pure.scoring.tables import published_leaderboard

pytestmark = pytest.mark.slow  # chromium and thumbnails from the kit's videos: ~15 s


@pytest.fixture(scope="module")
def report(evaluated_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", str(evaluated_dir), "--out", str(path), "--thumbnails", "2", "--no-progress",
                 "--published"]) == 0  # the kit is scored with the proxy: the overlay only on request
    return path


def finals(page) -> list[float]:
    cells = page.locator("#leaderboard tbody tr:visible td:nth-child(4)")
    return [float(v) for v in cells.evaluate_all("cells => cells.map(c => c.dataset.v)") if v]


def test_the_report_is_one_file_that_needs_no_network(report, evaluated_dir):
    page = report.read_text()
    assert report.stat().st_size < 20e6
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=[\"']?(https?:)?//", page)
    doc = json.loads((evaluated_dir / "results.json").read_text())
    assert doc["proxy_quality"], "the kit is scored with the proxy"
    for metric in doc["proxy_quality"]:
        assert f"{metric} (PROXY)" in page
    assert "The published leaderboard is offered (--published) beside these results, which are not comparable" in page


def test_it_renders_sorts_and_overlays_in_chromium(report, evaluated_dir, tmp_path):
    doc = json.loads((evaluated_dir / "results.json").read_text())
    shots = artefacts(tmp_path)
    with browser_page() as (page, log):
        page.goto(report.as_uri())
        page.wait_for_selector("#radar .main-svg")
        page.wait_for_selector("#video-plot .main-svg")
        assert log["console"] == []
        assert all(u.startswith(("file:", "data:")) for u in log["requests"]), log["requests"]

        rows = page.locator("#leaderboard tbody tr:visible")
        assert rows.count() == len(doc["leaderboard"])  # every model and the GT; published hidden
        radar = page.evaluate("document.getElementById('radar').data.map(t => t.r.length)")
        assert radar == [9] * (len(doc["leaderboard"]) - 1)  # a closed polygon per model, GT aside
        page.locator("#leaderboard-section").screenshot(path=str(shots / "report-leaderboard.png"))

        header = page.locator("#leaderboard th", has_text="Final")
        header.click()
        assert finals(page) == sorted(finals(page))
        header.click()
        assert finals(page) == sorted(finals(page), reverse=True)

        page.check("#show-published")
        assert rows.count() == len(doc["leaderboard"]) + len(published_leaderboard())
        legend = page.locator("#dimensions .legend .traces", has_text="published")
        legend.locator(".legendtoggle").click()  # the overlay on the bars, as a reader switches it on
        # plotly tells a click from a double click after its doubleClickDelay (300 ms)
        page.wait_for_function("!document.getElementById('dimensions').data.some(t => t.visible === 'legendonly')")
        page.locator("#dimensions-section").screenshot(path=str(shots / "report-dimensions.png"))


def test_a_video_page_shows_its_signals_and_worst_frames(report, tmp_path):
    shots = artefacts(tmp_path)
    with browser_page() as (page, log):
        page.goto(report.as_uri())
        page.wait_for_selector("#video-plot .main-svg")
        page.select_option("#model-select", "audio_shift")
        page.wait_for_timeout(300)
        assert "audio_shift" in page.inner_text("#video-title")
        # 9 lines (mouth, loudness, 3 angles, eyebrow, 3 quality scores), each with points
        lengths = page.evaluate("document.getElementById('video-plot').data.map(t => t.y.filter(v => v !== null).length)")
        assert len(lengths) == 9 and min(lengths) > 50, lengths
        speech = page.evaluate("document.getElementById('video-plot').layout.shapes.length")
        assert speech >= 2  # speech and silence shaded
        images = page.locator("#video-thumbs img")
        assert images.count() == 2
        assert all(w > 0 for w in images.evaluate_all("imgs => imgs.map(i => i.naturalWidth)"))
        assert "(PROXY)" in page.inner_text("#video-facts")
        assert "Audio-visual offset" in page.inner_text("#video-facts")
        page.locator("#video-section").screenshot(path=str(shots / "report-video.png"))
        assert log["console"] == []
    print(f"\nreport screenshots in {shots}")


def test_a_folder_without_results_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) != 0
    assert "results.json not found" in capsys.readouterr().err
    with pytest.raises(Exception, match="theval evaluate"):
        build_report(tmp_path)


# Names a probe gave videos and models: each once put the HTML parser of the report's data block
# into a state where its </script> did not end it (no plots, no model list, no console error).
HOSTILE = ["<!--<script>", "</script><script>alert(1)</script>", "<script>", "a<!--b-->c", "x & y > z",
           "line\u2028sep\u2029ara"]


def hostile_results(folder):
    """results.json and results.jsonl of a run whose model and video names are HOSTILE (no models:
    per-video results made up, as tests/unit/test_results_document.py makes them)."""
    import numpy as np

    from theval_mesh.core import aggregate
    from theval_mesh.core.results import OK, VideoResult
    from theval_mesh.outputs import results_files
    from theval_mesh.pure.metrics.registry import REGISTRY
    from theval_mesh.pure.scoring.final_score import leaderboard

    rng = np.random.default_rng(0)
    provenance = {"profile": "reference", "quality": {"global_aesthetic": "proxy:luma"}}
    names = ["GT", *HOSTILE]
    res = [VideoResult(model, f"/videos/{model}/{video}.mp4", OK, provenance=provenance,
                       metrics={m.key: float(v) for m, v in zip(REGISTRY, np.arange(1, 9) + rng.normal(0, 0.1, 8))})
           for model in names for video in HOSTILE[:3]]
    rows = aggregate.model_rows(res, names)
    run_info = {"job": "job-1", "gt": "/videos/GT", "models": {}, "settings": {}, "provenance": provenance}
    results_files.write_all(folder, res, rows, leaderboard(rows, gt_name="GT"), run_info)
    return names


def test_hostile_names_show_as_text_with_every_plot(tmp_path):
    names = hostile_results(tmp_path)
    path = build_report(tmp_path, thumbnails=0, progress=False)
    with browser_page() as (page, log):
        page.goto(path.as_uri())
        page.wait_for_selector("#radar .main-svg", timeout=10000)
        page.wait_for_selector("#dimensions .main-svg", timeout=10000)
        page.wait_for_selector("#video-plot .main-svg", timeout=10000)
        assert log["console"] == []
        assert page.evaluate("[...document.querySelectorAll('#model-select option')].map(o => o.value)") == names
        shown = page.locator("#leaderboard tbody tr:visible td:nth-child(2)").all_inner_texts()
        assert sorted(shown) == sorted(names)
        titles = page.locator("#radar .annotation-text").all_text_contents()
        assert sorted(titles) == sorted(HOSTILE)  # plotly shows them as text, tags and all
        page.select_option("#model-select", HOSTILE[0])
        page.select_option("#video-select", index=1)
        assert page.inner_text("#video-title") == f"{HOSTILE[0]}: /videos/{HOSTILE[0]}/{HOSTILE[1]}.mp4"
        assert page.evaluate("document.scripts.length") == 5  # plotly.js, 3 data blocks, the page's: no name made one


def test_classic_metrics_written_into_the_folder_show_in_results_json_and_the_report(evaluated_dir, tmp_path):
    """`theval classic --out` into an evaluation's folder: its summary joins results.json (schema-valid)
    and the report shows it with the intervals, the notes and the stand-in warning."""
    import shutil

    from tests.support.results_schema import validate_results
    from theval_mesh.studies import classic_metrics as lgm

    folder = tmp_path / "results"
    shutil.copytree(evaluated_dir, folder)
    rows = [lgm.ClassicRow("ours", f"v{i}.mp4", "g.mp4", lse_c=c, lse_d=8.0 - c / 4, lmd_f=1.0 + c / 10)
            for i, c in enumerate([5.0, 6.0, 7.5])]
    rows.append(lgm.ClassicRow("solo", "v0.mp4", "g.mp4", lse_c=4.0))
    # FVD, a set's value: with its interval over the 3 video pairs of ours, none from solo's one
    summary = lgm.summarize(rows, ["ours", "solo"], {"ours": {"FVD": 41.3}, "solo": {"FVD": 50.0}}, resamples=500,
                            network_intervals={("ours", "FVD"): (40.1, 59.2)})
    run = lgm.ClassicRun(rows, summary, ["FID skipped: no weights"],
                        {"LSE-C/LSE-D": "SyncNet syncnet_v2.model sha256:00 (stand-in:0)"},
                        {("ours", "FVD"): (18, 6, 3, 1, 1000), ("solo", "FVD"): (6, 6, 1, 1, 0)})
    lgm.write_outputs(run, folder)
    doc = json.loads((folder / "results.json").read_text())
    validate_results(doc)
    assert doc["classic"]["summary"][0]["LSE-C"] == pytest.approx(6.1666666)
    assert doc["classic"]["summary"][0]["FID"] is None and doc["classic"]["summary"][0]["FVD CI high"] == 59.2
    assert doc["classic"]["sets"][0]["resamples"] == 1000
    page_path = build_report(folder, thumbnails=0, progress=False)
    with browser_page() as (page, log):
        page.goto(page_path.as_uri())
        page.wait_for_selector("#classic")
        assert log["console"] == []
        heads = page.locator("#classic th").all_inner_texts()
        assert heads[:4] == ["Model", "LSE-C ↑", "LSE-D ↓", "FVD ↓"] and "FID ↓" not in heads
        text = page.locator("#classic-section").inner_text()
        assert "STAND-IN" in text and "FID skipped: no weights" in text and "6.167" in text
        fvd = {r[0]: r[3] for r in (row.locator("td").all_inner_texts() for row in page.locator("#classic tbody tr").all())}
        assert fvd["ours"].split() == ["41.300", "[40.100,", "59.200]"] and fvd["solo"] == "50.000"
        assert "its interval: [40.1, 59.2], 95% bootstrap over the 3 video pairs" in text
        assert "solo: FVD over 6 generated vs 6 GT 16-frame clips (1 vs 1 videos)" in text and "no interval" in text
        page.locator("#classic-section").screenshot(path=str(artefacts(tmp_path) / "report-classic.png"))
