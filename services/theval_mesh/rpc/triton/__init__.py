"""Triton serving of the neural models: the model repository (repository.py), its python-backend
models (python_models.py, run by Triton), the bundled server (server.py) and the clients the
quality and audio services use with --backend triton (client.py)."""
