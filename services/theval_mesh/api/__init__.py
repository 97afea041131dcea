"""Layer 7, api: the public Python API."""
