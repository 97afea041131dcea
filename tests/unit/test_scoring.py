"""Final score, ranks, weights, backend compatibility and the score tables (docs/metrics.md, "Final Score")."""
import argparse
import csv
import json
import math

import pytest

from theval_mesh.commands import score as score_command
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.scoring import (
    GROUPS,
    METRICS,
    PUBLISHED_PROVENANCE,
    IncompatibleBackends,
    RawRow,
    ScoringError,
    canonical_metric,
    check_compatible,
    final_score,
    format_leaderboard_text,
    leaderboard,
    leaderboard_markdown,
    normalised,
    parse_weights,
    published_gt,
    published_leaderboard,
    read_raw_csv,
    write_leaderboard_csv,
    write_raw_csv,
)


def row(model, values, counts=None, provenance=None):
    return RawRow(model, dict(zip(METRICS, map(float, values))), counts, provenance)


GT10 = row("GT", [10] * 8)
PROV = {"profile": "reference", "landmarks": "mediapipe==0.10.21", "headpose": "facemesh-rigid",
        "vad": "silero-vad 5.1 silero_vad.onnx", "tool_version": "0.1.0", "elapsed_s": 12.5,
        "quality": {"Global aesthetic": "topiq_iaa sha256:ab12", "Mouth quality": "musiq sha256:cd34",
                    "Face quality": "topiq_nr-face sha256:ef56"}}


# ------------------------------------------------------------------ (a) published leaderboard
def test_published_final_score_is_the_mean_of_its_8_normalised_columns():
    published = published_leaderboard()
    assert len(published) == 17
    finals = [final_score(p["scores"]) for p in published]
    for p, final in zip(published, finals):
        # The published columns are themselves rounded to 4 decimals, so their mean can differ from
        # the published final by one unit in the 4th decimal (EchoMimic, OmniAvatar, Wav2Lip);
        # 14 of 17 agree exactly once rounded.
        assert abs(final - p["final"]) <= 1e-4 + 1e-12, p["model"]
    assert sum(round(f, 4) == p["final"] for p, f in zip(published, finals)) == 14
    # and the published order is the order of the recomputed finals
    assert sorted(finals, reverse=True) == finals


# ------------------------------------------------------------------ (b), (c), (h) the formula
def test_gt_row_scores_one_everywhere():
    board = leaderboard([row("M", [9] * 8), row("GT", [4, 20, 0.4, 1.7, 18, 0.007, 0.03, 0.25])])
    gt = board.row("GT")
    assert gt.is_gt and gt.rank is None and board.rows[0] is gt
    assert all(v == 1.0 for v in gt.scores.values())
    assert all(v == 1.0 for v in gt.groups.values()) and gt.final == 1.0


def test_final_score_worked_example():
    board = leaderboard([GT10, row("M", [12, 5, 10, 15, 10, 5, 10, 0])])
    m = board.row("M")
    assert [m.scores[k] for k in METRICS] == pytest.approx([0.8, 0.5, 1, 0.5, 1, 0.5, 1, 0])
    assert m.final == pytest.approx(0.6625)
    assert m.groups == pytest.approx({"Quality": 2.3 / 3, "Naturalness": 2 / 3,
                                      "Synchronization": 0.5})
    assert m.rank == 1


def test_normalised_is_not_clamped():
    assert normalised(35, 10) == pytest.approx(-1.5)
    assert normalised(-5, -10) == pytest.approx(0.5)  # |g| in the denominator


def test_published_gt_row_scores_itself_one():
    gt = published_gt()
    assert gt.model == "GT" and gt.values["Head motion dynamics"] == 18.46757
    assert gt.provenance["source"] == "published"
    board = leaderboard([gt, RawRow("copy", dict(gt.values), None, dict(gt.provenance))])
    for r in board.rows:
        assert r.final == 1.0 and all(s == 1.0 for s in r.scores.values())
    assert board.row("copy").rank == 1


# ------------------------------------------------------------------ (d), (j) weights
def test_weights_weighted_mean():
    board = leaderboard([row("GT", [1] * 8), row("M", [2, 2, 1, 1, 1, 1, 1, 1])],
                        weights={"Global aesthetic": 2, "Mouth quality": 0})
    assert board.row("M").final == pytest.approx(0.75)
    # groups stay unweighted means of their members
    assert board.row("M").groups["Quality"] == pytest.approx(1 / 3)


