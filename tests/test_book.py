"""The book builds (quick mode: small notebook runs, warnings as errors) and every page renders.

One quick build is shared by the tests of this module. The browser test serves the built site
on 127.0.0.1 and opens every page of the table of contents in headless Chromium (Debian's
``chromium``; ``make test`` installs it), checking titles, images, tables, typeset math, the
absence of error outputs, and that no page requests anything from outside the site. It saves a
few screenshots to ``_build/screenshots/``.
"""
from __future__ import annotations

import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "_build" / "screenshots"

pytestmark = pytest.mark.book

#: Pages that must hold at least one table.
PAGES_WITH_TABLES = ("02_reproduction", "03_ablations", "04_baselines")
#: Pages photographed (file stem -> screenshot name).
SCREENSHOT_PAGES = {"method": "method.png", "02_reproduction": "reproduction.png", "05_mnist_prototypes": "mnist.png"}

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def toc_files(toc_path: Path = REPO / "_toc.yml") -> list[str]:
    """Every file of the table of contents, root first, without suffix."""
    import yaml

    toc = yaml.safe_load(toc_path.read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return files


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Build the book with ``tools/build_book.py --quick``; return the HTML folder."""
    out = tmp_path_factory.mktemp("book")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_book.py"), "--quick", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True,
    )
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        pytest.fail(f"quick book build failed (exit {proc.returncode}) after {seconds:.0f} s:\n"
                    f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
    print(f"\nquick book build: {seconds:.0f} s")
    html = out / "_build" / "html"
    assert (html / "index.html").is_file()
    return html


def test_every_toc_page_is_built(site):
    missing = [f for f in toc_files() if not (site / f"{f}.html").is_file()]
    assert not missing


def test_math_is_served_from_the_book_itself(site):
    """MathJax comes from _static/mathjax (sphinx-mathjax-offline), never from a CDN."""
    method = (site / "book" / "method.html").read_text()
    scripts = re.findall(r'<script[^>]*\bsrc="([^"]+)"', method)
    mathjax = [s for s in scripts if "mathjax" in s.lower()]
    assert mathjax and all(not s.startswith(("http:", "https:", "//")) for s in mathjax), mathjax
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file()
    for page in site.rglob("*.html"):
        text = page.read_text()
        # Scripts, stylesheets and images are resources; <a href> links to the web are fine.
        remote = re.findall(r'<script[^>]*\bsrc="((?:https?:)?//[^"]+)"', text)
        remote += [s for s in re.findall(r'<link[^>]*rel="(?:stylesheet|preload)"[^>]*href="((?:https?:)?//[^"]+)"', text)]
        remote += [s for s in re.findall(r'<img[^>]*\bsrc="((?:https?:)?//[^"]+)"', text)]
        assert not remote, f"{page.relative_to(site)} loads remote resources: {remote}"


def _serve(directory: Path):
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


_IMAGES_JS = """
async () => {
  const imgs = Array.from(document.images);
  for (const img of imgs) { img.loading = "eager"; }
  await Promise.all(imgs.map(img => img.decode().catch(() => null)));
  return imgs.map(img => ({src: img.currentSrc || img.src, width: img.naturalWidth}));
}
"""

_MATH_JS = """
async () => {
  if (!window.MathJax || !MathJax.startup || !MathJax.startup.promise) { return -1; }
  await MathJax.startup.promise;
  return document.querySelectorAll("mjx-container").length;
}
"""


def test_every_page_renders_in_chromium(site):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (make test installs it: apt-get install chromium)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright

    server, _ = _serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    outside: list[str] = []
    shots: list[Path] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("request", lambda r: outside.append(r.url)
                    if not r.url.startswith((base, "data:", "blob:", "about:")) else None)
            for name in toc_files():
                url = f"{base}/{name}.html"
                stem = name.rsplit("/", 1)[-1]
                response = page.goto(url, wait_until="load")
                if response is None or response.status != 200:
                    problems.append(f"{name}: HTTP {None if response is None else response.status}")
                    continue
                h1 = page.locator("main h1, article h1, h1").first
                if h1.count() == 0 or not h1.inner_text().strip():
                    problems.append(f"{name}: no title (h1)")
                broken = [i["src"] for i in page.evaluate(_IMAGES_JS) if i["width"] == 0]
                if broken:
                    problems.append(f"{name}: images that did not load: {broken}")
                if stem in PAGES_WITH_TABLES and page.locator("table").count() == 0:
                    problems.append(f"{name}: no table")
                if stem == "method":
                    typeset = page.evaluate(_MATH_JS)
                    if typeset <= 0:
                        problems.append(f"{name}: MathJax produced no mjx-container (got {typeset})")
                errors = page.locator(".output.error, .output.traceback, .ename").count()
                if errors:
                    problems.append(f"{name}: {errors} error output block(s)")
                text = page.locator("body").inner_text()
                if "Traceback (most recent call last)" in text:
                    problems.append(f"{name}: a traceback is shown on the page")
                for stderr in page.locator(".output.stderr").all_inner_texts():
                    if "Error" in stderr or "Traceback" in stderr:
                        problems.append(f"{name}: stderr output reports an error: {stderr[:200]!r}")
                if stem in SCREENSHOT_PAGES:
                    if stem == "02_reproduction":  # the measured Table 2
                        tables = page.locator("table")
                        tables.nth(min(2, tables.count() - 1)).scroll_into_view_if_needed()
                    elif page.locator(".cell_output img").count():  # the first figure of the page
                        page.locator(".cell_output img").first.scroll_into_view_if_needed()
                    path = SCREENSHOTS / SCREENSHOT_PAGES[stem]
                    page.screenshot(path=str(path), full_page=stem == "method")
                    shots.append(path)
            browser.close()
    finally:
        server.shutdown()
    for path in shots:
        print(f"screenshot: {path}")
    assert not problems, "\n".join(problems)
    assert not outside, f"pages requested resources outside the site (the book must work offline): {outside[:10]}"
    assert len(shots) == len(SCREENSHOT_PAGES)
