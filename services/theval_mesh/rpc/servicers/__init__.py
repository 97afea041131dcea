"""The gRPC adapters of the mesh: thin servicers over the same backends the embedded engine uses."""
