"""Layer 1, pure: the metric math, the Final Score, run settings and errors. No I/O, no gRPC, no Ray."""
