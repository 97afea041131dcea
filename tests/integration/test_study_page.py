"""`theval study serve` for real: its server on loopback with real videos, the page in headless
chromium (Debian's, driven by Playwright). A rater answers every pair by mouse and keyboard, a
reload resumes, the store and the exported CSV hold what was clicked; requests without the token,
forged answers and paths out of the folders are refused."""
import contextlib
import csv
import http.client
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

from tests.support.browser import artefacts, browser_page
from tests.support.video_files import tone, write_video
from theval_mesh.commands.cli import main
from theval_mesh.stores.study_store import EXPORT_COLUMNS
from theval_mesh.studies.study_server import WORKERS, load_study, make_server, url_of

pytestmark = pytest.mark.slow  # chromium: ~10 s

MODELS = {"alpha": (200, 60, 60), "beta": (60, 60, 200)}  # a colour each, to tell them apart on screenshots
NAMES = ("clip1", "clip2", "clip3")
SIDES = {0: "left", 1: "right", 2: "left"}  # the answer to the k-th pair shown; the 2nd by keyboard


def write_model(folder: Path, colour) -> Path:
    """1 s videos with a 440 Hz tone, a moving bar over the model's colour."""
    folder.mkdir(parents=True)
    for n, name in enumerate(NAMES):
        images = []
        for i in range(25):
            img = np.full((96, 128, 3), colour, np.uint8)
            img[:, (i * 5 + n * 20) % 128:][:, :8] = 255
            images.append(img)
        write_video(folder / f"{name}.mp4", images, audio=tone(1.0))
    return folder


@contextlib.contextmanager
def serving(tmp_path, **timeouts):
    """(study, base URL, URL with the token, store path): the server runs in a thread."""
    folders = [str(write_model(tmp_path / model, colour)) for model, colour in MODELS.items()]
    (tmp_path / "alpha" / "unpaired.mp4").write_bytes((tmp_path / "alpha" / "clip1.mp4").read_bytes())
    store_path = tmp_path / "results" / "study.sqlite"
    s = load_study(folders, str(store_path), "tester", seed=7)
    server = make_server(s, "127.0.0.1", 0, **timeouts)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = url_of(server, s)
    try:
        yield s, url.split("/?")[0], url, store_path
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
        s.store.close()


@pytest.fixture
def study(tmp_path):
    with serving(tmp_path) as served:
        yield served


