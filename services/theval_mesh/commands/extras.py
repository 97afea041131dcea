"""Which pyproject extra a command needs when a module is missing: the base install (no extra) runs
`theval --help`, `--version` and the commands that need nothing more; a command that imports a
module of an extra not installed fails in one line naming it (cli.main), never a traceback.
tests/unit/test_extras.py checks each module below against what its extras install."""

# top-level module -> the extras that install it, the smallest first (named in the error)
MODULE_EXTRAS = {
    "cv2": ("landmarks", "quality"),  # OpenCV: mediapipe's and pyiqa's dependency
    "mediapipe": ("landmarks",),
    "torch": ("quality", "facexformer"),
    "torchvision": ("quality", "facexformer"),
    "onnxruntime": ("audio",),
    "pyiqa": ("quality",),
    "skimage": ("synth", "quality"),
    "h5py": ("facexformer",),
    "PIL": ("facexformer", "quality"),
    "tritonclient": ("quality", "audio", "facexformer"),
    "pytriton": ("triton",),
    "ray": ("jobs",),
    "matplotlib": ("jobs",),
    "psycopg": ("jobs",),
    "plotly": ("report",),
    "mlflow": ("mlflow",),
    "python_speech_features": ("classic",),
}

# command -> what to install for its usual run (an extra, or extras joined by commas); a command not
# listed runs on the base install, unless one of its options needs a module above (the hint is then
# that module's extra)
COMMAND_EXTRAS = {
    "evaluate": "worker",  # the embedded default: Ray workers with the models in process
    "demo": "worker,synth",
    "bulk": "worker",
    "synth": "synth",
    "report": "report",
    "classic": "classic",
    "robustness": "worker",
    "mesh": "worker,evaluator",
    "triton": "triton",
    "weights": "quality,facexformer",  # `stand-in` builds the networks (status, verify, fetch: the base)
}


# the extras that install others (pyproject.toml; checked by tests/unit/test_extras.py)
COMPOSITES = {
    "evaluator": ("evaluator", "jobs"),
    "triton": ("triton", "quality", "audio"),
    "worker": ("worker", "landmarks", "facexformer", "quality", "audio", "jobs"),
    "synth": ("synth", "landmarks"),
    "report": ("report", "jobs"),
    "classic": ("classic", "landmarks", "quality"),
    "legacy": ("legacy", "classic"),  # classic's earlier name
}


def _covers(extras: str, extra: str) -> bool:
    """Whether installing `extras` installs `extra` (the composite extras of pyproject.toml)."""
    wanted = {e for name in extras.split(",") for e in COMPOSITES.get(name, (name,))}
    return extra in wanted


def missing_extra(err: ModuleNotFoundError, command: str | None, service: str | None = None) -> str | None:
    """The one-line error for a module an extra installs, None for any other missing module (a bug,
    shown with its traceback). `service`: `theval serve SERVICE`, whose extra is the service's."""
    module = (err.name or "").split(".")[0]
    if module not in MODULE_EXTRAS:
        return None
    extra = MODULE_EXTRAS[module][0]
    hint = service if command == "serve" and service else COMMAND_EXTRAS.get(command or "", extra)
    if not any(_covers(hint, e) for e in MODULE_EXTRAS[module]):
        hint = extra  # an option's module beyond the command's usual extras (e.g. --log-to mlflow)
    else:
        extra = next(e for e in MODULE_EXTRAS[module] if _covers(hint, e))
    who = f"theval {command}" if command else "theval"
    return (f"{who} needs the '{extra}' extra (no module named '{module}'): "
            f"pip install -c constraints.txt '.[{hint}]' in a checkout of the repository")
