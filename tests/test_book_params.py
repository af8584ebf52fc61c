"""Notebook parameters are checked before any work, and the MNIST page's bar follows its k."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from minitorch_proto.book import as_choices, digit_like_bar, mnist_sweep_verdict
from minitorch_proto.data import BENCHMARKS


def test_as_choices_reads_what_papermill_and_users_hand_over():
    assert as_choices("Musk1", "datasets", BENCHMARKS, lower=True) == ["musk1"]  # -p datasets Musk1
    assert as_choices(("fox", "TIGER"), "datasets", BENCHMARKS, lower=True) == ["fox", "tiger"]
    assert as_choices(9, "targets", range(10)) == [9]
    assert as_choices(["a b"], "models") == ["a b"]  # a list is kept as it is
    with pytest.raises(ValueError, match=r"parameter datasets: unknown \['m'\]; valid values are \['musk1'"):
        as_choices(["m"], "datasets", BENCHMARKS)  # "musk1" split into letters used to reach the loader
    with pytest.raises(ValueError, match="parameter modes is empty"):
        as_choices([], "modes")
    # papermill -p hands a list over as its text
    assert as_choices('["elephant", "Fox"]', "datasets", BENCHMARKS, lower=True) == ["elephant", "fox"]
    assert as_choices("[tiger, musk2]", "datasets", BENCHMARKS) == ["tiger", "musk2"]
    assert as_choices("[3, 5]", "targets", range(10)) == [3, 5]
    with pytest.raises(ValueError, match="does not parse; pass lists with papermill -y"):
        as_choices("[fox, {]", "datasets", BENCHMARKS)


def test_the_digit_like_bar_is_three_quarters_of_k():
    assert [digit_like_bar(k) for k in (8, 5, 4, 1)] == [6, 4, 3, 1]  # 8 keeps the paper page's 6
    import pandas as pd

    table = pd.DataFrame({"target": [9], "seed": [0], "digit_like": [True], "test_auc": [0.9]})
    assert "at least 4 of 5" in mnist_sweep_verdict(table, k=5)  # it read "at least 6 of 5"
    # The bar printed is the bar tested: 0.9 of 5 runs needs 5 (round(4.5) had printed "4/5" beside "misses").
    five = pd.DataFrame({"target": [9] * 5, "seed": range(5), "digit_like": [True] * 4 + [False],
                         "test_auc": [0.9] * 5})
    assert "4 of 5 runs" in mnist_sweep_verdict(five) and "(misses the bar of 5/5 and 0.85)" in mnist_sweep_verdict(five)
    assert "(meets the bar of 9/10 and 0.85)" in mnist_sweep_verdict(
        pd.concat([five, five.assign(seed=five.seed + 5, digit_like=True)]))


def test_output_folder_is_made_before_any_work_or_refused_in_one_line(tmp_path, monkeypatch):
    import os

    from minitorch_proto.book import output_folder

    monkeypatch.chdir(tmp_path)
    assert output_folder(None, "02_reproduction") == Path("outputs") / "02_reproduction"
    assert (tmp_path / "outputs" / "02_reproduction").is_dir()
    assert output_folder(tmp_path / "a" / "b", "x").is_dir()
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ValueError, match="parameter out_dir: cannot make the folder"):  # was mkdir's traceback
        output_folder(tmp_path / "file" / "sub", "x")
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(ValueError, match="is not writable"):
            output_folder(locked, "x")


def test_seed_spans_and_seed_parameters():
    from minitorch_proto.book import seed_span

    assert seed_span(range(10)) == "0-9" and seed_span([7, 0]) == "0, 7" and seed_span([3]) == "3"
    assert seed_span([0, 1]) == "0, 1" and seed_span([0, 1, 2, 5]) == "0, 1, 2, 5"
    assert as_choices("[0, 1]", "sweep_seeds", range(2**32)) == [0, 1]
    with pytest.raises(ValueError, match=r"^parameter sweep_seeds: unknown \['0,1'\]"):
        as_choices("0,1", "sweep_seeds", range(2**32))


def test_epochs_zero_is_refused_not_read_as_the_default():
    from minitorch_proto import paper_configs

    assert paper_configs("musk1")[1].epochs == 100 and paper_configs("musk1", epochs=3)[1].epochs == 3
    with pytest.raises(ValueError, match="epochs must be >= 1, got 0"):
        paper_configs("musk1", epochs=0)  # it had trained 100 epochs under a page that said 0


def test_page_04_s_epochs_reach_every_paper_model_row_and_no_baseline():
    # The page passed epochs and device to the row named "prototype" only; the command line's flags
    # reach the variants too (FLAGGED_METHODS).
    from types import SimpleNamespace

    from minitorch_proto.book import method_keys, run_methods_on_benchmarks

    from .conftest import make_concept_bags

    bags, y = make_concept_bags(n_bags=16, seed=0)
    methods = method_keys("prototype,prototype-compat,bag_stats", "methods")
    rows = run_methods_on_benchmarks({"toy": SimpleNamespace(bags=bags, y=y)}, methods, repeats=1, folds=2,
                                     epochs=2, device="cpu")
    epochs = rows.groupby("method")["epoch"].max()
    assert epochs["prototype"] == 2 and epochs["prototype-compat"] == 2
    assert sorted(set(rows["method"])) == ["bag_stats", "prototype", "prototype-compat"]


def test_count_parameters_are_whole_numbers_checked_by_name():
    from minitorch_proto.book import count_param

    assert count_param(10, "seeds") == 10 and count_param(2, "folds", 2) == 2
    for bad in (0, [0, 3], 2.5, True, "10"):
        with pytest.raises(ValueError, match="^parameter seeds is a count, a whole number of at least 1; got "):
            count_param(bad, "seeds")
    with pytest.raises(ValueError, match="at least 2; got 1"):
        count_param(1, "folds", 2)


def test_page_04_s_folds_are_checked_on_every_data_set_before_any_training(monkeypatch):
    from types import SimpleNamespace

    import minitorch_proto.book.baselines_page as page

    from .conftest import make_concept_bags

    fitted = []
    monkeypatch.setattr(page, "cross_validate", lambda *a, **k: fitted.append(a) or None)
    big, small = make_concept_bags(n_bags=40, seed=0), make_concept_bags(n_bags=8, seed=1)
    data = {"big": SimpleNamespace(bags=big[0], y=big[1]), "small": SimpleNamespace(bags=small[0], y=small[1])}
    with pytest.raises(ValueError, match="n_folds"):
        page.run_methods_on_benchmarks(data, ["bag_stats"], repeats=1, folds=5)
    assert fitted == []  # the first data set was not cross-validated before the second failed


def test_switches_seeds_devices_and_repeats_of_notebook_parameters():
    from minitorch_proto.book import as_choices, device_param, flag_param, seed_param

    # papermill -p turns only True/False into bools: "false" had switched a check on.
    assert [flag_param(v, "quick") for v in (True, False, "false", " TRUE ", np.bool_(False))] == [
        True, False, False, True, False]
    for bad in ("no", "0", 0, 1, None, "yes"):
        with pytest.raises(ValueError, match=r"parameter quick is True or False; got"):
            flag_param(bad, "quick")
    assert seed_param(np.int64(7)) == 7 and seed_param(2**32 - 1) == 2**32 - 1
    for bad in (-1, 2**32, 1.5, True, "3"):
        with pytest.raises(ValueError, match=r"parameter seed is a seed, a whole number from 0 to 4294967295"):
            seed_param(bad)
    assert device_param("cpu") == "cpu" and device_param("auto") == "auto"
    with pytest.raises(ValueError, match=r"parameter device: Unknown device 'gpu'"):
        device_param("gpu")
    # One seed given twice is one run, not two (a sweep had counted "0 of 2 runs" for seeds [0, 0]).
    assert as_choices([0, 0, 1], "sweep_seeds", range(10)) == [0, 1]
    assert as_choices(["musk1", "Musk1"], "datasets", ["musk1"], lower=True) == ["musk1"]
