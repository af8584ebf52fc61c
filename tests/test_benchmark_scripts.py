"""The benchmark scripts as a user runs them (``python benchmarks/X.py ...``), on tiny inputs made here.

A freezer must refuse incomplete or unscored input, and a bad option or uncommitted code must end the script at
startup, each with one line and exit status 2, before anything is written; a freeze must record what its rows hold
and the code read at startup.

Every script starts torch (about 6 s), so the module fixture runs all the commands once, two at a time, and
each test reads its own result. The frozen tables the scripts read and write are copies in a temporary folder:
a ``sitecustomize`` module, put first on the children's path, points ``book.frozen.frozen_dir`` there, so a
script that failed to refuse writes into the copy, never into the package.
"""
from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from minitorch_proto import methods
from minitorch_proto.book import frozen

REPO = Path(__file__).resolve().parents[1]
#: Another copy of the scripts (e.g. an older commit's) may be checked with these tests.
SCRIPTS = Path(os.environ.get("BENCHMARK_SCRIPTS", REPO / "benchmarks"))

SITECUSTOMIZE = '''import os
if os.environ.get("TEST_FROZEN_DIR"):
    from pathlib import Path
    from minitorch_proto.book import frozen
    frozen.frozen_dir = lambda: Path(os.environ["TEST_FROZEN_DIR"])
    if os.environ.get("TEST_CODE_VERSION"):  # the checkout's own version may carry "+dirty"
        frozen.code_version = lambda: os.environ["TEST_CODE_VERSION"]
    if os.environ.get("TEST_CODE_VERSION_AT_WRITE"):  # as if the code were edited or committed during the run
        write = frozen.write_frozen

        def write_frozen(*args, **kwargs):
            os.environ["TEST_CODE_VERSION"] = os.environ["TEST_CODE_VERSION_AT_WRITE"]
            return write(*args, **kwargs)

        frozen.write_frozen = write_frozen
'''


@dataclass
class Ran:
    rc: int
    err: str
    changed: list[str]  # files of the case's folder added, removed or changed
    folder: Path
    out: str = ""


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _frozen_copy(folder: Path, *names: str) -> Path:
    target = folder / "frozen"
    target.mkdir(parents=True)
    for name in names:
        for suffix in (".csv", ".json"):
            shutil.copy(frozen.frozen_dir() / f"{name}{suffix}", target)
    return target


def _run_dir(folder: Path, results: pd.DataFrame, commit: str | None) -> Path:
    """A reproduce output folder: results.csv, timings.csv and (given ``commit``) run.json."""
    folder.mkdir(parents=True)
    results.to_csv(folder / "results.csv", index=False)
    pd.DataFrame({"method": results["method"].unique(), "datasets": "musk1", "wall_seconds": 10.0}).to_csv(
        folder / "timings.csv", index=False)
    if commit:
        (folder / "run.json").write_text(json.dumps({"command": "reproduce", "commit": commit}))
    return folder


