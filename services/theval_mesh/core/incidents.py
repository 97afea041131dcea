"""Unexpected errors: logged whole (type, text, traceback) under a short id; whoever asked sees the
id only, never the text, which may hold server paths, nor the traceback."""
import logging
import secrets
import traceback

from theval_mesh.pure.errors import shorten

log = logging.getLogger("theval.internal")


def logged_internal(err: BaseException, where: str = "") -> str:
    """Log `err` with its traceback under a new id; returns the one line to show instead:
    "internal error; see the log (error 1a2b3c4d)". `where` names the work in the log line."""
    error_id = secrets.token_hex(4)
    stack = "".join(traceback.format_tb(err.__traceback__)).rstrip()
    log.error("%sinternal error %s: %s\n%s", f"{where}: " if where else "", error_id, shorten(repr(err)), stack)
    return f"internal error; see the log (error {error_id})"


def logged_for_operator(text: str, shown: str, where: str = "") -> str:
    """Log `text`, a message meant for whoever runs the server (it may name its addresses and
    paths), under a new id; returns `shown` with the id, the one line for a remote caller."""
    error_id = secrets.token_hex(4)
    log.error("%s%s (error %s)", f"{where}: " if where else "", text, error_id)
    return f"{shown}; the evaluator's log has the details (error {error_id})"
