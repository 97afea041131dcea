"""Layer 7, api: the public Python API, re-exported by the package (theval_mesh/__init__.py):
evaluate() (evaluation.py), Scorer (scorer.py), Client (client.py), classic() (classic.py),
write_report() and log_to_mlflow() (reports.py)."""
