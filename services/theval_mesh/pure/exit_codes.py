"""Exit codes of every `theval` command and mesh process."""
EXIT_OK = 0
EXIT_ERROR = 1     # nothing usable: a bad argument, a missing file, a port in use
EXIT_USAGE = 2     # argparse's own
EXIT_PARTIAL = 3   # finished, but some videos failed or could not be scored on every metric
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
