"""The networks on an inference runtime: which runtime, device and precision (plan), their export
to ONNX (export), where each is cut out of its torch code (networks), the sessions (sessions)."""
