"""The landmark backend's name and version, read without importing MediaPipe: the result cache's
key is made before any model loads (and a run whose videos are all cached loads none)."""
from importlib.metadata import version

BACKEND = f"mediapipe-facemesh {version('mediapipe')}"
