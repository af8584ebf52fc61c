"""The book builds (quick mode: small notebook runs, warnings as errors) and every page reads well.

One quick build is shared by the tests of this module. It runs every notebook once with papermill,
each alone in an empty folder; those runs are checked here too (no failed cell, no path of the
machine in an output, nothing written outside ``outputs/``). The browser test serves the built site
on 127.0.0.1 and opens every page of the table of contents in headless Chromium (Debian's
``chromium``; ``make test`` installs it) at 1280 px, and fails on any of:

* an absolute path of the build machine (``/work/``, ``/tmp/``, ``/root/``, ``/home/``) or a
  traceback in the page text, or an error output block;
* a table wider than the page's text column that does not scroll inside its own box;
* a table shown on load whose first five header cells (or all, if fewer) are not all in view
  inside its scroll box (a full table may sit in a closed ``<details>``, which is exempt);
* text cut short: a table cell, or a word of a text output, ending in "..." or "…" (pandas'
  truncation of long strings, or of rows and columns, or a label cut by hand);
* a text output (a stream or a plain-text value) wider than its box, so that a line runs off its
  right edge into a sideways scroll (sentences for the reader belong in Markdown, which wraps;
  log lines are wrapped); tables, code inputs and closed ``<details>`` are exempt;
* a prototype numbered from 0: a "P0" token in the page text, or a table indexed by
  ``prototype`` whose first row is 0 (prototypes are P1, P2, ... as in the figures);
* an image that does not load;
* a notebook page without its "What this page shows" opening or its computed "Verdict" closing,
  or whose computed verdict is not shown in an admonition (``book.show_verdict``);
* a request for anything outside the site (the book works offline);
* a script error (an uncaught exception, such as a SyntaxError of an inline script).

Two checks read the built HTML files directly (no browser), on the quick build and on a build
that executes nothing (seconds; what the theme and ``_config.yml`` put on every page): no page
declares ``THEBE_JS_URL`` more than once, and the Colab launch button appears only on the
pages built from a notebook (``.ipynb``), each pointing at that notebook.

It saves a full-page screenshot of every page to ``_build/screenshots/<page>.png``.
"""
from __future__ import annotations

import functools
import http.server
import importlib.util
import html
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

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


