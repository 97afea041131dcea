"""`theval serve SERVICE`: run one service of the gRPC metric mesh."""
import importlib

from ..common import config
from ..common.server import serve, setup_logging


def register(sub):
    p = sub.add_parser("serve", help="run one service of the gRPC metric mesh",
                       description="Run one mesh service: gRPC with health and reflection, and Prometheus "
                                   "/metrics. Every option can also be set by its THEVAL_* variable.")
    p.add_argument("service", choices=config.SERVICES)
    config.add_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    cfg = config.load(args.service, args)
    setup_logging()
    module = importlib.import_module(f"theval_mesh.servicers.{args.service}")
    return serve(cfg, module.register(cfg))
