"""`theval cache status|clear`: the result cache (stores.result_cache) that lets a run reuse what an
earlier run scored from the same bytes with the same settings, backends and tool version."""
import json
import os
import sys

from theval_mesh.pure.errors import UserError
from theval_mesh.pure.store_location import is_server, shown


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "cache", help="show or clear the result cache",
        description="Every scored video's result is kept under its bytes' sha256, the run settings, every "
                    "backend's identity and the tool version; a later run with the same key reuses it. "
                    "`status` shows its size, `clear` empties it.")
    p.add_argument("action", choices=["status", "clear"])
    p.add_argument("--cache", default=None, metavar="FILE|URL",
                   help="the cache (default $THEVAL_CACHE or ~/.cache/theval/results-cache.sqlite)")
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from theval_mesh.stores.result_cache import ResultCache, location
    where = location(args.cache or True)
    if where is None:
        raise UserError("the result cache is off ($THEVAL_CACHE=off): give --cache FILE|URL")
    if not is_server(where) and not os.path.exists(os.path.expanduser(where)):
        print(json.dumps({"location": where, "entries": 0}) if args.json else f"{where}: no cache yet")
        return 0
    try:
        cache = ResultCache(where)
    except UserError as err:
        if args.action == "clear" and not is_server(where):  # a cache is never the only copy: remove it
            os.remove(os.path.expanduser(where))
            print(f"{where}: could not be read ({err}); removed", file=sys.stderr)
            return 0
        raise
    try:
        if args.action == "clear":
            print(f"{shown(where)}: {cache.clear()} result(s) removed")
            return 0
        s = cache.status()
        print(json.dumps(s) if args.json else
              f"{s['location']}: {s['entries']} result(s) of {s['videos']} video file(s), "
              f"{s['bytes'] / 1e6:.1f} MB of {s['max_bytes'] / 1e6:.0f} MB")
        return 0
    finally:
        cache.close()