def test_parse_weights_forms(tmp_path):
    expected = dict.fromkeys(METRICS, 1.0) | {"Global aesthetic": 2.0, "Lip sync": 0.0}
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"global_aesthetic": 2, "LIPSYNC": 0}))
    assert parse_weights('{"Global aesthetic": 2, "Lip sync": 0}') == expected
    assert parse_weights(str(path)) == expected
    assert parse_weights(" global aesthetics = 2 , lip-sync=0 ") == expected
    assert parse_weights({"Global aesthetic": 2, "mean difference": 0}) == expected
    assert parse_weights(None) == dict.fromkeys(METRICS, 1.0)


@pytest.mark.parametrize("spec, message", [
    ("Nose quality=2", "unknown metric"),
    ({"Lip sync": -1}, ">= 0"),
    (",".join(f"{m}=0" for m in METRICS), "all weights are 0"),
    ("Lip sync", "not Metric=weight"),
    ("Lip sync=abc", "not a number"),
    ('{"Lip sync": ', "invalid JSON"),
    ("[1, 2]", "not Metric=weight"),
    ("missing.json", "cannot read weights file"),
    ("lipsync=1,Lip sync=2", "given twice"),
])
def test_parse_weights_errors(spec, message):
    with pytest.raises(ScoringError, match=message):
        parse_weights(spec)


# ------------------------------------------------------------------ (e) zero GT
def test_zero_or_nan_gt_value_is_refused_naming_the_metric():
    with pytest.raises(ScoringError, match="Eyebrow dynamics") as err:
        leaderboard([row("GT", [1, 1, 1, 1, 1, 0, 1, 1]), row("M", [1] * 8)])
    assert isinstance(err.value, UserError)
    with pytest.raises(ScoringError, match="Lip sync"):
        leaderboard([row("GT", [1] * 7 + [math.nan]), row("M", [1] * 8)])
    with pytest.raises(ScoringError, match="Mouth quality"):
        normalised(1.0, 1e-12, "Mouth quality")


def test_missing_gt_row_is_an_error():
    with pytest.raises(ScoringError, match="no GT row named 'Real'"):
        leaderboard([GT10], gt_name="Real")


# ------------------------------------------------------------------ (f) ranks and NaN
def test_ties_share_the_lower_rank():
    board = leaderboard([GT10, row("A", [9] * 8), row("B", [8] * 8), row("C", [9] * 8),
                         row("D", [7] * 8)])
    assert {r.model: r.rank for r in board.rows} == {"GT": None, "A": 1, "C": 1, "B": 3, "D": 4}
    assert [r.model for r in board.rows] == ["GT", "A", "C", "B", "D"]


def test_nan_metric_gives_nan_final_listed_last_with_a_note():
    board = leaderboard([GT10, row("N", [10] * 7 + [math.nan]), row("A", [9] * 8)])
    n = board.rows[-1]
    assert n.model == "N" and n.rank is None and math.isnan(n.final)
    assert math.isnan(n.groups["Synchronization"]) and n.groups["Quality"] == 1.0
    assert "Lip sync" in n.note
    # weight 0 on the missing metric ranks the row without it, and says so
    board = leaderboard([GT10, row("N", [10] * 7 + [math.nan])], weights="Lip sync=0")
    assert board.row("N").final == 1.0 and board.row("N").rank == 1
    assert "weight 0" in board.row("N").note


# ------------------------------------------------------------------ (g), (k) CSV files
def test_reads_reference_layout_with_aliases_and_extra_columns(tmp_path):
    path = tmp_path / "raw.csv"
    path.write_text(
        "method,Global Aesthetics,mouth_quality,Face quality score,STD over time,head motion,"
        "Micro-expression intensity,Silent MAD,Mean difference,FVD\n"
        "GT,4.6842,23.835,0.4425,1.716603,18.46757,0.006777,0.0263,0.2528,0\n"
        "ModelX,4.5,22,0.4,1.5,20,0.007,0.03,0.3,123.4\n")
    rows = read_raw_csv(path)  # no "Model" column: the first column holds the names
    assert [r.model for r in rows] == ["GT", "ModelX"]
    assert list(rows[1].values) == list(METRICS)
    assert rows[1].values["Eyebrow dynamics"] == 0.007 and rows[1].counts is None
    assert leaderboard(rows).row("ModelX").rank == 1


