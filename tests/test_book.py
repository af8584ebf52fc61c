"""The book builds (quick mode: small notebook runs, warnings as errors) and every page reads well.

One quick build is shared by the tests of this module. The browser test serves the built site
on 127.0.0.1 and opens every page of the table of contents in headless Chromium (Debian's
``chromium``; ``make test`` installs it) at 1280 px, and fails on any of:

* an absolute path of the build machine (``/work/``, ``/tmp/``, ``/root/``, ``/home/``) or a
  traceback in the page text, or an error output block;
* a table wider than the page's text column that does not scroll inside its own box;
* an image that does not load;
* a notebook page without its "What this page shows" opening or its computed "Verdict" closing;
* a request for anything outside the site (the book works offline).

It saves a full-page screenshot of every page to ``_build/screenshots/<page>.png``.
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
PAGES_WITH_TABLES = ("02_reproduction", "03_ablations", "results")
#: Text that must never appear on a page: paths of the machine that built it.
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/-])/(?:work|tmp|root|home)/")

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


def test_the_book_stylesheet_is_linked(site):
    """_static/book.css (tables scroll in their own box) is part of every page."""
    assert (site / "_static" / "book.css").is_file()
    assert "_static/book.css" in (site / "book" / "results.html").read_text()


def test_absolute_path_pattern():
    assert ABSOLUTE_PATH.search("saved to /work/main/_build/x.csv")
    assert ABSOLUTE_PATH.search("reading /tmp/pytest-1/book/my_bags.csv")
    assert not ABSOLUTE_PATH.search("see https://example.org/home/page and outputs/07/my_bags.csv")


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

# Tables wider than the text column must sit in a box of their own that scrolls sideways.
_WIDE_TABLES_JS = """
() => {
  const column = document.querySelector("article.bd-article") || document.querySelector("main");
  if (!column) { return ["no article column"]; }
  const right = column.getBoundingClientRect().right + 1;
  const bad = [];
  for (const table of column.querySelectorAll("table")) {
    const box = table.getBoundingClientRect();
    if (box.width === 0 || box.right <= right) { continue; }
    let el = table.parentElement, scrolls = false;
    while (el && el !== column) {
      const style = getComputedStyle(el);
      if ((style.overflowX === "auto" || style.overflowX === "scroll")
          && el.getBoundingClientRect().right <= right) { scrolls = true; break; }
      el = el.parentElement;
    }
    if (!scrolls) {
      const head = (table.innerText || "").trim().split("\\n")[0].slice(0, 60);
      bad.push(`${Math.round(box.width)} px wide, column ends at ${Math.round(right)} px: "${head}"`);
    }
  }
  return bad;
}
"""

# A notebook page opens with "What this page shows" and closes with a "Verdict" section whose
# text was computed by a code cell (an output, not prose).
_SECTIONS_JS = """
() => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  const headings = Array.from(article.querySelectorAll("h2"))
      .map(h => h.innerText.replace(/[#¶]/g, "").trim());
  const verdict = document.querySelector("section#verdict");
  const output = verdict ? Array.from(verdict.querySelectorAll(".cell_output"))
      .map(o => o.innerText.trim()).join(" ") : "";
  return {headings: headings, verdictOutput: output};
}
"""


def _page_problems(page, name: str, stem: str) -> list[str]:
    problems = []
    h1 = page.locator("main h1, article h1, h1").first
    if h1.count() == 0 or not h1.inner_text().strip():
        problems.append("no title (h1)")
    broken = [i["src"] for i in page.evaluate(_IMAGES_JS) if i["width"] == 0]
    if broken:
        problems.append(f"images that did not load: {broken}")
    if stem in PAGES_WITH_TABLES and page.locator("table").count() == 0:
        problems.append("no table")
    if stem == "method" and page.evaluate(_MATH_JS) <= 0:
        problems.append("MathJax typeset no formula")
    errors = page.locator(".output.error, .output.traceback, .ename").count()
    if errors:
        problems.append(f"{errors} error output block(s)")
    text = page.locator("body").inner_text()
    if "Traceback (most recent call last)" in text:
        problems.append("a traceback is shown on the page")
    for found in sorted({m.group(0) for m in ABSOLUTE_PATH.finditer(text)}):
        line = next(ln for ln in text.splitlines() if found in ln)
        problems.append(f"absolute path {found!r} in the page text: {line.strip()[:160]!r}")
    for stderr in page.locator(".output.stderr").all_inner_texts():
        if "Error" in stderr or "Traceback" in stderr:
            problems.append(f"stderr output reports an error: {stderr[:200]!r}")
    for wide in page.evaluate(_WIDE_TABLES_JS):
        problems.append(f"table wider than its column without a scroll box: {wide}")
    if name.startswith("notebooks/"):
        sections = page.evaluate(_SECTIONS_JS)
        headings = sections["headings"]
        if not headings or headings[0] != "What this page shows":
            problems.append(f"does not open with 'What this page shows' (first sections: {headings[:2]})")
        if not headings or headings[-1] != "Verdict":
            problems.append(f"does not end with a 'Verdict' section (last section: {headings[-1:]})")
        elif len(sections["verdictOutput"]) < 40:
            problems.append("its Verdict section shows no computed verdict (no cell output)")
    return problems


def test_every_page_reads_well_in_chromium(site):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (make test installs it: apt-get install chromium)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright

    server, _ = _serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    if SCREENSHOTS.exists():
        shutil.rmtree(SCREENSHOTS)
    SCREENSHOTS.mkdir(parents=True)
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
                stem = name.rsplit("/", 1)[-1]
                response = page.goto(f"{base}/{name}.html", wait_until="load")
                if response is None or response.status != 200:
                    problems.append(f"{name}: HTTP {None if response is None else response.status}")
                    continue
                problems += [f"{name}: {p}" for p in _page_problems(page, name, stem)]
                path = SCREENSHOTS / f"{stem}.png"
                page.screenshot(path=str(path), full_page=True)
                shots.append(path)
            browser.close()
    finally:
        server.shutdown()
    print(f"\n{len(shots)} full-page screenshots in {SCREENSHOTS.relative_to(REPO)}/")
    assert not problems, "\n".join(problems)
    assert not outside, f"pages requested resources outside the site (the book must work offline): {outside[:10]}"
    assert len(shots) == len(toc_files())
