"""`theval study serve`: a local web page for a pairwise human-preference study. Two videos of the
same source by two models, side by side; the rater says which looks more realistic.

Secure by default: loopback only unless asked; every request needs the random token printed in the
URL (then kept in a SameSite=Strict, HttpOnly cookie), an answer also carries it in a form field
(CSRF); videos are addressed by opaque ids made at start, never by a path from the client. Bounded:
a few worker threads, a connection costs none until its request arrives, and timeouts close idle
and stalled connections (StudyServer).
"""
import hmac
import html
import io
import re
import secrets
import selectors
import socket
import string
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from theval_mesh.core.inputs import parse_model_arg, videos_in
from theval_mesh.pure.errors import UsageRefused, UserError
from theval_mesh.pure.study_plan import Pair, plan_pairs
from theval_mesh.pure.user_names import check_name
from theval_mesh.stores.study_store import StudyStore

DATA = Path(__file__).resolve().parents[1] / "data"
CONTENT_TYPES = {".mp4": "video/mp4", ".mov": "video/quicktime", ".webm": "video/webm",
                 ".mkv": "video/x-matroska", ".avi": "video/x-msvideo"}
MAX_FORM_BYTES = 4096
CHUNK = 256 * 1024
RANGE = re.compile(r"bytes=([0-9]*)-([0-9]*)")
DIGITS = re.compile(r"[0-9]{1,18}")  # str.isdigit() and int() take other scripts' digits, and int('²') raises
WORKERS = 8            # requests handled at once: a page, two videos' ranges, an answer
IDLE_TIMEOUT_S = 10.0  # a connection that has sent no request this long is closed
IO_TIMEOUT_S = 10.0    # a request's reads and a reply's writes wait this long at most
MAX_WAITING = 256      # connections waiting for their request; past it, the oldest is closed
MAX_QUEUED = 64        # requests waiting for a worker; past it, a new one is answered 503
MAX_HEAD_BYTES = 8192  # a request line and headers: a browser's are well under it
BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\n\r\n"
TOO_LARGE = b"HTTP/1.0 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n\r\n"
END_OF_HEAD = b"\r\n\r\n"


class _Prefixed(io.RawIOBase):
    """A connection's bytes for the handler: the head the selector already read, then the socket,
    every read within one deadline for the whole request (a byte every few seconds would
    otherwise hold a worker: a timeout bounds each read, not their sum)."""

    def __init__(self, head: bytes, connection: socket.socket, deadline: float, io_timeout: float):
        self.head, self.connection, self.deadline = memoryview(head), connection, deadline
        self.io_timeout = io_timeout  # the writes' own, set back after each read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.head:
            n = min(len(buffer), len(self.head))
            buffer[:n], self.head = self.head[:n], self.head[n:]
            return n
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request took longer than its time limit")
        self.connection.settimeout(left)
        try:
            return self.connection.recv_into(buffer)
        finally:
            self.connection.settimeout(self.io_timeout)