def test_reads_index_column_without_a_header(tmp_path):
    path = tmp_path / "raw.csv"
    path.write_text(",Lip sync," + ",".join(METRICS[:-1]) + "\nGT," + ",".join(["1"] * 8) + "\n")
    assert read_raw_csv(path)[0].model == "GT"


@pytest.mark.parametrize("text, message", [
    ("Model,Global aesthetic,Lip sync\nGT,1,1\n", "Mouth quality, Face quality"),
    ("Model," + ",".join(METRICS) + "\nGT,1,1,1,abc,1,1,1,1\n",
     r"row 'GT' \(line 2\), column 'Lip dynamics': 'abc' is not a number"),
    ("Model," + ",".join(METRICS) + ",lipsync\nGT," + ",".join(["1"] * 9) + "\n", "both give"),
    ("Model," + ",".join(METRICS) + "\nGT," + ",".join(["1"] * 8) + "\nGT,"
     + ",".join(["1"] * 8) + "\n", "more than once"),
])
def test_bad_raw_csv_is_refused_with_the_reason(tmp_path, text, message):
    path = tmp_path / "raw.csv"
    path.write_text(text)
    with pytest.raises(ScoringError, match=message):
        read_raw_csv(path)


def test_raw_csv_round_trip_in_reference_layout(tmp_path):
    rows = [row("GT", [4.6842, 23.835, 0.4425, 1.716603, 18.46757, 0.006777, 0.0263, 0.2528],
                counts=dict.fromkeys(METRICS, 30)),
            row("M", [1 / 3, 2, 3, 4, 5, 6, math.nan, 8],
                counts=dict.fromkeys(METRICS, 28) | {"Silent lip stability": 0})]
    path = tmp_path / "out" / "raw.csv"
    write_raw_csv(rows, path)
    header = next(csv.reader(path.open()))
    assert header[:9] == ["Model", *METRICS]  # what the reference code reads
    assert header[9:] == [f"n:{m}" for m in METRICS]
    back = read_raw_csv(path)
    assert [r.model for r in back] == ["GT", "M"] and back[0] == rows[0]
    assert back[1].values["Global aesthetic"] == 1 / 3  # exact, not rounded
    assert math.isnan(back[1].values["Silent lip stability"])
    assert back[1].counts == rows[1].counts


# ------------------------------------------------------------------ (i) backends and profiles
def test_mixed_backends_are_refused_with_every_difference():
    other = json.loads(json.dumps(PROV)) | {"profile": "paper", "tool_version": "9", "elapsed_s": 1}
    other["quality"]["mouth_quality"] = other["quality"].pop("Mouth quality").replace("musiq", "x")
    other["quality"]["Face quality"] = "proxy:piqe"
    with pytest.raises(IncompatibleBackends) as err:
        leaderboard([row("GT", [1] * 8, provenance=PROV), row("M", [1] * 8, provenance=other)])
    assert isinstance(err.value, UserError)
    diffs = err.value.differences
    assert len(diffs) == 3  # tool version and timing are ignored
    assert diffs[0].startswith("profile: GT 'reference' vs M 'paper'")
    assert "Mouth quality" in diffs[1] and "proxy:piqe" in diffs[2]
    assert "profile" in str(err.value) and "Face quality" in str(err.value)

    board = leaderboard([row("GT", [1] * 8, provenance=PROV), row("M", [1] * 8, provenance=other)],
                        allow_mixed=True)
    assert len(board.warnings) == 1 and "MIXED BACKENDS" in board.warnings[0]
    assert "'paper'" in board.warnings[0] and "WARNING: MIXED" in format_leaderboard_text(board)


def test_same_backends_are_compatible_and_missing_provenance_is_flagged():
    same = json.loads(json.dumps(PROV)) | {"tool_version": "0.2.0", "elapsed_s": 99}
    assert check_compatible(PROV, same) == []
    nested = PROV | {"landmarks": {"name": "mediapipe", "version": "0.10.21", "elapsed_s": 3}}
    assert check_compatible(nested, nested | {"landmarks": nested["landmarks"] | {"elapsed_s": 4}}) == []
    newer = nested | {"landmarks": nested["landmarks"] | {"version": "0.10.22"}}
    with pytest.raises(IncompatibleBackends, match="landmarks"):
        check_compatible(nested, newer)
    board = leaderboard([row("GT", [1] * 8, provenance=PROV), row("A", [1] * 8, provenance=same),
                         row("B", [1] * 8)])
    assert len(board.warnings) == 1 and "B" in board.warnings[0]
    assert leaderboard([GT10, row("A", [1] * 8)]).warnings == []  # no provenance anywhere


