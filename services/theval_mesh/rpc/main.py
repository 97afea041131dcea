"""Run one mesh service in this process: `python -m theval_mesh.rpc.main SERVICE [options]`, what
`theval serve SERVICE` and the mesh launcher start. Each option can also be set by its THEVAL_*
variable (rpc/config.py)."""
import argparse
import importlib
import sys

from theval_mesh.pure.services import TABLE
from theval_mesh.rpc import config
from theval_mesh.rpc.server import serve, setup_logging

# Imported by name, only the one served: a landmarks process loads neither torch nor Ray.
SERVICE_MODULES = {s.name: s.module for s in TABLE}
DESCRIPTION = ("Run one mesh service: gRPC with health and reflection, and Prometheus /metrics. Every option "
               "can also be set by its THEVAL_* variable.")


def add_arguments(p: argparse.ArgumentParser):
    p.add_argument("service", choices=config.SERVICES)
    config.add_options(p)


def run(args) -> int:
    """Serve until SIGTERM or Ctrl-C; returns the exit code (UserError on a bad setting)."""
    cfg = config.load(args.service, args)
    setup_logging()
    return serve(cfg, importlib.import_module(SERVICE_MODULES[args.service]).register(cfg))


def main(argv=None) -> int:
    from theval_mesh.pure.errors import UserError
    from theval_mesh.pure.exit_codes import EXIT_ERROR
    p = argparse.ArgumentParser(prog="python -m theval_mesh.rpc.main", description=DESCRIPTION)
    add_arguments(p)
    try:
        return run(p.parse_args(argv))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
