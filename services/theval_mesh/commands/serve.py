"""`theval serve SERVICE`: run one service of the gRPC metric mesh."""
import importlib

from theval_mesh.rpc import config
from theval_mesh.rpc.server import serve, setup_logging

# Imported by name, only the one served: a landmarks process loads neither torch nor Ray.
SERVICE_MODULES = {
    "landmarks": "theval_mesh.rpc.servicers.landmarks",
    "headpose": "theval_mesh.rpc.servicers.headpose",
    "quality": "theval_mesh.rpc.servicers.quality",
    "audio": "theval_mesh.rpc.servicers.audio",
    "evaluator": "theval_mesh.service.evaluator",
}


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
    module = importlib.import_module(SERVICE_MODULES[args.service])
    return serve(cfg, module.register(cfg))
