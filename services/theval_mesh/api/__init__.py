"""The THEval gRPC API (versioned packages)."""
