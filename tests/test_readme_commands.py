"""Every shell command of the README still parses and runs.

The commands are read from README.md's ``bash``, ``sh``, ``shell`` and ``console`` blocks (a
``console`` block's commands are its ``$ `` lines; ``\\`` continues a line; ``#`` starts a
comment). Each one is checked twice:

* **parses** (fast): its options exist. ``minitorch-proto`` through the CLI's own parser,
  ``torchrun`` through torch's launcher parser and then the CLI's, ``papermill`` through
  papermill's command-line parser, with every notebook parameter it passes present in the
  notebook's ``parameters`` cell (papermill itself only warns about an unknown one), ``make``
  by the target being a rule of the Makefile.
* **runs**: ``minitorch-proto`` and ``torchrun ... -m minitorch_proto`` as
  ``python -m minitorch_proto`` (resp. ``python -m torch.distributed.run``) in a scratch folder
  holding the files the commands name (``mydata.csv``, ``features/``, ``labels.csv``, made
  here), with options appended that make the run short (:data:`SHORTER`; argparse keeps the
  last value); ``papermill`` with its exact arguments, the notebook's quick parameters of
  ``tools/build_book.py`` added for the parameters the command does not set; ``make`` as
  ``make -n TARGET`` (nothing is executed).

A command that cannot reasonably run here is listed in :data:`SKIP` with the reason. A command
of any other program fails the test until it gets a runner or a :data:`SKIP` entry.
"""
from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SHARED_MIL = Path(os.environ.get("MINITORCH_PROTO_DATA", REPO.parent / "shared" / "data" / "mil"))

#: Commands not run here, each with the reason (keys: the command as the README writes it,
#: without its comment; compared after shell-word normalisation).
_SKIP: dict[str, str] = {
    'pip install "git+https://github.com/minitorch-proto/minitorch_proto"':
        "installs from the network into the environment; the address itself is checked by "
        "tests/test_publishing.py (test_prose_install_instructions_use_the_repository)",
    "conda env create -f environment.yml":
        "creates a conda environment (conda is not part of the test environment and the machine is "
        "offline); test_conda_environment_file_installs_the_package_with_the_pins checks the file",
}
SKIP = {shlex.join(shlex.split(command)): reason for command, reason in _SKIP.items()}

#: Options appended to a minitorch-proto subcommand so that it runs in seconds.
SHORTER: dict[str, list[str]] = {
    "reproduce": ["--repeats", "1", "--folds", "2", "--epochs", "2", "--quiet"],
    "compare": ["--folds", "2", "--quiet"],
    "cv": ["--repeats", "1", "--folds", "2", "--epochs", "2"],
    "train": ["--epochs", "2", "--device", "cpu"],
}
#: Subcommands that read the benchmarks unless told otherwise (the shared offline copy is used;
#: no download in tests), and the options that name a benchmark.
NEEDS_BENCHMARKS = ("reproduce",)
BENCHMARK_OPTIONS = ("--dataset", "--datasets")
#: Notebooks whose run reads the benchmarks.
NOTEBOOKS_NEEDING_BENCHMARKS = ("02_reproduction", "03_ablations", "04_baselines", "08_making_prototypes_predictive")
#: Programs that are this package's command line.
CLI_NAMES = ("minitorch-proto", ".venv/bin/minitorch-proto")
PAPERMILL_NAMES = ("papermill", ".venv/bin/papermill")
TORCHRUN_NAMES = ("torchrun", ".venv/bin/torchrun")


# --------------------------------------------------------------------------------------
# Reading the README
# --------------------------------------------------------------------------------------
def shell_commands(text: str) -> list[str]:
    """The commands of the shell blocks of a Markdown text, in order (comments stripped)."""
    commands = []
    for lang, body in re.findall(r"^```[ \t]*(\w+)[^\n]*\n(.*?)^```", text, re.S | re.M):
        if lang not in ("bash", "sh", "shell", "console"):
            continue
        lines = body.splitlines()
        if lang == "console":
            lines = [ln.strip()[2:] for ln in lines if ln.strip().startswith("$ ")]
        joined, pending = [], ""
        for line in lines:
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            joined.append(pending + line)
            pending = ""
        for line in joined:
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words))
    return commands


COMMANDS = shell_commands(README.read_text())


def _words(command: str) -> list[str]:
    return shlex.split(command)