def request(base, method, path, body=None, headers=None):
    """(status, headers, body) of one raw request: the path goes as given, '..' and all."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request(method, path, body, headers or {})
        reply = conn.getresponse()
        return reply.status, dict(reply.getheaders()), reply.read()
    finally:
        conn.close()


def cookie_of(base, url) -> str:
    status, headers, _ = request(base, "GET", "/?" + urlsplit(url).query)
    assert status == 303 and "SameSite=Strict" in headers["Set-Cookie"] and "HttpOnly" in headers["Set-Cookie"]
    return headers["Set-Cookie"].split(";")[0]


def videos_ready(page):
    page.wait_for_function("() => [...document.querySelectorAll('video')].every("
                           "v => v.readyState >= 2 && !v.error && v.videoWidth > 0)", timeout=15000)
    assert page.locator("video").count() == 2


def seek(page, selector, seconds) -> float:
    """Seek a video and wait until it shows that frame; its time then."""
    return page.eval_on_selector(selector, """(v, t) => new Promise((done, fail) => {
        v.addEventListener("seeked", () => done(v.currentTime), {once: true});
        v.addEventListener("error", () => fail(new Error("video error " + v.error.code)), {once: true});
        v.currentTime = t;
    })""", seconds)


def test_a_rater_answers_every_pair_in_chromium(study, tmp_path):
    s, base, url, store_path = study
    total = len(s.pairs)
    assert total == len(NAMES)  # alpha and beta share 3 names; 'unpaired' has no partner
    shot = artefacts(tmp_path) / "study-page.png"
    with browser_page((1200, 800)) as (page, log):
        errors, requests = log["console"], log["requests"]
        page.goto(url)
        assert page.url == base + "/"  # the token went into the cookie, out of the address bar
        assert page.inner_text("h1") == "Which video looks more realistic?"
        shown = []
        for k in range(total):
            assert page.inner_text("#progress") == f"pair {k + 1} of {total}"
            videos_ready(page)
            index = int(page.get_attribute("input[name=pair]", "value"))
            shown.append(index)
            if k == 0:
                assert seek(page, "#left", 0.6) >= 0.5  # served by ranges: the player seeks
                page.screenshot(path=str(shot))
                print(f"study page screenshot: {shot}")
            if k == 1:  # reload, and come back by the printed URL: the same pair, not asked twice
                page.reload()
                page.goto(url)
                assert page.inner_text("#progress") == f"pair 2 of {total}"
                assert int(page.get_attribute("input[name=pair]", "value")) == index
                with page.expect_navigation():
                    page.keyboard.press("ArrowRight" if SIDES[k] == "right" else "ArrowLeft")
            else:
                with page.expect_navigation():
                    page.click(f"#choose-{SIDES[k]}")
        assert page.inner_text("#done") == "Thank you!"
        assert f"You answered {total} pairs" in page.inner_text("#count")
        assert errors == []
        assert all(r.startswith(base + "/") for r in requests), requests  # nothing from the network

    assert sorted(shown) == list(range(total))
    rows = {r["pair_index"]: r for r in s.store.rows(s.id)}
    assert sorted(rows) == list(range(total))  # exactly one row per pair
    expected = []
    for k, index in enumerate(shown):
        pair, row = s.pairs[index], rows[index]
        assert (row["model_a"], row["video_a"], row["model_b"], row["video_b"]) == \
            (pair.left_model, pair.left_video, pair.right_model, pair.right_video)
        assert row["preferred"] == (row["model_a"] if SIDES[k] == "left" else row["model_b"])
        assert row["rater"] == "tester" and row["shown_at"] <= row["answered_at"]
        expected.append({"model_a": row["model_a"], "model_b": row["model_b"], "preferred": row["preferred"],
                         "video_a": row["video_a"], "video_b": row["video_b"], "rater": "tester"})
    assert {(e["video_a"], e["video_b"]) for e in expected} == {(f"{n}.mp4", f"{n}.mp4") for n in NAMES}

    out = tmp_path / "prefs.csv"
    assert main(["study", "export", "--store", str(store_path), "--out", str(out)]) == 0
    with out.open(newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == EXPORT_COLUMNS
        assert sorted(reader, key=lambda r: r["video_a"]) == sorted(expected, key=lambda r: r["video_a"])


def test_requests_without_the_token_and_paths_out_of_the_folders_are_refused(study):
    s, base, url, _ = study
    vid = next(iter(s.files))
    for path in ("/", f"/video/{vid}", "/?token=wrong", "/favicon.ico"):
        assert request(base, "GET", path)[0] == 403, path
    assert request(base, "GET", "/", headers={"Cookie": "theval_study_1=" + s.token})[0] == 403  # another port's
    cookie = {"Cookie": cookie_of(base, url)}
    assert request(base, "GET", "/", headers=cookie)[0] == 200

    status, headers, body = request(base, "GET", f"/video/{vid}", headers={**cookie, "Range": "bytes=4-11"})
    data = s.files[vid].read_bytes()
    assert (status, body, headers["Content-Range"]) == (206, data[4:12], f"bytes 4-11/{len(data)}")
    assert request(base, "GET", f"/video/{vid}", headers={**cookie, "Range": f"bytes={len(data)}-"})[0] == 416

    secret = Path(s.folders["alpha"]).parent / "secret.txt"
    secret.write_text("not a video")
    for path in ("/video/../secret.txt", "/video/..%2Fsecret.txt", "/video/%2e%2e/%2e%2e/etc/passwd",
                 "/../../../etc/passwd", f"/video/{vid}/../../secret.txt", "/video/alpha/clip1.mp4",
                 "/video/" + str(s.files[vid])):
        status, _, body = request(base, "GET", path, headers=cookie)
        assert status == 404 and b"not a video" not in body and b"root:" not in body, path

    form = {**cookie, "Content-Type": "application/x-www-form-urlencoded"}
    pair = s.next_pair().index
    assert request(base, "POST", "/answer", f"pair={pair}&side=left", form)[0] == 403  # no form token: CSRF
    assert request(base, "POST", "/answer", f"token={s.token}&pair={pair}&side=left",
                   {"Content-Type": "application/x-www-form-urlencoded"})[0] == 403  # no cookie
    for bad in (f"pair={pair}&side=up", f"pair={len(s.pairs)}&side=left", "pair=-1&side=left", "side=left",
                f"pair={(pair + 1) % len(s.pairs)}&side=left"):  # the last: a pair not shown yet
        assert request(base, "POST", "/answer", f"token={s.token}&{bad}", form)[0] == 400, bad
    assert s.store.answered(s.id, s.rater) == set()
    assert request(base, "POST", "/answer", f"token={s.token}&pair={pair}&side=right", form)[0] == 303
    assert s.store.answered(s.id, s.rater) == {pair}


def test_idle_connections_hold_no_thread_and_are_closed_after_the_idle_timeout(tmp_path):
    """Before: a thread per connection, for as long as the client kept it open."""
    with serving(tmp_path, idle_timeout=3.0, io_timeout=3.0) as (s, base, url, _):
        cookie = {"Cookie": cookie_of(base, url)}
        address = (urlsplit(base).hostname, urlsplit(base).port)
        threads = threading.active_count()
        # A generous socket timeout: a busy machine may close them late, never not at all.
        start = time.monotonic()  # before any is opened: the last is closed 3 s after it opened, at least
        idle = [socket.create_connection(address, timeout=30) for _ in range(50)]
        stalled = socket.create_connection(address, timeout=30)
        stalled.sendall(b"GET / HTTP/1.0\r\nCook")  # a request that stops half way
        try:
            assert request(base, "GET", "/", headers=cookie)[0] == 200
            # 51 connections open and no more threads than the workers: they hold none
            assert threading.active_count() - threads <= WORKERS
            for sock in idle + [stalled]:
                assert sock.recv(1) == b"", "closed by the server: end of stream"
            assert time.monotonic() - start > 2.7  # not before the idle timeout
            assert request(base, "GET", "/", headers=cookie)[0] == 200
        finally:
            for sock in idle + [stalled]:
                sock.close()


def test_malformed_parameters_are_answered_400(study):
    """Before: pair=² (a digit to str.isdigit, not to int) dropped the connection."""
    s, base, url, _ = study
    cookie = {"Cookie": cookie_of(base, url)}
    form = {**cookie, "Content-Type": "application/x-www-form-urlencoded"}
    assert request(base, "GET", "/", headers=cookie)[0] == 200  # a pair shown
    pair = s.next_pair().index
    for bad in ("pair=%C2%B2", "pair=\u00b2".encode(), "pair=%D9%A1", "pair=", "pair=+0", "pair=0x0", "pair=1e0",
                "pair=%200", "pair=%FF", "pair=" + "9" * 30, f"pair={pair}&side=%00", f"pair={pair}&side=%C2%B2"):
        body = bad if isinstance(bad, bytes) else bad.encode()
        body = f"token={s.token}&side=left&".encode() + body if b"side=" not in body else \
            f"token={s.token}&".encode() + body
        assert request(base, "POST", "/answer", body, form)[0] == 400, bad
    for length in ("\u00b2", "-1", "+5", "1_0", "0x10", "", "9" * 30):
        headers = {**form, "Content-Length": length}
        assert request(base, "POST", "/answer", f"token={s.token}&pair={pair}&side=left", headers)[0] == 400, length
    vid = next(iter(s.files))
    assert request(base, "GET", f"/video/{vid}", headers={**cookie, "Range": "bytes=\u00b2-"})[0] == 200  # ignored
    assert s.store.answered(s.id, s.rater) == set()


def until_closed(sock) -> bytes:
    """What the server sent before it closed the connection (a reset, as the client kept sending, too)."""
    data = b""
    try:
        while chunk := sock.recv(1 << 16):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_clients_trickling_their_requests_hold_no_worker_and_are_cut_at_the_deadline(tmp_path):
    """Before: eight clients each sending one header byte every 9 s (under the 10 s read timeout)
    held the eight workers, and a rater's requests went unanswered. Now a request's head is read
    without a thread and within the idle timeout in all, its body within the io timeout in all."""
    with serving(tmp_path, idle_timeout=3.0, io_timeout=3.0) as (s, base, url, _):
        cookie = cookie_of(base, url)
        address = (urlsplit(base).hostname, urlsplit(base).port)
        heads = [socket.create_connection(address, timeout=30) for _ in range(2 * WORKERS)]
        # Complete heads whose bodies trickle: each holds a worker, but only until the io timeout.
        bodies = [socket.create_connection(address, timeout=30) for _ in range(WORKERS)]
        for sock in bodies:
            sock.sendall(f"POST /answer HTTP/1.0\r\nCookie: {cookie}\r\nContent-Length: 100\r\n\r\nx".encode())
        stop, start = threading.Event(), time.monotonic()

        def trickle():
            while not stop.is_set():
                for sock in heads + bodies:
                    try:
                        sock.send(b"a")
                    except OSError:
                        pass
                stop.wait(0.5)  # a byte every half second: each read is quick, the whole never ends

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        try:
            answered = [request(base, "GET", "/", headers={"Cookie": cookie})[0] for _ in range(5)]
            assert answered == [200] * 5  # the rater is served meanwhile (after the bodies' 3 s at most)
            for sock in heads + bodies:
                assert until_closed(sock) == b"", "closed without an answer"
            assert time.monotonic() - start < 25  # cut at their deadlines, not when they stop sending
        finally:
            stop.set()
            thread.join()
            for sock in heads + bodies:
                sock.close()
