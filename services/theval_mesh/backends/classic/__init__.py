"""The classic metrics' networks (SyncNet, FID Inception, FVD I3D), from the weights store."""
