"""Where the project lives: the one setting for the repository address.

``_config.yml`` (launch buttons, repository button), the install cell of every notebook and the
README all name this address; ``tests/test_publishing.py`` checks that they agree with
:data:`REPOSITORY`, so moving the repository means editing this line and those copies together.
"""
from __future__ import annotations

__all__ = ["REPOSITORY", "BRANCH", "PIP_INSTALL", "DOCS_URL", "__version__"]

#: The package version (the root package re-exports it; modules below import it from here).
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
