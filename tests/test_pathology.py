"""Tests for minitorch_proto.data.pathology: the UCSB breast cancer set, loaded like the benchmarks.

Downloads use ``file://`` URLs of small files made here, so no network is needed. The
real file is read from ``../shared/data/pathology`` beside the repository (the
sibling of ``$MINITORCH_PROTO_DATA``'s benchmark folder); those tests are skipped when
it is absent.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest

from minitorch_proto.data import (
    CACHE_ENV_VAR,
    DATA_ENV_VAR,
    PATHOLOGY,
    ChecksumError,
    DownloadError,
    load_benchmark,
    load_pathology,
)

_ENV_DATA = os.environ.get(DATA_ENV_VAR)  # read before the autouse fixture clears it
SHARED_MIL = Path(_ENV_DATA) if _ENV_DATA else Path(__file__).resolve().parents[2] / "shared/data/mil"
SHARED = SHARED_MIL.parent / "pathology"
REAL = SHARED / "ucsb_breast_cancer.csv"
needs_real = pytest.mark.skipif(not REAL.is_file(), reason=f"pathology data not found in {SHARED}")

FILE = "ucsb_breast_cancer.csv"
# Two bags, out of order: bag 2 positive (2 patches), bag 1 negative (1 patch).
TOY_CSV = "1,2,0.5,1.0,0\n0,1,1.5,-2.0,0\n1,2,2.5,3.0,0\n"
TOY_COUNTS = dict(n_bags=2, n_positive=1, n_negative=1, n_instances=3, n_features=3,
                  min_bag_size=1, max_bag_size=2)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    # No test may read the user's data folder or write to the real ~/.cache.
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "default-cache"))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _toy_entry(monkeypatch, urls) -> None:
    """Point PATHOLOGY['ucsb_breast_cancer'] at the tiny CSV, served from ``urls``."""
    info = dataclasses.replace(
        PATHOLOGY["ucsb_breast_cancer"], sha256=hashlib.sha256(TOY_CSV.encode()).hexdigest(),
        urls=tuple(urls), **TOY_COUNTS,
    )
    monkeypatch.setitem(PATHOLOGY, "ucsb_breast_cancer", info)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# --------------------------------------------------------------------------- #
# The registry entry
# --------------------------------------------------------------------------- #
def test_entry_matches_the_data_readme_typed_in_here():
    # The README's table (shared/data/pathology/README.md), typed in independently.
    info = PATHOLOGY["ucsb_breast_cancer"]
    assert info.file_name == FILE
    assert info.sha256 == "9e48d4d5d44ae2728c940e8d79b3e59ffcec3e515017f70d3feb0063148dbd96"
    assert (info.n_bags, info.n_positive, info.n_negative, info.n_instances, info.n_features,
            info.min_bag_size, info.max_bag_size) == (58, 26, 32, 2002, 708, 21, 40)
    # The download address pins a commit first (immutable), then the branch.
    assert re.search(r"/[0-9a-f]{40}/", info.urls[0]) and info.urls[0].endswith(FILE)
    assert all(u.startswith("https://") for u in info.urls)


@pytest.mark.skipif(not (SHARED / "README.md").is_file(), reason="pathology README not present")
def test_entry_sha256_is_the_readme_one():
    assert PATHOLOGY["ucsb_breast_cancer"].sha256 in (SHARED / "README.md").read_text()


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="ucsb_breast_cancer"):
        load_pathology("ucsb_colon", download=False)


def test_load_benchmark_points_to_load_pathology():
    with pytest.raises(ValueError, match="load_pathology"):
        load_benchmark("ucsb_breast_cancer", download=False)


# --------------------------------------------------------------------------- #
# Checksums and where the file is found
# --------------------------------------------------------------------------- #
def test_checksum_mismatch_is_refused_in_one_line(tmp_path):
    folder = _write(tmp_path / "data" / FILE, TOY_CSV).parent
    with pytest.raises(ChecksumError) as err:
        load_pathology(data_dir=folder)
    msg = str(err.value)
    assert "\n" not in msg
    assert PATHOLOGY["ucsb_breast_cancer"].sha256 in msg
    assert hashlib.sha256(TOY_CSV.encode()).hexdigest() in msg
    assert "verify=False" in msg
    # Without the checksum the counts still give the fake away.
    with pytest.raises(ValueError, match=r"bags: 2 \(expected 58\)"):
        load_pathology(data_dir=folder, verify=False)


@pytest.mark.parametrize("where", ["folder", "sub-folder", "sibling"])
def test_named_folder_is_searched_in_three_places(monkeypatch, tmp_path, where):
    _toy_entry(monkeypatch, urls=[])
    data = tmp_path / "data" / "mil"
    place = {"folder": data, "sub-folder": data / "pathology", "sibling": data.parent / "pathology"}[where]
    _write(place / FILE, TOY_CSV)
    data.mkdir(parents=True, exist_ok=True)
    ds = load_pathology(data_dir=data)
    assert ds.source == str(place / FILE)
    monkeypatch.setenv(DATA_ENV_VAR, str(data))
    assert load_pathology().source == str(place / FILE)


def test_named_folder_without_file_is_an_error_not_a_download(monkeypatch, tmp_path):
    src = _write(tmp_path / "server" / FILE, TOY_CSV)
    _toy_entry(monkeypatch, urls=[src.as_uri()])
    cache = tmp_path / "cache"
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "mil"))
    with pytest.raises(FileNotFoundError) as err:
        load_pathology(cache_dir=cache)
    msg = str(err.value)
    assert f"${DATA_ENV_VAR}" in msg and "does not exist" in msg
    assert str(tmp_path / "mil" / "pathology") in msg and str(tmp_path / "pathology") in msg
    assert src.as_uri() in msg
    assert _leftovers(cache) == []


def test_offline_without_data_names_the_file_and_the_variable(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_pathology(download=False, cache_dir=tmp_path / "empty-cache")
    msg = str(err.value)
    assert FILE in msg and DATA_ENV_VAR in msg and "load_pathology" in msg
    assert str(tmp_path / "empty-cache") in msg


# --------------------------------------------------------------------------- #
# Downloads (file:// URLs of a small file made here)
# --------------------------------------------------------------------------- #
def test_download_into_cache_then_reuse(monkeypatch, tmp_path):
    dead = (tmp_path / "dead-mirror" / FILE).as_uri()
    src = _write(tmp_path / "server" / FILE, TOY_CSV)
    _toy_entry(monkeypatch, urls=[dead, src.as_uri()])
    cache = tmp_path / "cache"
    first = load_pathology(cache_dir=cache)
    assert _leftovers(cache) == [FILE]
    assert first.name == "ucsb_breast_cancer"
    np.testing.assert_array_equal(first.bag_ids, [1, 2])
    np.testing.assert_array_equal(first.y, [0, 1])
    src.unlink()  # a second download would now fail
    second = load_pathology(cache_dir=cache, download=False)
    assert second.source == str(cache / FILE)
    np.testing.assert_array_equal(second.y, first.y)


def test_download_with_wrong_checksum_leaves_nothing(monkeypatch, tmp_path):
    src = _write(tmp_path / "server" / FILE, TOY_CSV.replace("3.0", "3.5"))
    _toy_entry(monkeypatch, urls=[src.as_uri()])
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        load_pathology(cache_dir=cache)
    assert _leftovers(cache) == []


def test_corrupt_cache_says_delete(monkeypatch, tmp_path):
    _toy_entry(monkeypatch, urls=[])
    cache = tmp_path / "cache"
    _write(cache / FILE, TOY_CSV.replace("0.5", "0.6"))
    with pytest.raises(ChecksumError, match="Delete it"):
        load_pathology(cache_dir=cache)


# --------------------------------------------------------------------------- #
# The real file
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def real():
    if not REAL.is_file():
        pytest.skip(f"pathology data not found in {SHARED}")
    # Found from the benchmark folder the Makefile names, through the sibling rule.
    return load_pathology(data_dir=SHARED_MIL)


@needs_real
def test_real_shape(real):
    s = real.summary()
    assert real.source == str(REAL)
    assert (s["bags"], s["positive"], s["negative"], s["instances"], s["features"]) == (58, 26, 32, 2002, 708)
    assert (s["min_bag_size"], s["max_bag_size"]) == (21, 40)
    assert all(b.shape[1] == 708 for b in real.bags)


@needs_real
def test_real_ids_and_labels_as_given(real):
    # Read the first two columns with the csv module, independently of the loader.
    with open(REAL, newline="") as fh:
        rows = [(int(r[0]), int(r[1])) for r in csv.reader(fh)]
    given = dict((bag, label) for label, bag in rows)
    sizes = np.bincount([bag for _, bag in rows])[1:]
    # The file's ids are integers 1..58 (no string ids), kept as int64 like the benchmarks'.
    assert real.bag_ids.dtype == np.int64
    np.testing.assert_array_equal(real.bag_ids, np.arange(1, 59))
    np.testing.assert_array_equal(real.y, [given[int(b)] for b in real.bag_ids])
    np.testing.assert_array_equal(real.bag_sizes, sizes)
    # 1 = malignant: bags 1-26; 0 = benign: bags 27-58.
    np.testing.assert_array_equal(real.y, [1] * 26 + [0] * 32)
    assert real.y.dtype == np.int64


# --------------------------------------------------------------------------- #
# benchmarks/pathology_compare.py on small bags made here
# --------------------------------------------------------------------------- #
def test_compare_script_adds_balanced_accuracy_on_shared_folds(monkeypatch, tmp_path, capsys):
    import importlib.util
    import json

    import pandas as pd

    from minitorch_proto.data import BagDataset

    from .conftest import make_concept_bags

    spec = importlib.util.spec_from_file_location(
        "pathology_compare", Path(__file__).resolve().parents[1] / "benchmarks" / "pathology_compare.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    # Unbalanced classes (14 positive, 26 negative), so balanced accuracy differs from accuracy somewhere.
    bags, y = make_concept_bags(n_bags=40, seed=3, shift=1.5)
    y[np.flatnonzero(y == 1)[:6]] = 0
    toy = BagDataset("toy", bags, y, np.arange(1, 41))
    monkeypatch.setattr(script, "load_pathology", lambda data_dir=None: toy)
    assert script.main(["--methods", "miles,bag_stats", "--folds", "3", "--threads", "1",
                        "--out", str(tmp_path / "out")]) == 0
    rows = pd.read_csv(tmp_path / "out" / "folds.csv")
    assert len(rows) == 6 and set(rows["key"]) == {"miles", "bag_stats"}
    # Same folds for both methods.
    by = {k: g.sort_values("fold")[["fold", "n_test", "seed"]].to_numpy() for k, g in rows.groupby("key")}
    np.testing.assert_array_equal(by["miles"], by["bag_stats"])
    assert rows["balanced_accuracy"].between(0, 1).all()
    assert (rows["balanced_accuracy"] != rows["accuracy"]).any()
    table = (tmp_path / "out" / "table.md").read_text()
    assert "balanced accuracy" in table and "`miles`" in table
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(last["methods"]) == {"miles", "bag_stats"}


def test_the_pathology_table_says_what_each_method_had():
    import pandas as pd

    from minitorch_proto.book import method_budget, pathology_table

    assert method_budget("prototype-recommended") == ("2-member ensemble, the head's strength and features chosen "
                                                      "on inner folds, the shipped recipe")
    assert method_budget("attention") == "one model, package defaults"
    assert method_budget("prototype") == "one model, package defaults (Musk1's Table 1 rates)"
    assert method_budget("prototype-tuned").endswith("settings compared on inner folds, the best refitted")
    assert method_budget("prototype-best").startswith("settings searched on inner folds")
    assert method_budget("prototype-compat") == "one model, the published code's settings"
    rows = pd.DataFrame({"key": ["miles", "miles"], "auc": [0.8, 0.9], "balanced_accuracy": [0.7, 0.8],
                         "accuracy": [0.7, 0.8], "repeat": [1, 1], "fit_seconds": [1.0, 3.0]})
    table = pathology_table(rows)
    assert table.loc[0, "budget"] == "one model, package defaults" and table.loc[0, "fit s / fold"] == 2.0


def test_compare_on_bags_runs_every_method_a_key_names_once():
    # "all" and "a,b" name several methods; only the first had run, and a method named twice was pooled
    # into one row of twice the folds.
    from minitorch_proto.book import compare_on_bags, method_keys
    from minitorch_proto.data import BagDataset
    from minitorch_proto.evaluation import stratified_folds

    from .conftest import make_concept_bags

    bags, y = make_concept_bags(n_bags=24, seed=1)
    toy = BagDataset("toy", bags, y, np.arange(24))
    folds = stratified_folds(y, 1, 2, random_state=0)
    rows, fitted = compare_on_bags(toy, folds, ["bag_stats,miles", "bag_stats"])
    assert list(rows.groupby("key", sort=False).size().items()) == [("bag_stats", 2), ("miles", 2)]
    assert set(fitted) == {"bag_stats", "miles"}
    assert method_keys("miles, bag_stats", "pathology_methods") == ["miles", "bag_stats"]
    assert method_keys(["miles", "miles"], "m") == ["miles"]
    assert len(method_keys("all", "m")) > 5
    with pytest.raises(ValueError, match="^parameter pathology_methods: unknown method 'prototype-recomended'"):
        method_keys(["miles", "prototype-recomended"], "pathology_methods")


def test_balanced_accuracy_is_the_mean_recall_of_each_fold_model():
    from sklearn.metrics import recall_score

    from minitorch_proto.book import compare_on_bags
    from minitorch_proto.data import BagDataset
    from minitorch_proto.evaluation import stratified_folds

    from .conftest import make_concept_bags

    bags, y = make_concept_bags(n_bags=40, seed=3, shift=1.5)
    y[np.flatnonzero(y == 1)[:6]] = 0  # 14 positive, 26 negative
    toy = BagDataset("toy", bags, y, np.arange(1, 41))
    folds = stratified_folds(y, n_repeats=1, n_folds=3)
    rows, fitted = compare_on_bags(toy, folds, ["bag_stats"])
    for (_, row), fold, model in zip(rows.iterrows(), folds, fitted["bag_stats"]):
        pred = model.predict([bags[i] for i in fold.test])
        recalls = recall_score(y[fold.test], pred, average=None, labels=[0, 1])
        assert row.balanced_accuracy == pytest.approx(recalls.mean())
    assert (rows["balanced_accuracy"] != rows["accuracy"]).any()  # unbalanced: the two differ somewhere


def test_a_table_cell_shows_an_se_over_repetitions_only_with_two_of_them():
    import numpy as np
    import pandas as pd

    from minitorch_proto.book.pathology_page import _cell

    # One repetition with values: the SE over repetition means does not exist (the folds' SE had been shown as it).
    assert "SE" not in _cell(pd.Series([0.8, 0.9, np.nan, np.nan]), pd.Series([1, 1, 2, 2]))
    assert _cell(pd.Series([0.8, 0.9, 0.7, 0.6]), pd.Series([1, 1, 2, 2])).endswith("(SE 0.100)")


def test_the_command_line_names_the_set_with_dataset_and_checks_its_sha256(tmp_path, capsys):
    # It had been refused with "use load_pathology", a Python-only hint; --csv skipped the checksum.
    from minitorch_proto.cli import main

    folder = _write(tmp_path / "data" / FILE, TOY_CSV).parent
    code = main(["train", "--dataset", "ucsb_breast_cancer", "--data-dir", str(folder), "--epochs", "1",
                 "--out", str(tmp_path / "m.safetensors")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "add --no-verify" in err[0], err
    assert not (tmp_path / "m.safetensors").exists()


@needs_real
def test_train_and_predict_on_the_real_set_by_name(tmp_path, capsys):
    from minitorch_proto.cli import main

    model = tmp_path / "m.safetensors"
    assert main(["train", "--dataset", "UCSB_breast_cancer", "--data-dir", str(SHARED), "--epochs", "1",
                 "--prototypes", "3", "--out", str(model), "--quiet"]) == 0
    assert "trained on 58 bags (ucsb_breast_cancer, 708 features)" in capsys.readouterr().out
    assert main(["predict", "--model", str(model), "--dataset", "ucsb_breast_cancer", "--data-dir", str(SHARED)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 59


def test_the_command_line_says_drop_no_download_not_the_python_call(tmp_path, monkeypatch, capsys):
    from minitorch_proto.cli import main

    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "cache"))
    code = main(["train", "--dataset", "ucsb_breast_cancer", "--no-download", "--out", str(tmp_path / "m.safetensors")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1, err
    assert "Drop --no-download" in err[0] and "load_pathology(" not in err[0], err[0]


def test_an_unknown_dataset_name_lists_the_pathology_sets_too(tmp_path, capsys):
    from minitorch_proto.cli import main

    assert main(["train", "--dataset", "ucsb", "--out", str(tmp_path / "m.safetensors")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("or a pathology set: ucsb_breast_cancer.") and "musk1" in err and "\n" not in err, err