def test_published_gt_is_allowed_only_for_results_scored_as_the_reference_code():
    gt = published_gt()
    as_reference = PROV | {"published_gt_blockers": []}
    board = leaderboard([gt, row("A", [4] * 8, provenance=as_reference), row("B", [4] * 8)])
    assert len(board.warnings) == 1 and "PUBLISHED" in board.warnings[0]
    with pytest.raises(IncompatibleBackends, match="profile"):
        leaderboard([gt, row("A", [4] * 8, provenance=as_reference | {"profile": "paper"})])
    # every departure the run recorded is a refusal, with its reason
    single = as_reference | {"published_gt_blockers": ["single FaceMesh pass (--single-pass)", "frame stride 2"]}
    with pytest.raises(IncompatibleBackends, match="single FaceMesh pass") as err:
        check_compatible(PUBLISHED_PROVENANCE, single, "A")
    assert len(err.value.differences) == 2 and "frame stride 2" in err.value.differences[1]
    # a result that does not say (an older run) is refused too
    with pytest.raises(IncompatibleBackends, match="score it again"):
        check_compatible(PUBLISHED_PROVENANCE, PROV, "A")


def test_gt_and_models_must_share_frames_translation_and_audio_extraction():
    base = PROV | {"frames": "all", "normalise_translation": False, "audio": "moviepy"}
    for key, other in (("frames", "every 2th"), ("normalise_translation", True), ("audio", "native")):
        with pytest.raises(IncompatibleBackends, match=key):
            check_compatible(base, base | {key: other}, "A")
    assert check_compatible(base, dict(base), "A") == []


# ------------------------------------------------------------------ (l) outputs
def test_markdown_has_one_row_per_model_and_the_counts():
    board = leaderboard([row("GT", [10] * 8, counts=dict.fromkeys(METRICS, 30)),
                         row("A", [9] * 8, counts=dict.fromkeys(METRICS, 30) | {"Lip sync": 27}),
                         row("B|x", [8] * 8)])
    md = leaderboard_markdown(board)
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 3  # header, separator, GT + 2 models
    assert table[0].split(" | ")[2:4] == ["Global aesthetic", "Mouth quality"]
    assert table[0].endswith("| Quality | Naturalness | Synchronization | Final score | Videos |")
    assert table[2].endswith("| n=30 |") and table[3].startswith("| 1 | A | 0.9000 |")
    assert table[3].endswith("| 0.9000 | n=27..30 |") and "B\\|x" in table[4]


def test_leaderboard_csv_has_per_metric_counts(tmp_path):
    board = leaderboard([GT10, row("A", [9] * 8, counts=dict.fromkeys(METRICS, 5))])
    path = tmp_path / "leaderboard.csv"
    write_leaderboard_csv(board, path)
    lines = list(csv.DictReader(path.open()))
    assert [r["Model"] for r in lines] == ["GT", "A"]
    assert lines[1]["Rank"] == "1" and lines[1]["Final score"] == "0.9000"
    assert lines[1]["n:Lip sync"] == "5" and set(GROUPS) <= set(lines[1])


def test_score_command_end_to_end(tmp_path, capsys):
    raw = tmp_path / "raw.csv"
    write_raw_csv([row("A", [4.6842, 23.835, 0.4425, 1.716603, 18.46757, 0.006777, 0.0263, 0.2]),
                   row("B", [4, 20, 0.4, 1.5, 20, 0.007, 0.03, 0.3])], raw)
    parser = argparse.ArgumentParser()
    score_command.register(parser.add_subparsers())
    args = parser.parse_args(["score", "--metrics", str(raw), "--gt-published",
                              "--out", str(tmp_path / "out")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "PUBLISHED" in out and (tmp_path / "out" / "leaderboard.md").exists()
    assert (tmp_path / "out" / "leaderboard.csv").exists()
    board = score_command.score_file(raw, gt_published=True)
    assert board.row("A").rank == 1
    assert board.row("A").final == pytest.approx(1 - (0.0528 / 0.2528) / 8)


def test_canonical_metric_aliases():
    assert canonical_metric("Head-Motion Dynamic") == "Head motion dynamics"
    assert canonical_metric("head_motion") == "Head motion dynamics"
    assert canonical_metric("silence_lip_stability") == "Silent lip stability"
    assert canonical_metric("FVD") is None
