"""Headless Debian chromium driven by Playwright (its own browser downloads need the internet):
one page whose console errors, page errors and network requests are recorded; screenshots go
to $THEVAL_TEST_ARTEFACTS when set (CI keeps them), else to the test's tmp folder."""
import contextlib
import os
import shutil
from pathlib import Path


def artefacts(tmp_path) -> Path:
    folder = Path(os.environ.get("THEVAL_TEST_ARTEFACTS") or tmp_path / "artefacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def browser_page(viewport=(1400, 1000)):
    """(page, log): log["console"] holds console errors and page errors, log["requests"] every
    request the page made (URL)."""
    from playwright.sync_api import sync_playwright
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is not installed (./dev test installs it)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            log = {"console": [], "requests": []}
            page.on("console", lambda m: m.type == "error" and log["console"].append(m.text))
            page.on("pageerror", lambda e: log["console"].append(f"page error: {e}"))
            page.on("request", lambda r: log["requests"].append(r.url))
            yield page, log
        finally:
            browser.close()
