"""The weights store: every network's weight files (registry.py) in one directory (store.py)."""
