"""Layer 1, pure: the metric math, the Final Score, run settings, the table of the mesh's services and
errors. No I/O, no gRPC, no Ray."""
