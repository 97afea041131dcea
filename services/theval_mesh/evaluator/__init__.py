"""Layer 6, evaluator: the evaluator service, the mesh's front door over gRPC: Evaluate composed from the leaf
services, reference sets, leaderboards and bulk jobs (the jobs layer served over gRPC)."""
