"""`theval serve SERVICE`: run one service of the gRPC metric mesh (rpc/main.py)."""
from theval_mesh.rpc import main as service_main


def register(sub):
    p = sub.add_parser("serve", help="run one service of the gRPC metric mesh", description=service_main.DESCRIPTION)
    service_main.add_arguments(p)
    p.set_defaults(func=service_main.run)
