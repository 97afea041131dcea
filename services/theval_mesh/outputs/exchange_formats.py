"""Results in the formats other tools read: VBench's per-video JSON and Hugging Face's model-repo
eval results. Pure: values in, documents out (the callers write them)."""
import json
import math
import re


def _number(value) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None


def vbench_results(per_video: dict[str, list[tuple[str, float]]], means: dict[str, float]) -> dict:
    """VBench's `<name>_eval_results.json` (Vchitect/VBench 45e79ec, vbench/__init__.py evaluate,
    e.g. aesthetic_quality.py): {dimension: [the model's value, [{"video_path": path,
    "video_results": value}, ...]]}, one file per model. per_video: dimension -> (video, value) of
    each video; means: dimension -> the model's value (a set-level metric such as FID has no
    per-video list). A value that is not a number is null."""
    return {dimension: [_number(means.get(dimension)),
                        [{"video_path": video, "video_results": _number(value)}
                         for video, value in per_video.get(dimension, [])]]
            for dimension in dict.fromkeys([*per_video, *means])}


def hf_eval_results(dataset_id: str, values: dict[str, float], date: str, notes: dict[str, str] | None = None) -> str:
    """A Hugging Face model repo's `.eval_results/<file>.yaml` (the Hub's "Evaluation Results"
    format): one entry per metric of the model, `dataset.id` the benchmark dataset on the Hub,
    `dataset.task_id` the metric's key, its value, the date and, when given, the metric's notes
    (which implementation and weights computed it). A metric without a value is left out (the
    format requires one). Strings are written as JSON strings, which YAML reads as they are."""
    lines = []
    for task, value in values.items():
        number = _number(value)
        if number is None:
            continue
        lines += ["- dataset:", f"    id: {json.dumps(dataset_id)}", f"    task_id: {json.dumps(task)}",
                  f"  value: {number!r}", f"  date: {json.dumps(date)}"]
        if (notes or {}).get(task):
            lines.append(f"  notes: {json.dumps(notes[task])}")
    return "\n".join(lines) + "\n" if lines else "[]\n"


def file_stem(name: str) -> str:
    """A model's name as a file name: what is not a letter, digit, '.', '-' or '_' becomes '_'."""
    return re.sub(r"[^\w.-]", "_", name).strip(".") or "_"
