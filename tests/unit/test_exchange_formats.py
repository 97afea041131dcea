"""The classic metrics in other tools' formats (outputs/exchange_formats.py): VBench's per-video JSON
and Hugging Face's model-repo eval results, read back by json and PyYAML; names of any kind kept
exactly, values that are not numbers never written as numbers."""
import json
import math
import random

import yaml

from theval_mesh.outputs.exchange_formats import file_stem, hf_eval_results, vbench_results
from theval_mesh.pure.metrics.classic import COLUMNS
from theval_mesh.studies.classic_metrics import ClassicRow, ClassicRun, write_outputs


def test_vbench_results_hold_each_videos_value_and_the_models():
    doc = vbench_results({"lse_c": [("m/a.mp4", 6.5), ("m/b.mp4", math.nan)]}, {"lse_c": 6.5, "fid": 12.0})
    assert json.loads(json.dumps(doc, allow_nan=False)) == {
        "lse_c": [6.5, [{"video_path": "m/a.mp4", "video_results": 6.5},
                        {"video_path": "m/b.mp4", "video_results": None}]],
        "fid": [12.0, []]}


def test_hf_eval_results_read_back_as_written_whatever_the_strings():
    rng = random.Random(20261128)
    alphabet = "ab: #'\"\\\n\t-[]{}&*!|>%@`é中"
    for _ in range(200):
        dataset, notes = ("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20))) for _ in range(2))
        text = hf_eval_results(dataset, {"fid": 12.5, "lse_c": math.nan, "ssim": 0.25}, "2026-11-28",
                               {"fid": notes})
        entries = yaml.safe_load(text)
        assert [e["dataset"] for e in entries] == [{"id": dataset, "task_id": "fid"}, {"id": dataset, "task_id": "ssim"}]
        assert [e["value"] for e in entries] == [12.5, 0.25] and entries[0]["notes"] == notes
        assert all(e["date"] == "2026-11-28" for e in entries) and "notes" not in entries[1]
    assert yaml.safe_load(hf_eval_results("org/bench", {"fid": math.nan}, "2026-11-28")) == []


def test_each_model_gets_its_files_under_a_safe_name(tmp_path):
    rows = [ClassicRow("../up", "up/a.mp4", "gt/a.mp4", lse_c=6.0, ssim=0.5),
            ClassicRow("../up", "up/b.mp4", "gt/b.mp4", status="failed", reason="unreadable"),
            ClassicRow("plain", "plain/a.mp4", "gt/a.mp4", lse_c=7.0)]
    blank = dict.fromkeys(COLUMNS, math.nan)  # a run's summary rows have every column
    summary = [{"Model": "../up", **blank, "LSE-C": 6.0, "SSIM": 0.5, "FID": 3.0}, {"Model": "plain", **blank, "LSE-C": 7.0}]
    run = ClassicRun(rows, summary, [], {"LSE-C/LSE-D": "SyncNet syncnet_v2.model sha256:ab (stand-in:0)",
                                         "FID": "FID variant clean-fid (GaParmar/clean-fid 0.1.35)"})
    write_outputs(run, tmp_path, hf_dataset="someone/talking-heads")
    assert sorted(p.name for p in (tmp_path / "vbench").iterdir()) == ["_up_eval_results.json", "plain_eval_results.json"]
    up = json.loads((tmp_path / "vbench" / "_up_eval_results.json").read_text())
    assert up["lse_c"] == [6.0, [{"video_path": "up/a.mp4", "video_results": 6.0},
                                 {"video_path": "up/b.mp4", "video_results": None}]]
    assert up["fid"] == [3.0, []] and up["fvd"] == [None, []]
    entries = yaml.safe_load((tmp_path / "hf" / "_up" / ".eval_results" / "theval-classic.yaml").read_text())
    by_task = {e["dataset"]["task_id"]: e for e in entries}
    assert set(by_task) == {"lse_c", "ssim", "fid"} and by_task["fid"]["value"] == 3.0
    assert by_task["fid"]["notes"].startswith("STAND-IN weights") and "clean-fid" in by_task["fid"]["notes"]
    assert "syncnet_v2.model" in by_task["lse_c"]["notes"]
    assert not (tmp_path.parent / "up").exists()
    write_outputs(run, tmp_path / "no-hub")  # no dataset id: VBench's files only
    assert (tmp_path / "no-hub" / "vbench").is_dir() and not (tmp_path / "no-hub" / "hf").exists()
    assert file_stem("..") == "_" and file_stem("a/b c") == "a_b_c"
