"""The names callers give models, reference sets and job inputs: checked the same way by the CLI,
the job store and the mesh."""
import re

from theval_mesh.pure.errors import UserError

NAME = re.compile(r"[\w][\w .:@+()#/-]*")  # letters and digits of any script, and a few separators
MAX_NAME = 128


def check_name(what: str, name: str, max_chars: int = MAX_NAME) -> str:
    """A name a caller gives a model, reference set or job input: 1-max_chars characters,
    letters, digits and . : @ + ( ) # / - _ and spaces inside; the error shows at most 40."""
    if not name or len(name) > max_chars or not NAME.fullmatch(name) or name != name.strip():
        shown = name[:40] + ("..." if len(name) > 40 else "")
        raise UserError(f"{what} {shown!r} ({len(name)} characters): use 1-{max_chars} letters, digits, spaces "
                        "and . : @ + ( ) # / - _ (not at the ends)")
    return name
