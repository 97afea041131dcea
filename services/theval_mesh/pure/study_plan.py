"""Which pairs a pairwise preference study shows, in which order and on which side. Pure and
seeded: the same videos and seed give the same study (its id, order and sides), so a study can be
reproduced and a rater who comes back resumes it."""
import hashlib
import itertools
import json
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    index: int          # 0-based position in the study
    left_model: str
    left_video: str     # the video's path inside its model's folder
    right_model: str
    right_video: str

    def model(self, side: str) -> str:
        return {"left": self.left_model, "right": self.right_model}[side]


def candidates(videos: dict[str, dict[str, str]]) -> list[tuple[str, str, str, str]]:
    """Every (model_a, video_a, model_b, video_b) of two models' videos with the same name.
    videos: {model: {name: video}}, the name identifying the source (audio, identity) across models."""
    found = []
    for model_a, model_b in itertools.combinations(videos, 2):
        for name in sorted(videos[model_a].keys() & videos[model_b].keys()):
            found.append((model_a, videos[model_a][name], model_b, videos[model_b][name]))
    return found


def study_id(pairs: list[tuple[str, str, str, str]], seed: int, limit: int | None) -> str:
    """A short digest of what the study shows: a change of videos, seed or size is another study."""
    text = json.dumps([seed, limit, pairs], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def plan_pairs(videos: dict[str, dict[str, str]], seed: int = 0, limit: int | None = None) -> tuple[str, list[Pair]]:
    """(study id, pairs): the candidates shuffled, the first `limit` kept, each side drawn at random
    (so no model sits on one side), all from an RNG seeded by the study id."""
    found = candidates(videos)
    sid = study_id(found, seed, limit)
    rng = random.Random(sid)
    rng.shuffle(found)
    pairs = []
    for index, (model_a, video_a, model_b, video_b) in enumerate(found[:limit]):
        if rng.random() < 0.5:
            model_a, video_a, model_b, video_b = model_b, video_b, model_a, video_a
        pairs.append(Pair(index, model_a, video_a, model_b, video_b))
    return sid, pairs
