"""Where a store lives: a SQLite file, or a PostgreSQL server's `postgresql://` URL."""
from urllib.parse import urlsplit, urlunsplit


def is_server(location) -> bool:
    return str(location).startswith(("postgresql://", "postgres://"))


def shown(location) -> str:
    """The location as messages show it: a URL without its password."""
    text = str(location)
    if not is_server(text):
        return text
    parts = urlsplit(text)
    if parts.password is None:
        return text
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
