"""The repository's scripts. They run as files (`python scripts/NAME.py`, or through ./dev), and the
tests and benchmarks import them as the package `scripts` from the repository's root
(`from scripts import containers, images, k8s`). A script that uses another imports it as
`scripts.NAME` when it is imported itself, as `NAME` when it runs as a file (scripts/ is then first
on sys.path): no sys.path change either way."""