@dataclass
class Study:
    id: str
    rater: str
    pairs: list[Pair]
    store: StudyStore
    folders: dict[str, Path]  # model -> its folder
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    files: dict[str, Path] = field(default_factory=dict)  # opaque id -> video file
    ids: dict[tuple[str, str], str] = field(default_factory=dict)  # (model, video) -> opaque id

    def __post_init__(self):
        for pair in self.pairs:
            for model, video in ((pair.left_model, pair.left_video), (pair.right_model, pair.right_video)):
                if (model, video) not in self.ids:
                    vid = secrets.token_urlsafe(12)
                    self.ids[model, video], self.files[vid] = vid, (self.folders[model] / video).resolve()

    def token_ok(self, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(presented.encode(), self.token.encode())

    def next_pair(self) -> Pair | None:
        answered = self.store.answered(self.id, self.rater)
        return next((p for p in self.pairs if p.index not in answered), None)


# ---------------------------------------------------------------------------- setting up
def model_folders(args: list[str]) -> dict[str, Path]:
    """--models entries: DIR (named after the folder) or NAME=DIR."""
    folders = {}
    for text in args:
        if Path(text).is_dir() or "=" not in text:
            name, path = Path(text).resolve().name, text
        else:
            name, path = parse_model_arg(text)
        folder = Path(path)
        if not folder.is_dir():
            raise UserError(f"--models {text}: no such folder")
        check_name("model name", name)
        if name in folders:
            raise UsageRefused(f"model name {name!r} given twice: name them with NAME=DIR")
        folders[name] = folder
    if len(folders) < 2:
        raise UsageRefused("--models: give at least two folders of videos")
    return folders


def videos_by_name(folder: Path) -> dict[str, str]:
    """{name without suffix: path inside the folder} of the folder's videos; only files whose real
    path is inside the folder (a link out of it is not served)."""
    root, found = folder.resolve(), {}
    for video in videos_in(folder):
        if not video.resolve().is_relative_to(root):
            continue
        rel = video.relative_to(folder)
        name = rel.with_suffix("").as_posix()
        if name in found:
            raise UserError(f"{folder}: two videos named {name!r} ({found[name]}, {rel.as_posix()}): "
                            "keep one, pairs are made by name")
        found[name] = rel.as_posix()
    return found


def load_study(models: list[str], store: str, rater: str, seed: int = 0, limit: int | None = None) -> Study:
    """The study of these folders, its answers in the store at `store` (opened last: a mistake in
    the arguments leaves no file behind)."""
    folders = model_folders(models)
    check_name("--rater", rater)
    if limit is not None and limit < 1:
        raise UsageRefused("--pairs: give a number of pairs >= 1")
    study_id, pairs = plan_pairs({m: videos_by_name(f) for m, f in folders.items()}, seed, limit)
    if not pairs:
        raise UserError("no video name is shared by two of the model folders: pairs are made by file name")
    return Study(study_id, rater, pairs, StudyStore(store), folders)


# ---------------------------------------------------------------------------- HTTP
def byte_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """(first, last) byte of a single `Range: bytes=A-B` (or `bytes=-N`: the last N); None to send
    the whole file (no range, or one we ignore, as HTTP allows); "unsatisfiable" past the end."""
    match = RANGE.fullmatch((header or "").strip())
    if not match or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if not first:
        start, end = size - int(last), size - 1
        start = max(start, 0) if int(last) else size  # bytes=-0 asks for nothing
    else:
        start, end = int(first), min(int(last), size - 1) if last else size - 1
    if start >= size or end < start:
        return "unsatisfiable"
    return start, end


def template(name: str) -> string.Template:
    return string.Template((DATA / name).read_text(encoding="utf-8"))


class StudyHandler(BaseHTTPRequestHandler):
    study: Study  # set on the subclass made per server
    cookie: str
    server_version = "theval-study"
    sys_version = ""

    def log_message(self, format, *args):  # quiet, and the token in a URL never reaches a log
        pass

    def setup(self):
        super().setup()
        head, deadline = self.server.take_head(self.connection)
        self.rfile.close()  # the socket's own file: its reads would have no deadline
        self.rfile = io.BufferedReader(_Prefixed(head, self.connection, deadline, self.server.io_timeout))

    # ------------------------------------------------------------------ routes
    def do_GET(self):
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/" and "token" in query:  # the printed URL: keep the token in a cookie, drop it from the URL
            if not self.study.token_ok(query["token"][0]):
                return self.refuse()
            return self.redirect("/", f"{self.cookie}={self.study.token}; Path=/; HttpOnly; SameSite=Strict")
        if not self.study.token_ok(self.cookie_token()):
            return self.refuse()
        if url.path == "/":
            return self.page()
        if url.path.startswith("/video/"):
            return self.video(url.path[len("/video/"):])
        self.send_text(404, "not found")

    def do_POST(self):
        if not self.study.token_ok(self.cookie_token()):
            return self.refuse()
        if urlsplit(self.path).path != "/answer":
            return self.send_text(404, "not found")
        form = self.form()
        if form is None:
            return self.send_text(400, "bad answer: expected a small url-encoded form")
        if not self.study.token_ok(form.get("token")):  # the cookie alone could come from another site's form
            return self.refuse()
        pair, side = self.pair_of(form.get("pair")), form.get("side")
        if pair is None or side not in ("left", "right"):
            return self.send_text(400, "bad answer: expected a pair of this study and side left or right")
        study = self.study
        if not study.store.answer(study.id, study.rater, pair, side) \
                and pair.index not in study.store.answered(study.id, study.rater):
            return self.send_text(400, "bad answer: that pair has not been shown")
        self.redirect("/")  # answered (or already: the first answer stands): the next pair

    # ------------------------------------------------------------------ pages
    def page(self):
        study, nonce = self.study, secrets.token_urlsafe(16)
        pair = study.next_pair()
        if pair is None:
            body = template("study_done.html").substitute(nonce=nonce, count=len(study.pairs))
            return self.send_html(body, nonce)
        study.store.show(study.id, study.rater, pair)
        done = len(study.store.answered(study.id, study.rater))
        body = template("study_page.html").substitute(
            nonce=nonce, number=done + 1, total=len(study.pairs), pair=pair.index, token=html.escape(study.token),
            left_src=f"/video/{study.ids[pair.left_model, pair.left_video]}",
            right_src=f"/video/{study.ids[pair.right_model, pair.right_video]}")
        self.send_html(body, nonce)

    def video(self, vid: str):
        path = self.study.files.get(vid)
        try:
            size = path.stat().st_size if path else None
        except OSError:  # moved or deleted since the server started
            size = None
        if size is None:
            return self.send_text(404, "no such video")
        span = byte_range(self.headers.get("Range"), size)
        if span == "unsatisfiable":
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            return self.end_headers()
        start, end = span or (0, size - 1)
        self.send_response(206 if span else 200)
        self.send_header("Content-Type", CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream"))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        if span:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.copy(path, start, end - start + 1)

    # ------------------------------------------------------------------ helpers
    def copy(self, path: Path, start: int, length: int):
        try:
            with path.open("rb") as f:
                f.seek(start)
                while length > 0:
                    chunk = f.read(min(CHUNK, length))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    length -= len(chunk)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):  # the browser dropped the range it no
            pass                                                        # longer needs, or stopped reading

    def cookie_token(self) -> str | None:
        for part in self.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie:
                return value
        return None

    def form(self) -> dict | None:
        length = self.headers.get("Content-Length", "")
        if not DIGITS.fullmatch(length) or int(length) > MAX_FORM_BYTES:
            return None
        length = int(length)
        fields = parse_qs(self.rfile.read(length).decode("utf-8", "replace"))
        return {k: v[0] for k, v in fields.items()}

    def pair_of(self, text: str | None) -> Pair | None:
        if not text or not DIGITS.fullmatch(text) or int(text) >= len(self.study.pairs):
            return None
        return self.study.pairs[int(text)]

    def refuse(self):
        self.send_text(403, "forbidden: open the URL with the token that `theval study serve` printed")

    def redirect(self, location: str, cookie: str | None = None):
        self.send_response(303)
        self.send_header("Location", location)
        if cookie:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Length", "0")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()

    def send_html(self, body: str, nonce: str):
        csp = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; media-src 'self'; "
               "img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
        self.send_body(200, body, "text/html; charset=utf-8", {"Content-Security-Policy": csp})

    def send_text(self, status: int, text: str):
        self.send_body(status, text + "\n", "text/plain; charset=utf-8")

    def send_body(self, status: int, text: str, content_type: str, headers: dict | None = None):
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class StudyServer(HTTPServer):
    """The study's HTTP server, bounded. A connection waits in serve_forever's selector, costing no
    thread, until its request starts arriving; it is closed after idle_timeout without one (or when
    MAX_WAITING newer ones wait). Its request line and headers are read here too, without a
    thread, within idle_timeout of the connection's start (at most MAX_HEAD_BYTES): a client that
    trickles them holds no worker. Then one of WORKERS threads answers it, the rest of the request
    read within io_timeout in all and every write within io_timeout. (ThreadingHTTPServer held a
    thread per connection for as long as the client kept it open, idle or not.) One request per
    connection (HTTP/1.0), as before."""

    def __init__(self, address, handler, idle_timeout: float = IDLE_TIMEOUT_S, io_timeout: float = IO_TIMEOUT_S):
        self.idle_timeout, self.io_timeout = idle_timeout, io_timeout
        self._workers = ThreadPoolExecutor(WORKERS, thread_name_prefix="study-http")  # threads made as needed
        self._slots = threading.BoundedSemaphore(WORKERS + MAX_QUEUED)
        self._waiting: dict[socket.socket, tuple] = {}  # connection -> (client address, deadline), oldest first
        self._heads: dict[socket.socket, bytes] = {}  # connection -> its request's first bytes
        self._stop, self._stopped = threading.Event(), threading.Event()
        super().__init__(address, handler)  # last: a port in use calls server_close(), which needs the above

    def serve_forever(self, poll_interval: float = 0.5):
        self._stopped.clear()
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self.socket, selectors.EVENT_READ)
                while not self._stop.is_set():
                    for key, _ in selector.select(poll_interval):
                        if key.fileobj is self.socket:
                            self._accept(selector)
                        elif key.fileobj in self._waiting:  # its request is arriving (unless dropped since)
                            self._read_head(selector, key.fileobj)
                    now = time.monotonic()
                    while self._waiting and next(iter(self._waiting.values()))[1] <= now:
                        self._drop(selector, next(iter(self._waiting)))
        finally:
            for connection in self._waiting:
                self.shutdown_request(connection)
            self._waiting.clear()
            self._heads.clear()
            self._stop.clear()
            self._stopped.set()

    def shutdown(self):
        """Stop serve_forever (running in another thread) and wait until it has stopped."""
        self._stop.set()
        self._stopped.wait()

    def server_close(self):
        super().server_close()
        self._workers.shutdown(wait=False, cancel_futures=True)  # running ones end within io_timeout

    def _accept(self, selector):
        try:
            connection, address = self.socket.accept()
        except OSError:  # gone already, or no file descriptor left (the idle ones time out)
            return
        if len(self._waiting) >= MAX_WAITING:  # the oldest: a browser sends its request at once
            self._drop(selector, next(iter(self._waiting)))
        self._waiting[connection] = (address, time.monotonic() + self.idle_timeout)
        selector.register(connection, selectors.EVENT_READ)

    def _drop(self, selector, connection, answer: bytes = b""):
        selector.unregister(connection)
        del self._waiting[connection]
        self._close(connection, answer)

    def _close(self, connection, answer: bytes = b""):
        """Close a connection no worker took, after a short answer when there is one."""
        self._heads.pop(connection, None)
        if answer:
            try:
                connection.setblocking(False)
                connection.send(answer)
            except OSError:
                pass
        self.shutdown_request(connection)

    def _read_head(self, selector, connection):
        """What has arrived of a waiting connection's request; to a worker once its head is whole."""
        head = self._heads.get(connection, b"")
        try:
            connection.setblocking(False)
            got = connection.recv(MAX_HEAD_BYTES + 1 - len(head))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self._drop(selector, connection)
        if not got:  # the client closed it
            return self._drop(selector, connection)
        head += got
        if END_OF_HEAD in head:
            selector.unregister(connection)
            address = self._waiting.pop(connection)[0]
            self._heads[connection] = head
            return self._dispatch(connection, address)
        if len(head) > MAX_HEAD_BYTES:
            return self._drop(selector, connection, TOO_LARGE)
        self._heads[connection] = head

    def take_head(self, connection) -> tuple[bytes, float]:
        """(the request's bytes read so far, the deadline for the rest): for its handler."""
        return self._heads.pop(connection, b""), time.monotonic() + self.io_timeout

    def _dispatch(self, connection, address):
        if not self._slots.acquire(blocking=False):
            return self._close(connection, BUSY)
        self._workers.submit(self._answer, connection, address)

    def _answer(self, connection, address):
        try:
            connection.settimeout(self.io_timeout)
            self.finish_request(connection, address)
        except Exception:  # noqa: BLE001 - one request's failure is not the server's
            self.handle_error(connection, address)
        finally:
            self._heads.pop(connection, None)  # not taken when the handler failed before reading
            self.shutdown_request(connection)
            self._slots.release()

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):  # a client gone: nothing to say
            super().handle_error(request, client_address)


def make_server(study: Study, host: str = "127.0.0.1", port: int = 0, **timeouts) -> StudyServer:
    """The study's server, bound (port 0: any free port), not yet serving: call serve_forever().
    timeouts: idle_timeout, io_timeout (seconds; StudyServer)."""
    server_class = StudyServer
    if ":" in host:  # an IPv6 address
        server_class = type("StudyServer6", (StudyServer,), {"address_family": socket.AF_INET6})
    try:
        server = server_class((host.strip("[]"), port), StudyHandler, **timeouts)
    except OSError as err:
        raise UserError(f"cannot listen on {host}:{port}: {err.strerror}") from None
    # cookies do not tell ports apart: one name per port, so two studies on one host do not clash
    cookie = f"theval_study_{server.server_address[1]}"
    server.RequestHandlerClass = type("BoundStudyHandler", (StudyHandler,), {"study": study, "cookie": cookie})
    return server


def url_of(server: StudyServer, study: Study) -> str:
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={study.token}"