def _slow(command: str) -> bool:
    """Everything but ``make -n`` and ``--help`` trains something or starts a kernel."""
    words = _words(command)
    return not (words[0] == "make" or (words[0] in CLI_NAMES and "--help" in words))


def _marks(command: str) -> list:
    marks = [pytest.mark.slow] if _slow(command) else []
    if _words(command)[0] in PAPERMILL_NAMES:
        marks.append(pytest.mark.book)  # notebook execution
    return marks


PARAMS = [pytest.param(c, id=c[:80], marks=_marks(c)) for c in COMMANDS]


def test_shell_commands_are_extracted():
    text = """
```bash
make a   # comment
# only a comment
tool --x 1 \\
    --y "two words"   # more
```
```python
not_a_command()
```
```console
$ tool --z
output line
```
"""
    assert shell_commands(text) == ["make a", "tool --x 1 --y 'two words'", "tool --z"]
    assert len(COMMANDS) >= 10, COMMANDS
    assert {"make book", "make test"} <= set(COMMANDS)


def test_skip_list_names_only_readme_commands():
    stale = set(SKIP) - set(COMMANDS)
    assert not stale, f"SKIP lists commands the README no longer has: {sorted(stale)}"


def test_conda_environment_file_installs_the_package_with_the_pins():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-c constraints.txt" in pip and any(line.startswith("-e .") for line in pip), pip
    assert (REPO / "constraints.txt").is_file()


# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------
def _cli_parse(args: list[str]) -> None:
    from minitorch_proto.cli import build_parser

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            build_parser().parse_args(args)
        except SystemExit as exc:  # --help exits 0; a usage error exits 2 with argparse's message
            assert exc.code == 0, f"minitorch-proto {shlex.join(args)}: {err.getvalue().strip()}"


def _torchrun_split(args: list[str]) -> tuple[list[str], list[str]]:
    """torchrun's own options and the CLI's arguments of ``torchrun [opts] -m minitorch_proto ARGS``."""
    from torch.distributed.run import get_args_parser

    ns = get_args_parser().parse_args(args)
    assert ns.module and ns.training_script == "minitorch_proto", \
        f"torchrun runs {ns.training_script!r}, not the package (-m minitorch_proto)"
    cut = len(args) - len(ns.training_script_args)
    return args[: cut - 2], list(ns.training_script_args)


