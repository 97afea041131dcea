"""Layer 5, rpc: everything gRPC: the generated protocol (v1), wire conversions, clients, servicers and
the server runtime (health, reflection, admission, security, Prometheus, the process launcher, Triton)."""
