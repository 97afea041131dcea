"""Final score and leaderboard from raw THEval metric values (docs/metrics.md, "Final Score")."""
from theval_mesh.pure.scoring.compat import PUBLISHED_PROVENANCE, check_compatible, differences, is_published
from theval_mesh.pure.scoring.errors import IncompatibleBackends, ScoringError
from theval_mesh.pure.scoring.final_score import (
                                                  Leaderboard,
                                                  RawRow,
                                                  ScoredRow,
                                                  final_score,
                                                  group_scores,
                                                  leaderboard,
                                                  normalised,
                                                  parse_weights,
)
from theval_mesh.pure.scoring.names import FINAL, GROUPS, KEY_OF, KEYS, METRICS, canonical_metric
from theval_mesh.pure.scoring.tables import (
                                                  format_leaderboard_text,
                                                  leaderboard_markdown,
                                                  published_gt,
                                                  published_leaderboard,
                                                  read_raw_csv,
                                                  write_leaderboard_csv,
                                                  write_raw_csv,
)

__all__ = [
    "FINAL", "GROUPS", "IncompatibleBackends", "KEYS", "KEY_OF", "Leaderboard", "METRICS",
    "PUBLISHED_PROVENANCE", "RawRow", "ScoredRow", "ScoringError", "canonical_metric",
    "check_compatible", "differences", "final_score", "format_leaderboard_text", "group_scores",
    "is_published", "leaderboard", "leaderboard_markdown", "normalised", "parse_weights",
    "published_gt", "published_leaderboard", "read_raw_csv", "write_leaderboard_csv",
    "write_raw_csv",
]