def _load_build_book():
    spec = importlib.util.spec_from_file_location("build_book", REPO / "tools" / "build_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def notebook_parameters(notebook: Path) -> set[str]:
    """The names assigned in a notebook's cell tagged ``parameters``."""
    cells = [c for c in json.loads(notebook.read_text())["cells"]
             if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{notebook.name}: exactly one cell must be tagged 'parameters'"
    tree = ast.parse("".join(cells[0]["source"]))
    return {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}


def _papermill_parse(args: list[str]) -> tuple[Path, dict]:
    """The notebook and the parameters (names -> raw values) of a papermill command line."""
    from papermill.cli import papermill as papermill_cli

    ctx = papermill_cli.make_context("papermill", list(args))
    p = ctx.params
    notebook = REPO / p["notebook_path"]
    assert notebook.is_file(), f"papermill's notebook {p['notebook_path']} does not exist"
    given: dict = {}
    for name, value in (*p["parameters"], *p["parameters_raw"]):
        given[name] = value
    for text in p["parameters_yaml"]:
        given.update(yaml.safe_load(text) or {})
    for path in p["parameters_file"]:
        given.update(yaml.safe_load((REPO / path).read_text()) or {})
    unknown = set(given) - notebook_parameters(notebook)
    assert not unknown, f"{notebook.name} has no parameters {sorted(unknown)} (its parameters cell)"
    return notebook, given


def _papermill_output(args: list[str]) -> str:
    from papermill.cli import papermill as papermill_cli

    return papermill_cli.make_context("papermill", list(args)).params["output_path"]


def _make_target_defined(target: str) -> bool:
    return re.search(rf"^{re.escape(target)}\s*:(?!=)", (REPO / "Makefile").read_text(), re.M) is not None


@pytest.mark.parametrize("command", COMMANDS, ids=[c[:80] for c in COMMANDS])
def test_readme_command_parses(command):
    if command in SKIP:
        pytest.skip(SKIP[command])
    program, *args = _words(command)
    if program == "make":
        missing = [t for t in args if not t.startswith("-") and not _make_target_defined(t)]
        assert not missing, f"the Makefile has no target {missing}"
    elif program in CLI_NAMES:
        _cli_parse(args)
    elif program in TORCHRUN_NAMES:
        _cli_parse(_torchrun_split(args)[1])
    elif program in PAPERMILL_NAMES:
        _papermill_parse(args)
    else:
        pytest.fail(f"no check for {program!r}: give it a runner in this test or a SKIP entry with a reason")


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------
@pytest.fixture
def workspace(tmp_path) -> Path:
    """A scratch folder with the inputs the README's commands name: mydata.csv, features/, labels.csv."""
    import pandas as pd

    from minitorch_proto.data.disk import write_bag_folder

    from .conftest import make_concept_bags

    bags, y = make_concept_bags(n_bags=24, seed=0)
    rows = [dict(bag=f"b{i}", label=int(y[i]), **{f"f{j}": v for j, v in enumerate(inst)})
            for i, bag in enumerate(bags) for inst in bag]
    pd.DataFrame(rows).to_csv(tmp_path / "mydata.csv", index=False)
    labels = write_bag_folder(tmp_path / "features", bags, y)
    shutil.copy2(labels, tmp_path / "labels.csv")
    return tmp_path


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    if (SHARED_MIL / "Musk1.csv").is_file():
        env["MINITORCH_PROTO_DATA"] = str(SHARED_MIL)
    return env


def _needs_benchmarks() -> None:
    if not (SHARED_MIL / "Musk1.csv").is_file():
        pytest.skip("reads the benchmarks, and ../shared/data/mil is not present (no downloads in tests)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], cwd: Path, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, (f"exit {out.returncode}: {shlex.join(cmd)}\n"
                                 f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


def _cli_args(args: list[str]) -> list[str]:
    sub = next((a for a in args if not a.startswith("-")), None)
    if sub in NEEDS_BENCHMARKS or any(a in BENCHMARK_OPTIONS for a in args):
        _needs_benchmarks()
    return [*args, *SHORTER.get(sub, [])] if "--help" not in args else args


def _check_out(args: list[str], cwd: Path) -> None:
    if "--out" in args:
        out = cwd / args[len(args) - 1 - args[::-1].index("--out") + 1]
        assert out.exists(), f"--out {out.name} was not written"


@pytest.mark.parametrize("command", PARAMS)
def test_readme_command_runs(command, workspace):
    if command in SKIP:
        pytest.skip(SKIP[command])
    program, *args = _words(command)
    if program == "make":
        _run(["make", "-n", *args], cwd=REPO)
    elif program in CLI_NAMES:
        args = _cli_args(args)
        out = _run([sys.executable, "-m", "minitorch_proto", *args], cwd=workspace)
        if "--help" in args:
            assert "usage: minitorch-proto" in out.stdout
        _check_out(args, workspace)
    elif program in TORCHRUN_NAMES:
        launcher, cli = _torchrun_split(args)
        cli = _cli_args(cli)
        env = dict(_env(), OMP_NUM_THREADS="1")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--master_addr", "127.0.0.1",
               "--master_port", str(_free_port()), *launcher, "-m", "minitorch_proto", *cli]
        _run(cmd, cwd=workspace, env=env)
        _check_out(cli, workspace)
    elif program in PAPERMILL_NAMES:
        notebook, given = _papermill_parse(args)
        if notebook.stem in NOTEBOOKS_NEEDING_BENCHMARKS:
            _needs_benchmarks()
        quick = _load_build_book().QUICK_PARAMETERS[notebook.stem]
        extra = {k: v for k, v in quick.items() if k not in given}
        # The command's own arguments, with the repository's notebook path made absolute.
        args = [str(REPO / a) if (REPO / a).is_file() and a.endswith(".ipynb") else a for a in args]
        cmd = [sys.executable, "-m", "papermill", *args, "--no-progress-bar", "--cwd", str(workspace)]
        if extra:
            cmd += ["-y", yaml.safe_dump(extra, default_flow_style=True)]
        _run(cmd, cwd=workspace, timeout=600)
        output = workspace / _papermill_output(args)
        errors = [o for c in json.loads(output.read_text())["cells"] for o in c.get("outputs", [])
                  if o.get("output_type") == "error"]
        assert not errors
    else:
        pytest.fail(f"no runner for {program!r}: add one to this test or a SKIP entry with a reason")
