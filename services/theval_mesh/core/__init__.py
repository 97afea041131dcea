"""Layer 3, core: scoring ONE video from the backends (stages, frame passes, compute, provenance)."""
