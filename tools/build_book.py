#!/usr/bin/env python
"""Build the minitorch_proto book.

Full build (what ``make book`` runs)::

    .venv/bin/python tools/build_book.py

executes every notebook with its full default parameters (through jupyter-cache, so an
unchanged notebook is not run again) and builds the HTML into ``_build/html``. Warnings are
errors, and a notebook cell that raises fails the build.

Quick build (what the tests run)::

    .venv/bin/python tools/build_book.py --quick --out /tmp/book

runs every notebook once with papermill and the SMALL parameters of :data:`QUICK_PARAMETERS`
(each in a fresh empty working folder, as on Colab) into a temporary copy of the book's sources,
then builds that copy without running those notebooks again (the MyST-NB pages, such as the
results page, which read what the notebooks glued, still execute). The HTML goes to
``<out>/_build/html``; the executed notebooks to ``<out>/executed/``, and ``<out>/quick_runs.json``
records, per notebook, its seconds, its working folder and the files it wrote there (the tests
check those runs rather than running every notebook a second time).

The exit status is non-zero on any failure.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The book's sources, relative to the repository root (copied for a quick build).
BOOK_SOURCES = ("_config.yml", "_toc.yml", "_static", "book", "notebooks")

#: Notebook stem -> papermill parameters for a quick run (tests and ``--quick``).
#: ``quick_parameters`` adds an ``out_dir``; the quick build leaves it out (each notebook writes to its
#: default folder inside its own empty working folder).
QUICK_PARAMETERS: dict[str, dict] = {
    "01_formulation": {"n_bags": 12, "epochs": 20, "snapshot_every": 5},
    "02_reproduction": {"datasets": ["musk1"], "repeats": 1, "folds": 3, "epochs": 3},
    "03_ablations": {"datasets": ["musk1"], "repeats": 1, "folds": 3, "epochs": 2},
    "04_baselines": {
        "datasets": ["musk1", "fox"],
        "methods": ["prototype", "bag_stats", "mi_svm", "MI_net_mean"],
        "repeats": 1,
        "folds": 3,
        "epochs": 3,
    },
    "05_mnist_prototypes": {"targets": [9], "n_train_bags": 40, "n_test_bags": 20, "epochs": 3, "sweep_seeds": [0, 1]},
    "06_mil_unit_tests": {"quick": True, "n_train": 60, "n_test": 60},
    "07_your_own_data": {"n_bags": 60, "repeats": 1, "folds": 3, "epochs": 5,
                         "pathology_methods": ["prototype-recommended", "miles"], "pathology_folds": 3, "slide_count": 36},
    "08_making_prototypes_predictive": {"datasets": ["musk1"], "repeats": 1, "steps": ["paper", "+ rates"]},
}

#: Per-notebook time limit (seconds) for a quick papermill run.
QUICK_TIMEOUT = 600


def notebook_paths(root: Path = REPO) -> list[Path]:
    """The book's notebooks, in file-name order."""
    return sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def notebook_env() -> dict[str, str]:
    """Environment for notebook kernels: the shared benchmark folder, as the Makefile sets it."""
    env = dict(os.environ)
    shared = (REPO.parent / "shared" / "data" / "mil").resolve()
    if "MINITORCH_PROTO_DATA" not in env and (shared / "Musk1.csv").is_file():
        env["MINITORCH_PROTO_DATA"] = str(shared)
    return env


def _jupyter_book() -> list[str]:
    """The ``jupyter-book`` command of this interpreter's environment (the venv), else of PATH."""
    exe = Path(sys.executable).with_name("jupyter-book")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("jupyter-book")
    if found:
        return [found]
    return [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]


def jupyter_book_build(source: Path, out: Path | None = None, extra: list[str] | None = None) -> int:
    """``jupyter-book build`` with warnings as errors; returns the exit status."""
    cmd = [*_jupyter_book(), "build", str(source), "--builder", "html", "--warningiserror", "--keep-going"]
    if out is not None:
        cmd += ["--path-output", str(out)]
    cmd += list(extra or [])
    print("$", " ".join(cmd), flush=True)
    return subprocess.call(cmd, env=notebook_env(), cwd=str(source))


def run_notebook(src: Path, dst: Path, parameters: dict, cwd: Path, timeout: int = QUICK_TIMEOUT) -> float:
    """Execute ``src`` with papermill into ``dst``; return the seconds taken. Raises on a failing cell."""
    import papermill as pm

    old = dict(os.environ)
    os.environ.update(notebook_env())
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(
            str(src),
            str(dst),
            parameters=parameters,
            kernel_name="python3",
            cwd=str(cwd),
            progress_bar=False,
            log_output=False,
            execution_timeout=timeout,
        )
    finally:
        os.environ.clear()
        os.environ.update(old)
    return time.perf_counter() - t0


def quick_parameters(stem: str, out_dir: Path) -> dict:
    """The small parameters of one notebook, with its own ``out_dir``."""
    if stem not in QUICK_PARAMETERS:
        raise KeyError(f"No quick parameters for notebook {stem!r}; add them to QUICK_PARAMETERS.")
    return {**QUICK_PARAMETERS[stem], "out_dir": str(out_dir / stem)}