def _load_build_book():
    spec = importlib.util.spec_from_file_location("build_book", REPO / "tools" / "build_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def unexecuted_site(tmp_path_factory) -> Path:
    """The book built from a copy of its sources without executing anything; the HTML folder.

    Pages and theme are those of the real build (warnings are still errors, except the glue
    references, which only executed notebooks can fill); only the notebooks' outputs are missing.
    """
    build_book = _load_build_book()
    out = tmp_path_factory.mktemp("unexecuted")
    src = out / "src"
    build_book.copy_sources(src)
    config = yaml.safe_load((src / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    sphinx_config = config["sphinx"]["config"]
    sphinx_config["suppress_warnings"] = [*sphinx_config.get("suppress_warnings", []), "mystnb.glue_ref"]
    (src / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    t0 = time.perf_counter()
    status = build_book.jupyter_book_build(src, out=out)
    print(f"\nunexecuted book build: {time.perf_counter() - t0:.0f} s")
    assert status == 0, "the book does not build without execution (see the output above)"
    return out / "_build" / "html"


#: ``const THEBE_JS_URL`` (sphinx-thebe's inline script): declared twice, it is a SyntaxError.
THEBE_DECLARATION = re.compile(r"\b(?:const|let|var)\s+THEBE_JS_URL\b")


def colab_launch_links(html: str, colab_url: str) -> list[str]:
    """The launch links to Colab in a page (``<colab_url>/github/...``), not prose links to Colab."""
    return re.findall(r'href="(' + re.escape(colab_url.rstrip("/")) + r'/github/[^"]+)"', html)


def launch_and_script_problems(site: Path) -> list[str]:
    """What the theme's scripts and launch buttons get wrong on the built pages (read as text)."""
    colab_url = yaml.safe_load((REPO / "_config.yml").read_text())["launch_buttons"]["colab_url"]
    problems = []
    for page in sorted(site.rglob("*.html")):
        declarations = len(THEBE_DECLARATION.findall(page.read_text()))
        if declarations > 1:
            problems.append(f"{page.relative_to(site)}: THEBE_JS_URL declared {declarations} times")
    for name in toc_files():
        html = (site / f"{name}.html").read_text()
        links = colab_launch_links(html, colab_url)
        if (REPO / f"{name}.ipynb").is_file():
            if not links or any(not link.endswith(f"/{name}.ipynb") for link in links):
                problems.append(f"{name}: a notebook page without its Colab link (found {links})")
        elif links:
            source = next(REPO.glob(f"{name}.*")).name
            problems.append(f"{name}: built from {source}, which Colab cannot open, yet links to Colab: {links}")
    return problems


def test_extensions_are_jupyter_books_without_thebe():
    """_config.yml lists the extensions itself, to leave sphinx_thebe out; the rest are all there."""
    from jupyter_book.config import get_default_sphinx_config, get_final_config

    final, _ = get_final_config(user_yaml=REPO / "_config.yml", cli_config={"latex_individualpages": False},
                                sourcedir=REPO)
    extensions = final["extensions"]
    assert "sphinx_thebe" not in extensions
    defaults = set(get_default_sphinx_config()["extensions"]) - {"sphinx_thebe"}
    assert defaults <= set(extensions), defaults - set(extensions)
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config["launch_buttons"]["thebe"] is False
    for extension in [*config["sphinx"]["extra_extensions"], *config["sphinx"]["local_extensions"],
                      "sphinxcontrib.bibtex"]:
        assert extension in extensions, f"{extension} is not loaded"


def test_thebe_pattern_and_colab_links():
    page = 'x <script>const THEBE_JS_URL = "u"; const a = 1</script> <script>const THEBE_JS_URL = "u"</script>'
    assert len(THEBE_DECLARATION.findall(page)) == 2
    html = ('<a href="https://colab.research.google.com">Colab</a>'
            '<a href="https://colab.research.google.com/github/o/r/blob/main/notebooks/01_x.ipynb">')
    assert colab_launch_links(html, "https://colab.research.google.com/") == [
        "https://colab.research.google.com/github/o/r/blob/main/notebooks/01_x.ipynb"]


def test_scripts_and_launch_buttons_without_execution(unexecuted_site):
    assert not (problems := launch_and_script_problems(unexecuted_site)), "\n".join(problems)


def test_scripts_and_launch_buttons_of_the_quick_build(site):
    assert not (problems := launch_and_script_problems(site)), "\n".join(problems)


def test_every_toc_page_is_built(site):
    missing = [f for f in toc_files() if not (site / f"{f}.html").is_file()]
    assert not missing


NOTEBOOKS = _load_build_book().notebook_paths(REPO)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_ran_alone_in_an_empty_folder_and_wrote_only_outputs(site, notebook):
    """The quick build ran it (papermill, kernel python3) with the small parameters and no ``out_dir``, in
    a fresh folder with no repository beside it, as a notebook opened on Colab after ``pip install``:
    no cell failed, no output shows a path of the machine, and it wrote under ``outputs/`` only."""
    from .conftest import notebook_output_text

    out = site.parents[1]
    run = json.loads((out / "quick_runs.json").read_text())[notebook.stem]
    assert run["parameters"] == _load_build_book().QUICK_PARAMETERS[notebook.stem]  # the notebook's own out_dir
    cwd = Path(run["cwd"])
    assert REPO not in cwd.parents and cwd.parent == out
    executed = json.loads((out / "executed" / notebook.name).read_text())
    errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    for cell in executed["cells"]:
        text = notebook_output_text(cell)
        for root in (str(cwd), str(out), str(REPO)):
            assert root not in text, f"{notebook.name}: an output shows the absolute path {root}: {text[:300]!r}"
    outside = [f for f in run["written"] if Path(f).parts[0] != "outputs"]
    assert not outside, f"{notebook.name} wrote outside outputs/: {outside}"


def test_the_build_script_refuses_what_it_would_ignore(capsys, tmp_path, monkeypatch):
    build_book = _load_build_book()

    def no_build(*args, **kwargs):  # should the refusal regress, fail at once rather than build the book
        raise AssertionError("the script went on to build")

    monkeypatch.setattr(build_book, "full_build", no_build)
    monkeypatch.setattr(build_book, "quick_build", no_build)
    unused = str(tmp_path / "unused")
    for argv, message in ((["--quick", "--only", "99,02", "--out", unused], "--only: no notebook '99'"),
                          (["--keep-sources"], "are only used with --quick")):
        with pytest.raises(SystemExit) as exit_:  # an unknown --only had run no notebook and exited 0
            build_book.main(argv)
        assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "unused").exists()


def test_a_full_build_runs_the_notebooks_again_after_a_change_to_the_package(tmp_path, monkeypatch):
    # jupyter-cache keys a notebook on its own text: a change to the package alone had kept the old numbers.
    build_book = _load_build_book()
    code = tmp_path / "minitorch_proto" / "model.py"
    code.parent.mkdir()
    code.write_text("SCALE = 1\n")
    cache, kept = tmp_path / "_build" / ".jupyter_cache", []

    def build(root, out=None):  # what jupyter-book does with the cache: finds it, or runs and fills it
        kept.append(cache.exists())
        cache.mkdir(parents=True, exist_ok=True)
        return root / "index.html"

    monkeypatch.setattr(build_book, "REPO", tmp_path)
    monkeypatch.setattr(build_book, "checked_build", build)
    for change in (None, None, "SCALE = 2\n", None):
        if change:
            code.write_text(change)
        build_book.full_build()
    assert kept == [False, True, False, True]


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


def test_command_line_flags_keep_their_two_hyphens(site):
    """Sphinx's smart quotes would print "reproduce --methods all" as "reproduce –methods all"."""
    mangled = {}
    for page in site.rglob("*.html"):
        text = re.sub(r"<[^>]+>", " ", page.read_text())
        found = re.findall(r"\s[\u2013\u2014][a-z][a-z-]+", text)
        if found:
            mangled[str(page.relative_to(site))] = sorted(set(found))[:5]
    assert not mangled, mangled
    assert "reproduce --methods all" in (site / "book" / "results.html").read_text()
    # The API page's fields ("name (type) – text", "ValueError – If ...") print their dash themselves
    # (book/_ext/api_docstrings.py), since smart quotes no longer turn "--" into one.
    api = re.sub(r"<(code|pre)[^>]*>.*?</\1>", " ", (site / "book" / "api.html").read_text(), flags=re.S)
    api = html.unescape(re.sub(r"<[^>]+>", "", api))
    assert " -- " not in api and "n_prototypes (int, default=24) \u2013 D, the number" in api
    assert "ValueError \u2013 If" in api


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

# Cut-short text: pandas ends a cell it truncates (display.max_colwidth) with "...", and writes a
# "..." column or row where it drops some (display.max_columns / max_rows); a label cut by hand
# ends with "…". Table cells and text outputs are read; prose may use an ellipsis.
_TRUNCATED_JS = """
() => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  const cut = /(\\.\\.\\.|\\u2026)$/;
  const found = [];
  for (const cell of article.querySelectorAll("table th, table td")) {
    const text = cell.innerText.trim();
    if (cut.test(text)) { found.push(`table cell "${text.slice(-60)}"`); }
  }
  for (const out of article.querySelectorAll(".cell_output .output.text_plain, .cell_output .output.stream")) {
    for (const line of out.innerText.split("\\n")) {
      const word = line.split(/\\s+/).find(w => cut.test(w) && !/^[\\[(]/.test(w));
      if (word !== undefined) { found.push(`output line "${line.trim().slice(0, 80)}"`); }
    }
  }
  return found;
}
"""

# A table may scroll sideways in its own box, but its first five header cells (the row labels and
# the first columns, which say what the table is) must be in view on load. Tables in a closed
# <details> (a "full table" kept out of the way) are not shown on load and are exempt.
_HIDDEN_COLUMNS_JS = """
() => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  const right = Math.min(article.getBoundingClientRect().right, document.documentElement.clientWidth) + 1;
  const bad = [];
  for (const table of article.querySelectorAll("table")) {
    if (table.closest("details:not([open])") || table.getBoundingClientRect().width === 0) { continue; }
    const rows = Array.from(table.querySelectorAll("thead tr"));
    const header = rows.length ? rows.reduce((a, b) => b.cells.length > a.cells.length ? b : a)
                               : table.querySelector("tr");
    if (!header) { continue; }
    let limit = right;
    for (let el = table.parentElement; el && el !== article; el = el.parentElement) {
      const style = getComputedStyle(el);
      if (style.overflowX === "auto" || style.overflowX === "scroll" || style.overflowX === "hidden") {
        const box = el.getBoundingClientRect();
        limit = Math.min(limit, box.left + el.clientWidth + 1);
      }
    }
    const cells = Array.from(header.cells).slice(0, 5);
    const hidden = cells.filter(c => c.getBoundingClientRect().right > limit);
    if (hidden.length) {
      const names = cells.map(c => c.innerText.trim() || "(blank)").join(" | ").slice(0, 120);
      bad.push(`${hidden.length} of its first ${cells.length} header cells out of view (${names})`);
    }
  }
  return bad;
}
"""

# A text output (a stream, or the plain text of a value) must fit its box: a line wider than the
# column sits in a sideways scroll box, and the reader sees a sentence cut mid-way at the right
# edge. Sentences for the reader belong in Markdown (which wraps); log lines are wrapped by hand.
# The box of a line is the <pre> or any of its boxes up to the cell output (the theme or
# book.css may put the scrolling on either). Tables and code inputs are not text outputs; a
# closed <details> and an element of zero size are not shown and are exempt.
_OVERFLOWING_OUTPUT_JS = """
() => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  const canvas = document.createElement("canvas").getContext("2d");
  const found = [];
  for (const pre of article.querySelectorAll(".cell_output pre")) {
    if (pre.closest("details:not([open]), table")) { continue; }
    const output = pre.closest(".cell_output");
    let over = null;
    for (let el = pre; el && el !== output; el = el.parentElement) {
      if (el.clientWidth === 0 || el.clientHeight === 0) { over = null; break; }
      if (el.scrollWidth > el.clientWidth + 2) { over = over || el; }
    }
    if (!over) { continue; }
    // The offending line: the first one wider than the visible box (measured in the <pre>'s font),
    // else the longest one.
    const style = getComputedStyle(pre);
    canvas.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const room = over.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const lines = pre.innerText.split("\\n");
    const line = lines.find(l => canvas.measureText(l).width > room + 2)
        || lines.reduce((a, b) => b.length > a.length ? b : a, "");
    found.push(`${over.scrollWidth} px of text in a ${over.clientWidth} px box: "${line.trim().slice(0, 80)}"`);
  }
  return found;
}
"""

# Prototypes are P1, P2, ... everywhere (figures, tables, text), never counted from 0.
_PROTOTYPE_ZERO_JS = """
() => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  const bad = [];
  const zero = article.innerText.match(/\\bP0\\b.{0,60}/);
  if (zero) { bad.push(`"${zero[0]}"`); }
  for (const table of article.querySelectorAll("table")) {
    const first = table.querySelector("tbody tr");
    if (!first) { continue; }
    const heads = Array.from(table.querySelectorAll("thead th")).map(c => c.innerText.trim().toLowerCase());
    // pandas writes the index name ("prototype") in a header row; the index is the first body cell.
    if (heads.includes("prototype") && first.cells[0].innerText.trim() === "0"
        && first.cells[0].tagName === "TH") {
      bad.push("a table indexed by prototype starts at 0");
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
  // The computed verdict is shown as an admonition (book.show_verdict): its text without the title.
  const boxes = verdict ? Array.from(verdict.querySelectorAll(".cell_output .admonition")).map(box => {
    const title = box.querySelector(".admonition-title");
    return box.innerText.replace(title ? title.innerText : "", "").trim();
  }) : [];
  return {headings: headings, verdictOutput: output, verdictBoxes: boxes};
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
    for hidden in page.evaluate(_HIDDEN_COLUMNS_JS):
        problems.append(f"a table hides its first columns in its scroll box: {hidden}")
    for cut in page.evaluate(_TRUNCATED_JS):
        problems.append(f"text cut short with an ellipsis: {cut}")
    for line in page.evaluate(_OVERFLOWING_OUTPUT_JS):
        problems.append(f"a text output runs off the right edge of its box: {line}")
    for zero in page.evaluate(_PROTOTYPE_ZERO_JS):
        problems.append(f"a prototype numbered from 0 (they are P1, P2, ...): {zero}")
    if name.startswith("notebooks/"):
        sections = page.evaluate(_SECTIONS_JS)
        headings = sections["headings"]
        if not headings or headings[0] != "What this page shows":
            problems.append(f"does not open with 'What this page shows' (first sections: {headings[:2]})")
        if not headings or headings[-1] != "Verdict":
            problems.append(f"does not end with a 'Verdict' section (last section: {headings[-1:]})")
        elif len(sections["verdictOutput"]) < 40:
            problems.append("its Verdict section shows no computed verdict (no cell output)")
        elif not any(len(text) >= 40 for text in sections["verdictBoxes"]):
            problems.append("its computed verdict is not in an admonition (use book.show_verdict)")
    return problems


def browse(site: Path, chromium: str, screenshots: Path = SCREENSHOTS) -> dict[str, list]:
    """Open every page of the table of contents of the built ``site`` in Chromium.

    Returns
    -------
    dict
        ``problems`` (per page), ``script_errors``, ``outside`` (requests outside the site) and
        ``shots`` (the screenshots saved under ``screenshots``).
    """
    from playwright.sync_api import sync_playwright

    server, _ = _serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    if screenshots.exists():
        shutil.rmtree(screenshots)
    screenshots.mkdir(parents=True)
    problems: list[str] = []
    outside: list[str] = []
    script_errors: list[str] = []
    shots: list[Path] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("request", lambda r: outside.append(r.url)
                    if not r.url.startswith((base, "data:", "blob:", "about:")) else None)
            page.on("pageerror", lambda error: script_errors.append(f"{page.url}: {error}"))
            for name in toc_files():
                stem = name.rsplit("/", 1)[-1]
                response = page.goto(f"{base}/{name}.html", wait_until="load")
                if response is None or response.status != 200:
                    problems.append(f"{name}: HTTP {None if response is None else response.status}")
                    continue
                problems += [f"{name}: {p}" for p in _page_problems(page, name, stem)]
                path = screenshots / f"{stem}.png"
                page.screenshot(path=str(path), full_page=True)
                shots.append(path)
            browser.close()
    finally:
        server.shutdown()
    return {"problems": problems, "script_errors": script_errors, "outside": outside, "shots": shots}


def test_every_page_reads_well_in_chromium(site):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (make test installs it: apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")

    seen = browse(site, chromium)
    problems, script_errors, outside, shots = (seen[k] for k in ("problems", "script_errors", "outside", "shots"))
    print(f"\n{len(shots)} full-page screenshots in {SCREENSHOTS.relative_to(REPO)}/")
    assert not problems, "\n".join(problems)
    assert not script_errors, "script errors in the pages:\n" + "\n".join(script_errors)
    assert not outside, f"pages requested resources outside the site (the book must work offline): {outside[:10]}"
    assert len(shots) == len(toc_files())
