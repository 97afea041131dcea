"""Layer 2, backends: media decoding, landmarks, head pose, quality and audio models, each usable alone."""
