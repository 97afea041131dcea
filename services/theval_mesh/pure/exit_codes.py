"""Exit codes of every `theval` command and mesh process."""
EXIT_OK = 0
EXIT_ERROR = 1     # nothing usable: a missing file or weights, a mesh that does not answer, a port in use
EXIT_USAGE = 2     # bad usage (argparse's own, a malformed flag value) and inputs refused before any work
EXIT_PARTIAL = 3   # finished, but some videos failed or could not be scored on every metric
EXIT_NOT_RANKED = 4  # every video scored and its per-video results written, but no leaderboard could be formed
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
