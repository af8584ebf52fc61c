"""What the package is and where it lives: its version, the code's commit, the repository address.

``__version__`` and :func:`code_version` live here, at the bottom of the layers, so any module
can name them without importing the package root (which re-exports ``__version__``).

``_config.yml`` (launch buttons, repository button), the install cell of every notebook and the
README all name the repository address; ``tests/test_publishing.py`` checks that they agree with
:data:`REPOSITORY`, so moving the repository means editing this line and those copies together.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["__version__", "REPOSITORY", "BRANCH", "PIP_INSTALL", "DOCS_URL", "code_version", "run_record"]

#: The package's version (also in ``pyproject.toml``).
__version__ = "0.1.0"

#: The GitHub repository of the project.
REPOSITORY = "https://github.com/minitorch-proto/minitorch_proto"
#: The branch the book and the notebooks' install cell use.
BRANCH = "main"
#: What a notebook's install cell (and a user without a clone) passes to pip.
PIP_INSTALL = f"git+{REPOSITORY}"
#: Where the publish workflow deploys the book (GitHub Pages of :data:`REPOSITORY`).
DOCS_URL = "https://{owner}.github.io/{name}/".format(
    owner=REPOSITORY.rstrip("/").split("/")[-2], name=REPOSITORY.rstrip("/").split("/")[-1]
)


def code_version(cwd: str | os.PathLike | None = None) -> str:
    """The git commit of the code (``<sha>``, ``<sha>+dirty`` with uncommitted changes), else the version.

    Parameters
    ----------
    cwd : path-like, optional
        Folder inside the repository; defaults to the package's folder.
    """
    where = Path(cwd) if cwd is not None else Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=where, capture_output=True,
                             text=True, check=True, timeout=10).stdout.strip()
        # ":(top)": a plain "minitorch_proto" would be read relative to ``where`` (by default the
        # package's own folder), match nothing, and never report a change.
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":(top)minitorch_proto"],
                               cwd=where, capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"minitorch_proto {__version__} (not a git checkout)"
    return sha + ("+dirty" if dirty else "")


#: The libraries whose versions can change a result (folds, solvers, compiled loops), named in ``run.json``.
RECORDED_LIBRARIES = ("numpy", "scipy", "scikit-learn", "pandas", "torch", "numba", "safetensors")


def run_record(command: str, settings: dict[str, Any], methods: list[str], datasets: list[str],
               wall_seconds: float, **details: Any) -> str:
    """``run.json``: what made a results folder, so that it can be rerun, audited or frozen later.

    Parameters
    ----------
    command : str
        The sub-command (``"reproduce"``, ``"compare"``, ...).
    settings : dict
        The command's options, as parsed (requested values: ``device="auto"`` stays "auto", and an
        option left out is ``None``, e.g. ``standardization``: what each row ran with is in ``configs``).
    methods, datasets : list of str
    wall_seconds : float
    **details
        Anything else the command knows and a reader needs, e.g. ``argv`` (the command line),
        ``data`` (per data set its file, sha256 and counts), ``split_seeds``, ``device`` as
        resolved, or which methods the model flags reached.

    Returns
    -------
    str
        The JSON text. Besides the arguments it names the code's commit (:func:`code_version`),
        the package, Python and :data:`RECORDED_LIBRARIES` versions, the CPU count, torch's thread
        count, and the UTC date and time the run finished.
    """
    import torch

    versions = {}
    for name in RECORDED_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    record = {"command": command, **({"argv": details.pop("argv")} if "argv" in details else {}),
              "methods": methods, "datasets": datasets, "settings": settings, **details,
              "commit": code_version(), "package_version": __version__, "torch": torch.__version__,
              "python": platform.python_version(), "versions": versions, "cpu_count": os.cpu_count(),
              "torch_threads": torch.get_num_threads(), "wall_seconds": round(wall_seconds, 1),
              "date": time.strftime("%Y-%m-%d", time.gmtime()),
              "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return json.dumps(record, indent=2, default=str) + "\n"
