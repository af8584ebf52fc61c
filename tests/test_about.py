"""minitorch_proto.about: the version and the code's commit, as frozen tables and run records name them."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from minitorch_proto import __version__
from minitorch_proto.about import __version__ as about_version
from minitorch_proto.about import code_version

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(cwd), "PATH": "/usr/bin:/bin"})


def test_the_root_reexports_the_version():
    assert __version__ == about_version


@pytest.mark.parametrize("where", [".", "minitorch_proto", "minitorch_proto/evaluation"])
def test_code_version_marks_uncommitted_package_changes_from_any_folder(tmp_path, where):
    # The package's own folder is a subfolder of the repository: the "+dirty" check must look
    # at the package from the repository's top, wherever it is asked from.
    (tmp_path / "minitorch_proto" / "evaluation").mkdir(parents=True)
    module = tmp_path / "minitorch_proto" / "evaluation" / "m.py"
    module.write_text("x = 1\n")
    (tmp_path / "notes.md").write_text("notes\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "first")
    clean = code_version(tmp_path / where)
    assert len(clean) == 12 and int(clean, 16) >= 0
    (tmp_path / "notes.md").write_text("changed outside the package\n")
    assert code_version(tmp_path / where) == clean
    module.write_text("x = 2\n")
    assert code_version(tmp_path / where) == clean + "+dirty"


def test_code_version_outside_git_names_the_version(tmp_path):
    assert code_version(tmp_path) == f"minitorch_proto {__version__} (not a git checkout)"
