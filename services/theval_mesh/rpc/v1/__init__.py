"""Generated gRPC code for theval.v1 (protos/generate.py). Do not edit."""
