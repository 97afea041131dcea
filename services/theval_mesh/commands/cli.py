"""The `theval` console script. Each command lives in its own module with register()."""
import argparse
import difflib
import importlib
import sys

from theval_mesh.commands.extras import missing_extra
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.exit_codes import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK
from theval_mesh.pure.version import VERSION

# module name under theval_mesh.commands -> registered there with register(subparsers)
COMMANDS = ("evaluate", "demo", "score", "synth", "weights", "serve", "mesh", "triton", "bulk", "report", "classic",
            "robustness", "study", "align", "cache")

ALIASES = {"legacy": "classic"}  # earlier command names users may still type -> the command

VERSION_FLAG = "--version"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """only: register just this command, none if it names none (its imports alone: a mesh service
    does not load the models of every other command, which costs seconds and ~1 GB per process)."""
    parser = argparse.ArgumentParser(
        prog="theval", description="THEval: score talking-head videos on 8 metrics and a Final Score.")
    parser.add_argument(VERSION_FLAG, action="version", version=f"theval {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"theval_mesh.commands.{name}").register(sub)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    first = argv[0] if argv else None
    command = ALIASES.get(first, first) if ALIASES.get(first, first) in COMMANDS else None
    args = None
    try:
        parser = build_parser(command or (first if first == VERSION_FLAG else None))
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            refuse_unknown(parser, argv, unknown)
        return int(args.func(args) or EXIT_OK)
    except ModuleNotFoundError as err:  # an extra not installed (the base install has none)
        line = missing_extra(err, command, getattr(args, "service", None))
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("\ninterrupted: finished results are on disk; run the same command again to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code


def refuse_unknown(parser: argparse.ArgumentParser, argv: list[str], unknown: list[str]):
    """argparse's "unrecognized arguments" (exit 2), from the (sub)command's own parser (its usage,
    not the top level's), with the nearest flag of that command for each mistyped one."""
    own = parser
    for word in argv:  # down the commands named: `bulk submit` is submit's parser
        subparsers = next((a for a in own._actions if isinstance(a, argparse._SubParsersAction)), None)
        if subparsers is None:
            break
        own = subparsers.choices.get(word, own)
    flags = [f for action in own._actions for f in action.option_strings]
    words = []
    for word in unknown:
        near = difflib.get_close_matches(word.split("=", 1)[0], flags, n=1) if word.startswith("--") else []
        words.append(f"{word} (did you mean {near[0]}?)" if near else word)
    own.error(f"unrecognized arguments: {' '.join(words)}")


if __name__ == "__main__":
    sys.exit(main())
