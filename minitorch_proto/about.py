"""What the package is and where it lives: its version, the code's commit, the repository address.

``__version__`` and :func:`code_version` live here, at the bottom of the layers, so any module
can name them without importing the package root (which re-exports ``__version__``).

``_config.yml`` (launch buttons, repository button), the install cell of every notebook and the
README all name the repository address; ``tests/test_publishing.py`` checks that they agree with
:data:`REPOSITORY`, so moving the repository means editing this line and those copies together.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["__version__", "REPOSITORY", "BRANCH", "PIP_INSTALL", "DOCS_URL", "code_version"]

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