def _cases(root: Path) -> dict[str, tuple[list[str], Path, dict]]:
    """name: (script and arguments, the case's folder, extra environment). Inputs are written here."""
    cases = {}

    def case(name, *frozen_tables) -> Path:
        folder = root / name
        folder.mkdir()
        _frozen_copy(folder, *frozen_tables)
        return folder

    measured = frozen.load_frozen("measured_results")
    # reproduce_all --from: one method of the twelve (all five data sets, 50 folds), then the whole run.
    folder = case("reproduce_partial", "measured_results")
    run = _run_dir(folder / "run", measured[measured["method"] == "prototype"], "abc1234")
    cases["reproduce_partial"] = (["reproduce_all.py", "--from", str(run), "--freeze"], folder, {})
    folder = case("reproduce_no_commit", "measured_results")
    run = _run_dir(folder / "run", measured, None)
    cases["reproduce_no_commit"] = (["reproduce_all.py", "--from", str(run), "--freeze"], folder, {})
    from minitorch_proto.cli import build_parser

    defaults = {k: v for k, v in vars(build_parser().parse_args(["reproduce"])).items() if not callable(v)}
    for name, settings in (("reproduce_full", {}), ("reproduce_other_rates", {"lr_prototypes": 0.01})):
        folder = case(name, "measured_results")
        run = _run_dir(folder / "run", measured, None)
        (run / "run.json").write_text(json.dumps({"command": "reproduce", "commit": "abc1234",
                                                  "settings": {**defaults, **settings}}, default=str))
        cases[name] = (["reproduce_all.py", "--from", str(run), "--freeze"], folder, {})

    # freeze_monotone --from: Musk1's 50 folds only, then all 250 (from the frozen table itself) beside a baseline's
    # row with no epoch (so pandas reads the column as floats), a run of uncommitted code, and one with another seed.
    monotone = frozen.load_frozen("monotone_results")

    def monotone_run(name, rows, commit, **settings):
        folder = case(name, "monotone_results")
        run = _run_dir(folder / "run", rows, None)
        record = {"command": "reproduce", "commit": commit, "settings": {**defaults, **settings}}
        (run / "run.json").write_text(json.dumps(record, default=str))
        cases[name] = (["freeze_monotone.py", "--from", str(run), "--freeze"], folder, {})

    monotone_run("monotone_partial", monotone[monotone["dataset"] == "musk1"], "abc1234")
    beside = monotone.iloc[:1].assign(method="MILES", epoch=float("nan"))
    monotone_run("monotone_full", pd.concat([monotone, beside], ignore_index=True), "abc1234def56")
    monotone_run("monotone_dirty_run", monotone, "abc1234def56+dirty")
    monotone_run("monotone_other_seed", monotone, "abc1234def56", seed=3, epochs=5)

    # freeze_common_budget: a full 50-fold run of which two folds have no score.
    folder = case("budget_nan")
    label = "attention (5-seed ensemble, tuned on inner CV)"
    rows = pd.DataFrame([{"dataset": "tiger", "method": label, "evaluation": "final", "repeat": 1 + i // 10,
                          "fold": 1 + i % 10, "seed": 0, "n_train": 0, "n_test": 0, "epoch": 0,
                          "accuracy": 0.5, "auc": 0.5, "fit_seconds": 0.0} for i in range(50)])
    rows.loc[[3, 27], "accuracy"] = float("nan")
    # The table holds the same method on Musk1 (written as a freeze writes it: its provenance checks the rows).
    frozen.write_frozen(rows.assign(dataset="musk1", accuracy=0.5), "baseline_common_budget", folder=folder / "frozen",
                        command="minitorch-proto reproduce", description="attention on musk1", commit="1234567",
                        row_commits={f"{label} musk1": "1234567"}, wall_seconds_one_core={})
    run = _run_dir(folder / "run", rows, "abc1234")
    (run / "timings.csv").write_text("method,datasets,wall_seconds\nattention,tiger,1.0\n")
    cases["budget_nan"] = (["freeze_common_budget.py", str(run), "--freeze"], folder, {})

    # run_ladder --freeze on Musk1 alone (the frozen ladder's own rows), with and without the nested rung.
    ladder = frozen.load_frozen("ladder_results")
    for name, extra in (("ladder_no_nested", ["--no-nested"]), ("ladder_subset", ["--nested-from", "nest"])):
        folder = case(name, "ladder_results", "ladder_table", "ladder_choices")
        musk1 = ladder[ladder.dataset == "musk1"]
        musk1[musk1.method != "+ nested tuning"].to_csv(folder / "fixed.csv", index=False)
        nest = folder / "nest"
        nest.mkdir()
        musk1[musk1.method == "+ nested tuning"].assign(method="prototype (tuned ensemble)").to_csv(
            nest / "results.csv", index=False)
        frozen.load_frozen("ladder_choices").to_csv(nest / "best_choices.csv", index=False)
        (nest / "timings.csv").write_text("method,datasets,wall_seconds\nprototype-best,musk1,1.0\n")
        extra = [str(nest) if e == "nest" else e for e in extra]
        cases[name] = (["run_ladder.py", "--datasets", "musk1", "--repeats", "5", *extra, "--fixed-from",
                        str(folder / "fixed.csv"), "--freeze"], folder, {})

    # mnist_seed_sweep: a resumed file of target 9, seeds 0-1, frozen as what it holds.
    folder = case("sweep_rows", "mnist_seed_sweep")
    sweep = frozen.load_frozen("mnist_seed_sweep")
    sweep[(sweep.target == 9) & (sweep.seed <= 1)].to_csv(folder / "sweep.csv", index=False)
    # The code changes under it by the write (an edit or a commit during the run): the startup commit is recorded.
    cases["sweep_rows"] = (["mnist_seed_sweep.py", "--targets", "9", "--seeds", "0-1", "--resume",
                            str(folder / "sweep.csv"), "--freeze"], folder,
                           {"TEST_CODE_VERSION": "abc1234", "TEST_CODE_VERSION_AT_WRITE": "def5678"})

    # evidence_auc: the frozen rows less one run; the asked run is among them, so nothing is fitted.
    folder = case("evidence_gap", "mnist_evidence")
    evidence = frozen.load_frozen("mnist_evidence")
    evidence.drop(index=evidence.index[-1]).to_csv(folder / "evidence.csv", index=False)
    cases["evidence_gap"] = (["evidence_auc.py", "--seeds", "0", "--targets", "9", "--models", "paper", "--out",
                              str(folder / "evidence.csv"), "--freeze"], folder, {"TEST_CODE_VERSION": "abc1234"})
    # evidence_auc from a tree with uncommitted changes, asked for a run its rows lack: refused before that fit.
    folder = case("evidence_dirty", "mnist_evidence")
    evidence.to_csv(folder / "evidence.csv", index=False)
    cases["evidence_dirty"] = (["evidence_auc.py", "--seeds", "10", "--targets", "9", "--models", "paper", "--out",
                                str(folder / "evidence.csv"), "--freeze"], folder,
                               {"TEST_CODE_VERSION": "abc1234+dirty"})

    # recommended_lodo: every candidate's first repetition only (the ranking needs 5 x 10); lodo.json beside it.
    candidates = frozen.load_frozen("recommended_candidates")
    lodo_json = json.dumps({"wall_seconds": {f"fox|candidate {i}": 1.0 for i in range(200)}}, indent=2)
    for name in ("lodo_partial", "lodo_stopped"):
        folder = case(name, "recommended_candidates_mnist", "recommended_candidates")
        (folder / "lodo").mkdir()
        candidates[candidates.repeat == 1].to_csv(folder / "lodo" / "results.csv", index=False)
        (folder / "lodo" / "lodo.json").write_text(lodo_json)
    cases["lodo_partial"] = (["recommended_lodo.py", "--out", str(root / "lodo_partial" / "lodo"), "--candidates",
                              "--freeze"], root / "lodo_partial", {"TEST_CODE_VERSION": "abc1234"})
    # No --freeze: it tabulates and rewrites lodo.json, under a file-size limit that stops the rewrite.
    cases["lodo_stopped"] = (["recommended_lodo.py", "--out", str(root / "lodo_stopped" / "lodo"), "--candidates"],
                             root / "lodo_stopped", {"FILE_LIMIT_KB": "2"})

    # Usage errors, each before any data is loaded.
    usage = {
        "usage_methods": ["bench_baselines.py", "--methods", "nosuch", "--quick"],
        "usage_missing_rows": ["mil_unit_tests_seeds.py", "--out", "MISSING", "--freeze"],
        "usage_ablations_subset": ["freeze_ablations.py", "--datasets", "musk1", "--freeze"],
        "usage_ablations_protocol": ["freeze_ablations.py", "--epochs", "5", "--freeze"],
        # The case's frozen folder is empty: the table to compare with is missing, said before any work.
        "usage_ablations_no_table": ["freeze_ablations.py", "--datasets", "musk1"],
        "usage_monotone_note": ["freeze_monotone.py", "--note", "why"],
        "usage_monotone_no_table": ["freeze_monotone.py"],
    }
    for name, argv in usage.items():
        folder = case(name)
        argv = [str(folder / "none" / "u.csv") if a == "MISSING" else a for a in argv]
        cases[name] = (argv, folder, {})
    return cases


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict[str, Ran]:
    root = tmp_path_factory.mktemp("scripts")
    (root / "site").mkdir()
    (root / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    cases = _cases(root)

    def one(item):
        name, (argv, folder, extra) = item
        env = {**os.environ, "PYTHONPATH": f"{root / 'site'}{os.pathsep}{REPO}", "OMP_NUM_THREADS": "1",
               "TEST_FROZEN_DIR": str(folder / "frozen"), **extra}
        before = _snapshot(folder)
        command = [sys.executable, str(SCRIPTS / argv[0]), *argv[1:]]
        if "FILE_LIMIT_KB" in extra:  # bash's ulimit, not preexec_fn: these children start from threads
            command = ["bash", "-c", f'ulimit -f {extra["FILE_LIMIT_KB"]} && exec "$0" "$@"', *command]
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
        after = _snapshot(folder)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        return name, Ran(done.returncode, done.stderr, changed, folder, done.stdout)

    with ThreadPoolExecutor(max_workers=2) as pool:  # the machine has two cores
        return dict(pool.map(one, cases.items()))


def _refused(result: Ran, *words: str) -> None:
    """Exit status 2, one line on stderr naming the problem, and no file written or changed."""
    lines = result.err.strip().splitlines()
    assert result.rc == 2, result.err
    assert len(lines) == 1, result.err
    for word in words:
        assert word in lines[0], lines[0]
    assert result.changed == []


def test_reproduce_all_refuses_a_run_short_of_every_method_data_set_and_fold(ran):
    _refused(ran["reproduce_partial"], "not a full run", "prototype (published code) on musk1 (0 of 50 folds)")


def test_reproduce_all_never_records_an_unknown_commit(ran):
    _refused(ran["reproduce_no_commit"], "no run.json naming its code", "--commit")


def test_reproduce_all_refuses_a_run_of_other_settings(ran):
    _refused(ran["reproduce_other_rates"], "not run with reproduce's defaults (lr_prototypes=0.01)")


def test_reproduce_all_records_the_runs_commit_and_the_from_command(ran):
    result = ran["reproduce_full"]
    assert result.rc == 0, result.err
    meta = json.loads((result.folder / "frozen" / "measured_results.json").read_text())
    assert meta["commit"] == "abc1234"  # from the run's run.json
    assert meta["command"] == f"python benchmarks/reproduce_all.py --from {result.folder / 'run'} --freeze"
    table = pd.read_csv(result.folder / "frozen" / "measured_results.csv")
    assert set(table["method"]) == {methods.get(k).label for k in methods.MEASURED}


def test_freeze_monotone_refuses_a_run_short_of_the_five_data_sets(ran):
    _refused(ran["monotone_partial"], "not a full run", "prototype (monotone) on musk2 (0 of 50 folds)")


def test_freeze_monotone_refuses_a_run_of_uncommitted_code(ran):
    _refused(ran["monotone_dirty_run"], "run.json", "plain git commit hash", "+dirty")


def test_freeze_monotone_refuses_a_run_of_other_settings(ran):
    _refused(ran["monotone_other_seed"], "not run with reproduce's defaults (epochs=5, seed=3)")


def test_freeze_monotone_records_the_runs_commit_and_compares_every_fold(ran):
    result = ran["monotone_full"]
    assert result.rc == 0, result.err
    meta = json.loads((result.folder / "frozen" / "monotone_results.json").read_text())
    assert meta["commit"] == "abc1234def56"
    assert meta["command"] == f"python benchmarks/freeze_monotone.py --from {result.folder / 'run'} --freeze"
    table = pd.read_csv(result.folder / "frozen" / "monotone_results.csv")
    assert len(table) == 250 and set(table["dataset"]) == set(frozen.load_frozen("monotone_results")["dataset"])
    # The same rows, epochs whole beside the baseline's empty one: the same CSV, new provenance.
    assert result.changed == ["frozen/monotone_results.json"]
    assert "250 of 250 folds equal the frozen table's" in result.out


def test_freeze_common_budget_names_the_folds_with_no_score(ran):
    _refused(ran["budget_nan"], "2 fold(s) with no score", "on tiger: repeat.fold 1.4, 3.8")


def test_run_ladder_freezes_only_the_whole_ladder_with_its_nested_rung(ran):
    _refused(ran["ladder_no_nested"], "--no-nested")
    _refused(ran["ladder_subset"], "all five data sets", "got musk1")


def test_a_frozen_sweep_records_the_targets_and_seeds_its_rows_hold(ran):
    result = ran["sweep_rows"]
    assert result.rc == 0, result.err
    meta = json.loads((result.folder / "frozen" / "mnist_seed_sweep.json").read_text())
    assert meta["command"] == "python benchmarks/mnist_seed_sweep.py --targets 9 --seeds 0-1 --freeze"
    assert "seeds 0-1, targets 9," in meta["description"]


def test_a_freeze_records_the_commit_read_at_startup(ran):
    meta = json.loads((ran["sweep_rows"].folder / "frozen" / "mnist_seed_sweep.json").read_text())
    assert meta["commit"] == "abc1234"  # not "def5678", the code by the time the table was written


def test_a_freezer_refuses_uncommitted_code_before_its_work(ran):
    _refused(ran["evidence_dirty"], "this checkout", "'abc1234+dirty'", "commit, then freeze")


def test_evidence_auc_refuses_rows_that_no_single_command_made(ran):
    _refused(ran["evidence_gap"], "lacks 1 of the 40 runs", "recommended target 5 seed 9")


def test_recommended_lodo_refuses_to_freeze_one_repetition_as_five(ran):
    _refused(ran["lodo_partial"], "not a full run", "(10 of 50 folds)")


def test_a_stopped_rewrite_leaves_the_earlier_file_whole(ran):
    result = ran["lodo_stopped"]
    assert result.rc != 0 and "File too large" in result.err, result.err
    assert result.changed == []


@pytest.mark.parametrize("name, words", [
    ("usage_methods", ["--methods", "invalid choice: 'nosuch'"]),
    ("usage_missing_rows", ["--freeze", "is no file of collected rows"]),
    ("usage_ablations_subset", ["--freeze needs all five data sets", "got musk1"]),
    ("usage_ablations_protocol", ["--freeze runs the table's protocol", "drop --epochs 5"]),
    ("usage_ablations_no_table", ["cannot read the frozen table ablation_deltas_5datasets"]),
    ("usage_monotone_note", ["--note goes with --freeze"]),
    ("usage_monotone_no_table", ["cannot read the frozen table monotone_results"]),
])
def test_usage_errors_end_at_startup_in_one_line(ran, name, words):
    _refused(ran[name], *words)


@pytest.mark.parametrize("script, argv, words", [
    ("pathology_compare", ["--seed", "-1"], ["--seed", "out of range"]),
    ("run_ladder", ["--seed", "x"], ["--seed", "not a whole number"]),
    ("bench_recommended_large", ["--seeds", "0"], ["--seeds", "out of range"]),
    ("bench_misvm", ["--folds", "51"], ["--folds", "at most 50"]),
    ("crosscheck_torchmil", ["--only-repeats", "0"], ["--only-repeats", "out of range"]),
    ("mnist_localisation", ["--target", "12"], ["--target", "not a digit"]),
    ("evidence_auc", ["--targets", "9,10"], ["--targets", "not a digit"]),
    ("bench_scale", ["--procs", "0,2"], ["--procs", "at least 1"]),
    ("freeze_ablations", ["--folds", "1"], ["--folds", "at least 2"]),
])
def test_numeric_options_are_refused_at_startup_in_one_line(monkeypatch, capsys, script, argv, words):
    # In this process (torch is loaded already): the option is read before any data or model.
    stop = _stopped_in_process(monkeypatch, script, argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    for word in words:
        assert word in err[0], err[0]


def test_the_scaling_figure_refuses_uncommitted_code_before_timing(monkeypatch, capsys):
    # In this process: the refusal must come before the timings, which take minutes.
    def started(*_):
        raise AssertionError("the timings started before the code version was checked")

    monkeypatch.setattr(frozen, "code_version", lambda: "abc1234+dirty")
    stop = _stopped_in_process(monkeypatch, "bench_training", ["--scaling-only", "--freeze"],
                               warm_up=started, scaling=started)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    assert "'abc1234+dirty'" in err[0] and "commit, then freeze" in err[0], err[0]


def test_the_ablation_freezer_refuses_uncommitted_code_before_its_runs(monkeypatch, capsys):
    def started(*_, **__):
        raise AssertionError("the ablations started before the code version was checked")

    monkeypatch.setattr(frozen, "code_version", lambda: "abc1234+dirty")
    stop = _stopped_in_process(monkeypatch, "freeze_ablations", ["--freeze"], load_benchmark=started,
                               run_ablations=started)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    assert "'abc1234+dirty'" in err[0] and "commit, then freeze" in err[0], err[0]


def _stopped_in_process(monkeypatch, script: str, argv: list[str], **replace) -> pytest.ExceptionInfo:
    """``benchmarks/<script>.py``'s main run in this process with ``argv`` (its module's ``replace`` names set
    first), which must stop with SystemExit; the scripts' modules are forgotten afterwards."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *argv])
    try:
        module = importlib.import_module(script)
        for name, value in replace.items():
            monkeypatch.setattr(module, name, value)
        with pytest.raises(SystemExit) as stop:
            module.main()
    finally:
        for name in (script, "per_bag_loop", "script_args"):
            sys.modules.pop(name, None)
    return stop
