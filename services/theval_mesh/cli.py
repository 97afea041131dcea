"""The `theval` console script. Each command lives in its own module with register()."""
import argparse
import importlib
import sys

from theval_mesh.common.errors import UserError

# module name under theval_mesh.commands -> registered there with register(subparsers)
COMMANDS = ("evaluate", "demo", "score", "synth", "weights")

# Exit codes shared by every command.
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="theval", description="THEval: score talking-head videos on 8 metrics and a Final Score.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"theval_mesh.commands.{name}").register(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or EXIT_OK)
    except KeyboardInterrupt:
        print("\ninterrupted: finished results are on disk; run the same command again to resume",
              file=sys.stderr)
        return 130
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
