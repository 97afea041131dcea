"""Exit codes of every `theval` command and mesh process."""
EXIT_OK = 0
EXIT_ERROR = 1     # nothing usable: a bad argument, a missing file, a port in use
EXIT_USAGE = 2     # argparse's own, and inputs refused before any work (nothing to score, a GT that cannot normalise)
EXIT_PARTIAL = 3   # finished, but some videos failed or could not be scored on every metric
EXIT_NOT_RANKED = 4  # every video scored and its per-video results written, but no leaderboard could be formed
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