def copy_sources(dest: Path) -> None:
    """Copy the book's sources (no build outputs, no checkpoints) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "_build")
    for name in BOOK_SOURCES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dest / name)


def set_quick_execution(config: Path) -> None:
    """In a copied ``_config.yml``, keep the (papermill-executed) ``.ipynb`` pages as they are.

    MyST-NB pages (``.md`` notebooks such as the results page) are still executed: they are
    quick, and they read the values the notebooks glued.
    """
    import yaml

    data = yaml.safe_load(config.read_text())
    execute = data.setdefault("execute", {})
    execute["execute_notebooks"] = "force"
    execute["exclude_patterns"] = ["*.ipynb"]
    config.write_text(yaml.safe_dump(data, sort_keys=False))


def quick_build(out: Path, keep_sources: bool = False, only: list[str] | None = None) -> Path:
    """Run every notebook with small parameters, then build the HTML from those runs.

    ``only`` (notebook stems or their two-digit numbers) restricts the runs to those notebooks;
    the others are built as committed, without outputs (for working on a few pages).
    Returns the path of the built ``index.html``; raises ``RuntimeError`` on any failure.
    """
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="book-src-", dir=str(out)))
    try:
        copy_sources(work)
        data_dir = work / "_nbdata"
        failures, runs = [], {}
        executed = out / "executed"  # copied over on success only, and quick_runs.json names this build's runs
        executed.mkdir(exist_ok=True)
        for nb in notebook_paths(REPO):
            if only is not None and nb.stem not in only and nb.stem[:2] not in only:
                continue
            # No out_dir: each notebook writes to its default (relative) folder inside its fresh
            # working folder, so the injected parameters cell shows no path of this machine.
            params = dict(quick_parameters(nb.stem, data_dir))
            params.pop("out_dir")
            dst = work / "notebooks" / nb.name
            fresh = Path(tempfile.mkdtemp(prefix=f"{nb.stem}-", dir=str(out)))  # no repository beside it
            try:
                seconds = run_notebook(nb, dst, params, cwd=fresh)
                print(f"[papermill] {nb.name}: ok in {seconds:.1f} s", flush=True)
                shutil.copy2(dst, executed / nb.name)
                runs[nb.stem] = {"seconds": round(seconds, 1), "cwd": str(fresh), "parameters": params,
                                 "written": sorted(str(f.relative_to(fresh)) for f in fresh.rglob("*") if f.is_file())}
            except Exception as exc:  # papermill raises PapermillExecutionError with the traceback
                print(f"[papermill] {nb.name}: FAILED\n{exc}", flush=True)
                failures.append(nb.name)
            finally:
                shutil.rmtree(fresh, ignore_errors=True)
        (out / "quick_runs.json").write_text(json.dumps(runs, indent=1) + "\n")
        if failures:
            raise RuntimeError(f"notebook(s) failed under papermill: {', '.join(failures)}")
        shutil.rmtree(data_dir, ignore_errors=True)
        set_quick_execution(work / "_config.yml")
        return checked_build(work, out=out)
    finally:
        if not keep_sources:
            shutil.rmtree(work, ignore_errors=True)


def checked_build(root: Path, out: Path | None = None) -> Path:
    """Run :func:`jupyter_book_build` and return the site's index, or raise naming what failed."""
    status = jupyter_book_build(root, out=out)
    if status != 0:
        raise RuntimeError(f"jupyter-book build failed with exit status {status}")
    index = (out or root) / "_build" / "html" / "index.html"
    if not index.is_file():
        raise RuntimeError(f"the build finished but {index} is missing")
    return index


def package_digest(root: Path = REPO) -> str:
    """sha256 over the package's code and data files: what a notebook's results depend on besides itself."""
    digest = hashlib.sha256()
    package = root / "minitorch_proto"
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def full_build() -> Path:
    """Build the book in place, executing every notebook with its defaults (cached).

    jupyter-cache keys a notebook on its own text: after a change to the package alone it would show
    the old code's numbers. The cache is kept only while the package is the one it was made with.
    """
    cache = REPO / "_build" / ".jupyter_cache"
    stamp = REPO / "_build" / "jupyter_cache_package.sha256"
    code = package_digest(REPO)
    if cache.exists() and (not stamp.is_file() or stamp.read_text().strip() != code):
        print("the package changed since the cached notebook runs: every notebook runs again", flush=True)
        shutil.rmtree(cache)
    index = checked_build(REPO)
    stamp.write_text(code + "\n")
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="run the notebooks with small parameters (papermill), then build without execution")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder of a --quick build (default: _build/quick); HTML in <out>/_build/html")
    parser.add_argument("--keep-sources", action="store_true",
                        help="--quick: keep the executed copy of the sources inside --out")
    parser.add_argument("--only", default=None,
                        help="--quick: comma-separated notebooks to run (e.g. 01,02); the others stay unexecuted")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        if args.quick:
            only = [x.strip() for x in args.only.split(",")] if args.only else None
            known = {p.stem for p in notebook_paths(REPO)} | {p.stem[:2] for p in notebook_paths(REPO)}
            if only is not None and (unknown := [x for x in only if x not in known]):
                parser.error(f"--only: no notebook {', '.join(map(repr, unknown))} (give stems or their numbers, "
                             f"e.g. 01,02)")
            index = quick_build(args.out or REPO / "_build" / "quick", keep_sources=args.keep_sources, only=only)
        else:
            if args.out is not None or args.only is not None or args.keep_sources:
                parser.error("--out, --only and --keep-sources are only used with --quick (the full build writes to "
                             "_build/html)")
            index = full_build()
    except Exception as exc:
        print(f"book build FAILED after {time.perf_counter() - t0:.0f} s: {exc}", file=sys.stderr)
        return 1
    print(f"book built in {time.perf_counter() - t0:.0f} s: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
