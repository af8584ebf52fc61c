"""Inputs that lie (issue 31): ids stay strings, one label convention, float32's range, model files checked."""
from __future__ import annotations

import json
import re
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from minitorch_proto import load_bags_csv
from minitorch_proto.cli import main
from minitorch_proto.data.disk import write_bag_folder
from minitorch_proto.estimator import PrototypeMILClassifier, load_model
from minitorch_proto.serialization import ModelFileError, load_model_file, save_model_file, staged_directory

from .conftest import make_concept_bags

FAST = ["--epochs", "2", "--prototypes", "3"]


def _csv(path, ids, labels, values=None, n_features=3, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for k, (b, lab) in enumerate(zip(ids, labels)):
        for _ in range(2):
            feats = rng.normal(size=n_features) + (2.0 if k % 2 else 0.0)
            rows.append({"bag": b, "label": lab, **{f"f{j}": v for j, v in enumerate(feats)}})
    df = pd.DataFrame(rows)
    if values is not None:
        for (r, c), v in values.items():
            df.loc[r, c] = v
    df.to_csv(path, index=False)
    return path


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err.strip()


def test_bag_ids_stay_the_strings_users_wrote(tmp_path, capsys):
    ids = [f"{i:03d}" for i in range(10)] + [str(i) for i in range(10)]
    path = _csv(tmp_path / "ids.csv", ids, [i % 2 for i in range(20)])
    data = load_bags_csv(path)
    assert list(data.bag_ids) == ids and data.n_bags == 20
    code, out, _ = _run(capsys, "train", "--csv", path, *FAST, "--out", tmp_path / "m.safetensors")
    assert code == 0 and "20 bags" in out
    code, _, _ = _run(capsys, "predict", "--model", tmp_path / "m.safetensors", "--csv", path,
                      "--out", tmp_path / "p.csv")
    pred = pd.read_csv(tmp_path / "p.csv", dtype={"bag": str})
    assert code == 0 and list(pred.bag) == ids


def test_one_and_one_point_zero_are_two_bags(tmp_path):
    path = _csv(tmp_path / "x.csv", ["1", "1.0", "2", "2.0"], [0, 1, 0, 1])
    assert list(load_bags_csv(path).bag_ids) == ["1", "1.0", "2", "2.0"]


@pytest.mark.parametrize("stream", [False, True])
def test_values_float32_cannot_hold_are_refused_in_one_line(tmp_path, capsys, stream):
    ids = [f"b{i}" for i in range(8)]
    path = _csv(tmp_path / "huge.csv", ids, [i % 2 for i in range(8)], values={(5, "f1"): 1e300})
    code, _, err = _run(capsys, "train", "--csv", path, *FAST, *(["--stream"] if stream else []),
                        "--out", tmp_path / "m.safetensors")
    assert code == 2 and len(err.splitlines()) == 1
    assert str(path) in err and "'f1'" in err and "line 7" in err and "float32" in err
    assert "value 1e+300" in err and "np.float64" not in err  # the value as the user wrote it
    assert not (tmp_path / "m.safetensors").exists()
    bags, y = make_concept_bags(n_bags=8, n_features=3)
    bags[2][0, 1] = -1e300
    with pytest.raises(ValueError, match=r"bags\[2\] holds a value beyond float32's range"):
        PrototypeMILClassifier(epochs=1).fit(bags, y)


def test_a_classic_mil_csv_names_the_row_and_column_of_a_value_float32_cannot_hold(tmp_path):
    from minitorch_proto.data.readers import read_mil_csv

    path = tmp_path / "classic.csv"
    path.write_text("0,1,1.0,2.0\n1,2,3.0,2.0\n1,2,3.0,-1e39\n0,3,1.0,1.0\n")
    with pytest.raises(ValueError, match=r"classic\.csv: the value -1e\+39 in row 3, column 4 is beyond float32's"):
        read_mil_csv(path)  # it had named "bags[1]" and "instance 1", positions the file does not show


def test_large_values_float32_holds_still_train(tmp_path, capsys):
    ids = [f"b{i}" for i in range(8)]
    path = _csv(tmp_path / "big.csv", ids, [i % 2 for i in range(8)], values={(5, "f1"): 1e30})
    code, _, err = _run(capsys, "train", "--csv", path, *FAST, "--stream", "--out", tmp_path / "m.safetensors")
    assert code == 0, err
    clf = load_model(tmp_path / "m.safetensors")
    assert all(bool(torch.isfinite(p).all()) for p in clf.model_.parameters())
    assert len(np.unique(clf.predict_proba(load_bags_csv(path).bags)[:, 1])) > 1


@pytest.mark.parametrize("labels,classes", [(["no", "yes"], ["no", "yes"]), ([-1, 1], [-1, 1]),
                                            ([True, False], [False, True])])
def test_one_label_convention_for_csv_and_bag_folders(tmp_path, capsys, labels, classes):
    y = [labels[i % 2] for i in range(10)]
    csv = _csv(tmp_path / "lab.csv", [f"b{i}" for i in range(10)], y)
    bags, _ = make_concept_bags(n_bags=10, n_features=3)
    write_bag_folder(tmp_path / "folder", bags, y, [f"b{i}" for i in range(10)])
    for source in (["--csv", csv], ["--bags-dir", tmp_path / "folder"]):
        model = tmp_path / "m.safetensors"
        code, _, err = _run(capsys, "train", *source, *FAST, "--out", model)
        assert code == 0, err
        assert [str(c) for c in load_model(model).classes_] == [str(c) for c in classes]
        code, out, _ = _run(capsys, "predict", "--model", model, *source)
        header = out.splitlines()[0].split(",")
        assert header == ["bag", "predicted"] + [f"proba_{c}" for c in classes]


def test_which_label_is_positive_is_said_when_the_names_do_not_say_it(tmp_path, capsys):
    # mi-SVM fell from .925 to .500 on the same bags named cancer/healthy: it looked for healthy witnesses.
    for labels, note in ((["healthy", "cancer"], "'healthy' is the positive class"), ([0, 1], None),
                         (["no", "yes"], None), ([2, 1], "2 is the positive class")):
        csv = _csv(tmp_path / "d.csv", [f"b{i}" for i in range(8)], labels * 4)
        code, _, err = _run(capsys, "cv", "--csv", csv, "--folds", "2", "--repeats", "1", *FAST, "--quiet")
        assert code == 0 and ((note in err and "relabel" in err) if note else err == ""), (labels, err)


def test_a_label_column_with_one_class_is_a_clear_error(tmp_path, capsys):
    csv = _csv(tmp_path / "one.csv", [f"b{i}" for i in range(6)], ["yes"] * 6)
    code, _, err = _run(capsys, "train", "--csv", csv, *FAST, "--out", tmp_path / "m.safetensors")
    assert code == 2 and "class" in err and len(err.splitlines()) == 1


@pytest.fixture
def saved(tmp_path):
    bags, y = make_concept_bags(n_bags=12, n_features=3)
    path = PrototypeMILClassifier(epochs=1, n_prototypes=3).fit(bags, y).save(tmp_path / "m.safetensors")
    return path, bags


def _rewrite(path, edit_tensors=None, edit_header=None):
    mf = load_model_file(path)
    tensors, header = dict(mf.tensors), dict(mf.header)
    if edit_tensors:
        edit_tensors(tensors)
    if edit_header:
        header = edit_header(header)
    for key in ("format", "version"):
        header.pop(key, None) if isinstance(header, dict) else None
    # save_model_file recomputes the digest: the integrity check passes, only the content is wrong.
    return save_model_file(path, tensors, header)


def test_a_header_that_is_not_an_object_is_a_one_line_error(saved, capsys):
    path, bags = saved
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    outer = json.loads(data[8:8 + n])
    outer["__metadata__"]["minitorch_proto"] = json.dumps([1, 2, 3])
    text = json.dumps(outer).encode().ljust(n)
    path.write_bytes(data[:8] + text + data[8 + n:])
    with pytest.raises(ModelFileError, match="header is a list"):
        load_model(path)
    code, _, err = _run(capsys, "predict", "--model", path, "--csv", _csv(path.parent / "p.csv", ["a", "b"], [0, 1]))
    assert code == 2 and len(err.splitlines()) == 1


@pytest.mark.parametrize("case", ["nan prototypes", "repeated classes", "one class", "wrong shape", "members",
                                  "feature names", "no standardiser", "prototype shape", "head choices", "seed",
                                  "truncating dtype", "nested classes", "monotone weights", "stray statistics",
                                  "sources width", "huge header sizes", "seeds and members", "chunk size",
                                  "another class"])
def test_model_files_are_validated_for_content(saved, case, capsys):
    path, bags = saved

    def nan(t):
        t["model/prototypes"] = torch.full_like(t["model/prototypes"], float("nan"))

    def shape(t):
        t["standardizer/mean"] = torch.zeros(7, dtype=torch.float64)

    edits = {
        "nan prototypes": (nan, None, "NaN"),
        "repeated classes": (None, lambda h: {**h, "classes": [1, 1]}, "classes"),
        "one class": (None, lambda h: {**h, "classes": [1]}, "classes"),
        "wrong shape": (shape, None, "standardizer mean"),
        # Said by count: the history itself, hundreds of numbers, had filled the one line.
        "members": (None, lambda h: {**h, "n_members": 3}, r"one valid entry per member \(3\), got 1 entry:"),
        "another class": (None, lambda h: {**h, "estimator": "Other"}, "holds a model of class 'Other', not a "),
        # These loaded before and failed later (predict) or never (a wrong number of feature names).
        "feature names": (None, lambda h: {**h, "feature_names_in": ["a", "b"]}, "feature_names_in"),
        "no standardiser": (lambda t: t.pop("standardizer/scale"), None, "mean and scale"),
        "prototype shape": (lambda t: t.update({"model/prototypes": torch.zeros(5, 3)}), None,
                            r"prototypes tensor has shape \(5, 3\), and its header says"),
        "head choices": (None, lambda h: {**h, "head_C": [1.0, 2.0]}, "head_C"),
        "seed": (None, lambda h: {**h, "seed": -4}, "seed"),
        # From the model-files audit: each of these loaded silently (or allocated from the header's sizes).
        "truncating dtype": (None, lambda h: {**h, "classes": ["neg1", "neg2"], "classes_dtype": "<U3"}, "distinct"),
        "nested classes": (None, lambda h: {**h, "classes": [[0], [1]]}, "plain labels"),
        "monotone weights": (lambda t: t.update({"model/weight": t["model/weight"].abs() + 1}),
                             lambda h: {**h, "params": {**h["params"], "monotone": True}}, "positive weights"),
        "stray statistics": (None, lambda h: {**h, "standardizer": {"mode": "none"}}, "has no mean or scale"),
        "sources width": (lambda t: t.update({"prototype_sources": torch.zeros(1, 2, 2, dtype=torch.int64)}), None,
                          r"prototype_sources has shape \(1, 2, 2\) \(not \(1, 3, 2\)\)"),
        "huge header sizes": (lambda t: [t.pop("standardizer/mean"), t.pop("standardizer/scale")],
                              lambda h: {**h, "n_features_in": 30_000, "standardizer": {"mode": "none"},
                                         "params": {**h["params"], "n_prototypes": 3_000,
                                                    "standardization": "none"}},
                              r"prototypes tensor has shape \(3, 3\), and its header says \(3000, 30000\)"),
        # From the API audit: these loaded, and a later save (or prediction) failed.
        "seeds and members": (None, lambda h: {**h, "params": {**h["params"], "n_seeds": 3}},
                              r"n_seeds=3 but holds 1 member"),
        "chunk size": (None, lambda h: {**h, "params": {**h["params"], "chunk_size": 0}}, "chunk_size"),
    }
    edit_tensors, edit_header, words = edits[case]
    _rewrite(path, edit_tensors, edit_header)
    with pytest.raises(ModelFileError, match=words) as exc:
        load_model(path)
    assert "\n" not in str(exc.value)
    code, _, err = _run(capsys, "predict", "--model", path, "--csv", _csv(path.parent / "p.csv", ["a", "b"], [0, 1]))
    assert code == 2 and len(err.splitlines()) == 1


def _with_raw_header(path, edit) -> None:
    """Rewrite the model header in place (same length), leaving the recorded digest as it was."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    outer = json.loads(data[8:8 + n])
    inner = edit(json.loads(outer["__metadata__"]["minitorch_proto"]))
    outer["__metadata__"]["minitorch_proto"] = json.dumps(inner, separators=(",", ":"))  # compact: room to edit
    text = json.dumps(outer, separators=(",", ":")).encode()
    assert len(text) <= n
    path.write_bytes(data[:8] + text.ljust(n) + data[8 + n:])


@pytest.mark.parametrize("version", ["true", "0", "-5"])
def test_a_model_file_version_must_be_a_known_number(saved, version):
    path, _ = saved
    _with_raw_header(path, lambda header: {**header, "version": json.loads(version)})
    with pytest.raises(ModelFileError, match=f"version {'True' if version == 'true' else version}; this "
                       "minitorch_proto reads versions 1 to"):
        load_model(path)


def test_model_files_that_are_not_ours_are_named_without_reading_them_whole(saved, tmp_path, monkeypatch):
    path, _ = saved
    deep = tmp_path / "deep.safetensors"  # JSON nested deeper than json's recursion limit
    text = json.dumps({"__metadata__": {"minitorch_proto": "[" * 100_000 + "]" * 100_000}}).encode()
    deep.write_bytes(len(text).to_bytes(8, "little") + text)
    with pytest.raises(ModelFileError, match="damaged or not a minitorch_proto model file"):
        load_model(deep)  # a RecursionError traceback before
    npz = tmp_path / "arrays.npz"
    np.savez(npz, a=np.zeros(3))
    with pytest.raises(ModelFileError, match=r"damaged or not a minitorch_proto model file \(not a readable torch"):
        load_model(npz)  # was called "a torch pickle file that cannot be loaded safely"
    zeros = tmp_path / "slide.bin"
    zeros.write_bytes(bytes(1 << 20))

    def whole(self):
        raise AssertionError(f"{self} read whole")

    monkeypatch.setattr(Path, "read_bytes", whole)
    with pytest.raises(ModelFileError, match="damaged or not a minitorch_proto model file"):
        load_model(zeros)


def test_saving_refuses_settings_changed_after_fit_and_takes_a_long_name(tmp_path):
    bags, y = make_concept_bags(n_bags=12, n_features=3)
    clf = PrototypeMILClassifier(epochs=1, n_prototypes=3, device=torch.device("cpu")).fit(bags, y)
    long_name = tmp_path / ("m" * 240 + ".safetensors")  # legal; its temporary name was 15 bytes too long
    assert load_model(clf.save(long_name)).device == "cpu"  # a torch.device was refused after training
    before = clf.predict_proba(bags)
    clf.set_params(distance="cosine")  # the fitted model keeps its distance; the file would have loaded cosine
    with pytest.raises(ValueError, match=r"set_params changed distance \('euclidean' when fitted, now 'cosine'\)"):
        clf.save(tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()
    np.testing.assert_array_equal(clf.set_params(distance="euclidean").predict_proba(bags), before)
    clf.save(tmp_path / "x.safetensors")


def test_a_valid_model_still_loads_and_predicts_the_same(saved):
    path, bags = saved
    before = load_model(path).predict_proba(bags)
    _rewrite(path)
    np.testing.assert_array_equal(load_model(path).predict_proba(bags), before)


def test_wide_csvs_match_columns_by_name(tmp_path, capsys):
    n = 20_000
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(8, n)), columns=[f"c{j}" for j in range(n)])
    frame.insert(0, "label", [0, 0, 1, 1, 0, 0, 1, 1])
    frame.insert(0, "bag", ["a", "a", "b", "b", "c", "c", "d", "d"])
    path = tmp_path / "wide.csv"
    frame.to_csv(path, index=False)
    assert _run(capsys, "train", "--csv", path, "--epochs", "1", "--prototypes", "2",
                "--out", tmp_path / "m.safetensors")[0] == 0
    shuffled = frame[["bag", "label"] + list(rng.permutation(frame.columns[2:]))]
    shuffled.to_csv(tmp_path / "shuffled.csv", index=False)
    a = _run(capsys, "predict", "--model", tmp_path / "m.safetensors", "--csv", path)
    b = _run(capsys, "predict", "--model", tmp_path / "m.safetensors", "--csv", tmp_path / "shuffled.csv")
    assert a[0] == b[0] == 0 and a[1] == b[1]  # columns matched by name, in any order
    # (the time it takes is measured in benchmarks/bench_wide_csv.py, not asserted here)


def test_a_diverging_stream_says_the_loss_diverged(capsys, tmp_path):
    bags, y = make_concept_bags(n_bags=12, n_features=3)
    with pytest.raises(ValueError, match="training diverged .*lower the learning rates"):
        PrototypeMILClassifier(epochs=3, n_prototypes=3, lr_prototypes=1e30, lr_classifier=1e30,
                               standardization="none").fit_streaming([b * 1e18 for b in bags], y)


def test_a_used_results_folder_keeps_no_stale_file_of_the_last_run(tmp_path):
    from minitorch_proto.serialization import staged_directory

    out = tmp_path / "res"
    with staged_directory(out) as stage:
        (stage / "results.csv").write_text("a")
        (stage / "tuning_choices.csv").write_text("old choices")
    (out / "my_notes.txt").write_text("kept")  # not the tool's: left alone
    with staged_directory(out) as stage:
        (stage / "results.csv").write_text("b")
    assert (out / "results.csv").read_text() == "b"
    assert not (out / "tuning_choices.csv").exists() and (out / "my_notes.txt").read_text() == "kept"


def test_a_results_folder_of_another_command_or_of_no_run_is_refused_before_any_work(tmp_path, capsys):
    path = _csv(tmp_path / "d.csv", [f"b{i}" for i in range(8)], [0, 1] * 4)
    compare = ["compare", "--csv", path, "--methods", "bag_stats", "--folds", "2", "--repeats", "1", "--quiet"]
    # A reproduce run's folder: compare would have replaced its results and removed its table2.txt.
    with staged_directory(tmp_path / "rep", "reproduce") as stage:
        for name in ("results.csv", "table2.txt"):
            (stage / name).write_text("reproduce's")
    code, _, err = _run(capsys, *compare, "--out", tmp_path / "rep")
    assert code == 2 and "holds a 'reproduce' run; this compare run would replace it" in err
    assert (tmp_path / "rep" / "table2.txt").read_text() == "reproduce's"
    # A user's own results.csv, which no run recorded.
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "results.csv").write_text("my numbers")
    code, _, err = _run(capsys, *compare, "--out", tmp_path / "mine")
    assert code == 2 and "already holds results.csv, which no minitorch_proto run recorded" in err
    # Its own earlier run is replaced as before.
    assert _run(capsys, *compare, "--out", tmp_path / "cmp")[0] == 0
    assert _run(capsys, *compare, "--out", tmp_path / "cmp")[0] == 0
    assert (tmp_path / "cmp" / ".minitorch_proto_run").read_text().startswith("# command: compare\n")


def test_ctrl_c_while_publishing_waits_for_the_whole_new_set(tmp_path):
    # Before, a Ctrl-C between two renames left the new manifest beside the old run.json. Signals
    # reach only a process's main thread (pytest-xdist runs tests elsewhere): a child process.
    import subprocess
    import sys

    script = """
import json, os, signal, sys
import minitorch_proto.serialization as serialization
# Python's usual Ctrl-C handler, whatever the test runner left: a process started in the background by
# a non-interactive shell (as CI may be) inherits SIGINT ignored, and nothing is deferred then.
signal.signal(signal.SIGINT, signal.default_int_handler)
out, renames, real_replace = sys.argv[1], [], os.replace
def publish(text):
    with serialization.staged_directory(out) as stage:
        for name in ("results.csv", "run.json", "summary.csv"):
            open(os.path.join(stage, name), "w").write(text)
publish("old")
def replace_then_ctrl_c(src, dst):
    if not renames:
        # Ctrl-C arrives during the first rename. raise_signal delivers it to this (the main) thread at
        # once; os.kill may hand it to any thread of the process, and with it the test once saw no
        # interrupt at all on a loaded machine (1 of 4 runs).
        signal.raise_signal(signal.SIGINT)
    renames.append(dst)
    real_replace(src, dst)
serialization.os.replace = replace_then_ctrl_c
try:
    publish("new")
    print(json.dumps("no interrupt"))
except KeyboardInterrupt:
    files = {n: open(os.path.join(out, n)).read() for n in sorted(os.listdir(out)) if not n.startswith(".")}
    print(json.dumps([len(renames), files]))
"""
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "res")], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert run.returncode == 0, run.stderr
    renames, files = json.loads(run.stdout)
    assert renames == 4  # the three files and the manifest, all published before the interrupt
    assert files == {"results.csv": "new", "run.json": "new", "summary.csv": "new"}


def test_ids_pandas_reads_as_missing_stay_names(tmp_path, capsys):
    # "NA", "null", "None", "nan" are bag names here; only an empty cell is a missing id.
    ids = ["NA", "null", "None", "nan", "N/A", "b5"]
    path = _csv(tmp_path / "na.csv", ids, [0, 1, 0, 1, 0, 1])
    assert list(load_bags_csv(path).bag_ids) == ids
    model, preds = tmp_path / "m.safetensors", tmp_path / "p.csv"
    assert _run(capsys, "train", "--csv", path, *FAST, "--out", model)[0] == 0
    assert _run(capsys, "predict", "--model", model, "--csv", path, "--out", preds)[0] == 0
    assert list(pd.read_csv(preds, dtype={"bag": str}, keep_default_na=False).bag) == ids
    bags, y = make_concept_bags(n_bags=6, n_features=3)
    ids[4] = "NULL"  # "N/A" is a path, not a file name
    labels = write_bag_folder(tmp_path / "folder", bags, y, ids)  # the writer's folder, read back by the reader
    code, _, err = _run(capsys, "predict", "--model", model, "--bags-dir", tmp_path / "folder", "--out", preds)
    assert code == 0, err
    assert list(pd.read_csv(preds, dtype={"bag": str}, keep_default_na=False).bag) == ids and labels.exists()
    blank = _csv(tmp_path / "blank.csv", ["a", "b", "c", "d"], [0, 1, 0, 1], values={(2, "bag"): None,
                                                                                    (5, "bag"): None})
    code, _, err = _run(capsys, "train", "--csv", blank, *FAST, "--out", model)
    assert code == 2 and err.endswith("is missing a value (line 4).")  # the file's line 4 (header, 0, 1, 2)
    assert blank.read_text().splitlines()[3].startswith(",")


def test_messages_name_the_line_of_the_file(tmp_path, capsys):
    """A CSV, a headerless CSV and a folder's labels.csv point at the same line an editor shows."""
    path = _csv(tmp_path / "d.csv", ["a", "b", "c", "d"], [0, 1, 0, 1], values={(5, "f1"): np.inf,
                                                                               (6, "label"): None})
    lines = path.read_text().splitlines()
    assert "inf" in lines[6] and lines[7].split(",")[1] == ""  # 0-based: line 7 holds inf, line 8 no label
    with pytest.raises(ValueError, match=r"'f1' holds a missing \(NaN\) or infinite value \(line 7,"):
        load_bags_csv(path)
    frame = pd.read_csv(path).drop(index=5)
    frame.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"label column 'label' is missing a value \(line 7\)"):
        load_bags_csv(path)
    frame.to_csv(tmp_path / "noheader.csv", index=False, header=False)
    code, _, err = _run(capsys, "train", "--csv", tmp_path / "noheader.csv", "--no-header", "--bag-col", "0",
                        "--label-col", "1", *FAST, "--out", tmp_path / "m.safetensors")
    assert code == 2 and err.endswith("is missing a value (line 6).")  # no header: one line earlier
    with pytest.raises(ValueError, match=r"missing a value \(row 5\)"):  # a DataFrame's own index
        load_bags_csv(path, skiprows=0)  # reading options of their own: rows, not lines
    bags, y = make_concept_bags(n_bags=4, n_features=3)
    labels = write_bag_folder(tmp_path / "bags", bags, y, ["a", "b", "c", "d"])
    pd.DataFrame({"bag": ["a", "b", "c", "d"], "label": [0, 1, None, 1]}).to_csv(labels, index=False)
    assert labels.read_text().splitlines()[3] == "c,"
    code, _, err = _run(capsys, "cv", "--bags-dir", tmp_path / "bags", "--folds", "2", "--repeats", "1", *FAST)
    assert code == 2 and "bag 'c' (line 4) has no label" in err


def test_predict_ignores_blank_or_mixed_labels(tmp_path, capsys):
    path = _csv(tmp_path / "d.csv", ["a", "b", "c", "d"], [0, 1, 0, 1])
    model = tmp_path / "m.safetensors"
    assert _run(capsys, "train", "--csv", path, *FAST, "--out", model)[0] == 0
    code, want, _ = _run(capsys, "predict", "--model", model, "--csv", path)
    frame = pd.read_csv(path)
    for name, labels in (("blank", np.nan), ("mixed", np.arange(len(frame)) % 2)):
        frame.assign(label=labels).to_csv(tmp_path / f"{name}.csv", index=False)
        code, out, err = _run(capsys, "predict", "--model", model, "--csv", tmp_path / f"{name}.csv")
        assert code == 0 and out == want, (name, err)
    bags, y = make_concept_bags(n_bags=4, n_features=3)
    labels = write_bag_folder(tmp_path / "bags", bags, y, ["a", "b", "c", "d"])
    pd.DataFrame({"bag": ["a", "b", "c", "d"], "label": ["", "", "", ""]}).to_csv(labels, index=False)
    code, out, err = _run(capsys, "predict", "--model", model, "--bags-dir", tmp_path / "bags")
    assert code == 0 and out.splitlines()[0].startswith("bag,predicted"), err  # the folder's blank labels
    code, _, err = _run(capsys, "cv", "--bags-dir", tmp_path / "bags", "--folds", "2", "--repeats", "1", *FAST)
    assert code == 2 and "has no label" in err  # training still needs them


def test_outputs_never_overwrite_inputs(tmp_path, capsys):
    path = _csv(tmp_path / "d.csv", ["a", "b", "c", "d"], [0, 1, 0, 1])
    model = tmp_path / "m.safetensors"
    assert _run(capsys, "train", "--csv", path, *FAST, "--out", model)[0] == 0
    before = {p: p.read_bytes() for p in (path, model)}
    for argv, flag in (
        (["train", "--csv", path, *FAST, "--out", path], "--csv"),
        (["predict", "--model", model, "--csv", path, "--out", path], "--csv"),
        (["predict", "--model", model, "--csv", path, "--out", model], "--model"),
        (["explain", "--model", model, "--csv", path, "--out", model], "--model"),
        (["cv", "--csv", path, "--folds", "2", "--repeats", "1", *FAST, "--out", tmp_path / "." / "d.csv"], "--csv"),
    ):
        code, _, err = _run(capsys, *argv)
        assert code == 2 and f"replace the {flag} file being read" in err
    # cv also writes <name>.predictions.csv and <name>.run.json beside its CSV.
    beside = _csv(tmp_path / "e.predictions.csv", ["a", "b", "c", "d"], [0, 1, 0, 1])
    before[beside] = beside.read_bytes()
    code, _, err = _run(capsys, "cv", "--csv", beside, "--folds", "2", "--repeats", "1", *FAST,
                        "--out", tmp_path / "e.csv")
    assert code == 2 and "writes e.predictions.csv beside it" in err and not (tmp_path / "e.csv").exists()
    assert {p: p.read_bytes() for p in before} == before
    bags, y = make_concept_bags(n_bags=4, n_features=3)
    write_bag_folder(tmp_path / "bags", bags, y, fmt="npy")
    code, _, err = _run(capsys, "predict", "--model", model, "--bags-dir", tmp_path / "bags",
                        "--out", tmp_path / "bags" / "0.npy")
    assert code == 2 and "inside --bags-dir" in err
    code, _, err = _run(capsys, "predict", "--model", model, "--bags-dir", tmp_path / "bags",
                        "--out", tmp_path / "bags" / "labels.csv")
    assert code == 2 and "replace the --labels file being read" in err
    # A results folder that holds the input: compare used to write its results.csv over it (exit 0).
    (tmp_path / "out").mkdir()
    inside = _csv(tmp_path / "out" / "results.csv", ["a", "b", "c", "d"], [0, 1, 0, 1])
    kept = inside.read_bytes()
    code, _, err = _run(capsys, "compare", "--csv", inside, "--methods", "bag_stats", "--folds", "2", "--repeats", "1",
                        "--out", tmp_path / "out")
    assert code == 2 and "--csv" in err and "is inside --out" in err and inside.read_bytes() == kept


def test_headers_pandas_would_rename_are_refused(tmp_path, capsys):
    path = _csv(tmp_path / "d.csv", ["a", "b", "c", "d"], [0, 1, 0, 1])
    frame = pd.read_csv(path)
    cases = {
        "repeated": (frame.set_axis(["bag", "label", "f0", "label", "f2"], axis=1), False, "names 'label' twice"),
        "saved index": (frame, True, "column 0 has no name in the header (a saved index?"),
    }
    for name, (table, index, words) in cases.items():
        table.to_csv(tmp_path / f"{name}.csv", index=index)
        code, _, err = _run(capsys, "train", "--csv", tmp_path / f"{name}.csv", *FAST, "--out", tmp_path / "m.pt")
        assert code == 2 and words in err, (name, err)
    # A headerless file in the benchmarks' layout, text bag ids and all, gets the --no-header advice.
    frame[["label", "bag", "f0", "f1", "f2"]].to_csv(tmp_path / "classic.csv", index=False, header=False)
    code, _, err = _run(capsys, "train", "--csv", tmp_path / "classic.csv", *FAST, "--out", tmp_path / "m.pt")
    assert code == 2 and "add --no-header" in err
    # And the other way round: --no-header on a file with a header had said only "not numeric".
    frame[["label", "bag", "f0", "f1", "f2"]].to_csv(tmp_path / "named.csv", index=False)
    code, _, err = _run(capsys, "train", "--csv", tmp_path / "named.csv", "--no-header", *FAST, "--out",
                        tmp_path / "m.pt")
    assert code == 2 and "not numeric" in err and err.endswith("drop --no-header.")
    # Not when a later row holds the text (a headerless file with text labels had been told so too).
    bad_cell = frame.assign(label=np.where(frame["label"] == 1, "pos", "neg"), f1=frame["f1"].astype(object))
    bad_cell.loc[bad_cell.index[3], "f1"] = "abc"
    bad_cell[["label", "bag", "f0", "f1", "f2"]].to_csv(tmp_path / "bad_cell.csv", index=False, header=False)
    code, _, err = _run(capsys, "train", "--csv", tmp_path / "bad_cell.csv", "--no-header", *FAST, "--out",
                        tmp_path / "m.pt")
    assert code == 2 and "not numeric" in err and "drop --no-header" not in err and "--ignore-cols" in err
    code, _, err = _run(capsys, "train", "--csv", path, "--label-col", "bag", *FAST, "--out", tmp_path / "m.pt")
    assert code == 2 and "both name column 'bag'" in err


def test_explain_says_which_class_its_evidence_is_for(tmp_path, capsys):
    path = _csv(tmp_path / "d.csv", ["a", "b", "c", "d"], ["normal", "tumour", "normal", "tumour"])
    model = tmp_path / "m.safetensors"
    assert _run(capsys, "train", "--csv", path, *FAST, "--out", model)[0] == 0
    code, _, err = _run(capsys, "explain", "--model", model, "--csv", path, "--top", "1")
    assert code == 0 and "evidence for class 'tumour' (positive: for it; negative: for 'normal')" in err


def test_tables_and_folds_that_say_something_else_are_refused(tmp_path):
    from minitorch_proto.data import from_dataframe
    from minitorch_proto.evaluation.cv import cross_validate, stratified_folds
    from minitorch_proto.methods import make

    frame = pd.read_csv(_csv(tmp_path / "d.csv", [f"b{i}" for i in range(8)], [0, 1] * 4))
    with pytest.raises(ValueError, match="bag_col and label_col both name column 'label'"):  # grouped by label
        from_dataframe(frame, bag_col="label", label_col="label")
    one = from_dataframe(frame, feature_cols="f1")  # one column, not ["f", "1"]
    assert one.n_features == 1
    np.testing.assert_array_equal(np.concatenate(one.bags)[:, 0], frame.f1)
    # A benchmark's name in any case gives its Table 1 rates (Fox's were silently Musk1's).
    assert make("prototype", dataset="Fox").lr_prototypes == make("prototype", dataset="fox").lr_prototypes
    assert make("prototype", dataset="Fox").lr_prototypes != make("prototype").lr_prototypes
    with pytest.raises(ValueError, match="random_state"):  # was a TypeError adding None and an int
        stratified_folds(one.y, 1, 2, random_state=None)
    folds = stratified_folds(np.array([0, 1] * 10), 1, 2)  # made for 20 bags, used on 8
    with pytest.raises(ValueError, match="folds made for other data"):
        cross_validate(make("bag_stats"), one.bags, one.y, folds)
    with pytest.raises(ValueError, match="at least one fold"):
        cross_validate(make("bag_stats"), one.bags, one.y, [])


def test_the_readme_recipe_keeps_feature_names_and_predict_says_when_a_model_has_none(tmp_path, capsys):
    import warnings

    from minitorch_proto import load_bags_csv

    ids = [f"mol_{i}" for i in range(12)]
    path = _csv(tmp_path / "d.csv", ids, ["cancer", "healthy"] * 6, n_features=4)
    data = load_bags_csv(path)
    assert list(data.feature_names) == ["f0", "f1", "f2", "f3"]
    assert list(data.subset([0, 1]).feature_names) == list(data.feature_names)
    named = PrototypeMILClassifier(epochs=2, n_prototypes=3).fit(data.bags, data.y, feature_names=data.feature_names)
    nameless = PrototypeMILClassifier(epochs=2, n_prototypes=3).fit(data.bags, data.y)
    frame = pd.read_csv(path).drop(columns="label")
    frame.to_csv(tmp_path / "new.csv", index=False)
    frame[["bag", "f3", "f2", "f1", "f0"]].to_csv(tmp_path / "reversed.csv", index=False)
    named.save(tmp_path / "named.safetensors")
    nameless.save(tmp_path / "nameless.safetensors")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' PerformanceWarning for the placeholder label column before
        outs = [_run(capsys, "predict", "--model", tmp_path / "named.safetensors", "--csv", tmp_path / f)
                for f in ("new.csv", "reversed.csv")]
    assert outs[0][0] == outs[1][0] == 0 and outs[0][1] == outs[1][1]  # matched by name: the same predictions
    assert "note" not in outs[0][2]
    code, _, err = _run(capsys, "predict", "--model", tmp_path / "nameless.safetensors", "--csv", tmp_path / "new.csv")
    assert code == 0 and "records no feature names" in err and "in their order: ['f0', 'f1'" in err


def test_predicting_a_bag_folder_without_labels_scores_every_feature_file(tmp_path, capsys):
    # New slides come unlabelled: a folder without labels.csv had been refused (a labels file was required).
    bags, y = make_concept_bags(n_bags=6, n_features=3)
    write_bag_folder(tmp_path / "bags", bags, y, [f"s{i}" for i in range(6)], fmt="npy")
    model = PrototypeMILClassifier(epochs=1, n_prototypes=2).fit(bags, y).save(tmp_path / "m.safetensors")
    code, want, _ = _run(capsys, "predict", "--model", model, "--bags-dir", tmp_path / "bags")
    (tmp_path / "bags" / "labels.csv").unlink()
    np.save(tmp_path / "bags" / "new.npy", bags[0])  # a slide no labels file lists
    code, out, err = _run(capsys, "predict", "--model", model, "--bags-dir", tmp_path / "bags")
    assert code == 0 and "has no labels.csv: scoring every feature file in it (7 bags)" in err, err
    lines, before = out.splitlines(), want.splitlines()
    assert lines[0] == before[0] and lines[2:] == before[1:]  # ids sorted: "new" first, then s0-s5 as before
    assert lines[1] == "new" + before[1][len("s0"):]  # a copy of s0's bag, scored alike
    code, _, err = _run(capsys, "explain", "--model", model, "--bags-dir", tmp_path / "bags", "--top", "1")
    assert code == 0, err
    code, _, err = _run(capsys, "predict", "--model", model, "--bags-dir", tmp_path / "bags", "--bag-col", "slide")
    assert code == 2 and "--bag-col names a column of --labels" in err and len(err.splitlines()) == 1, err
    # A labels file named on purpose and missing is still an error, with what is enough; training needs labels.
    code, _, err = _run(capsys, "predict", "--model", model, "--bags-dir", tmp_path / "bags", "--labels",
                        tmp_path / "none.csv")
    assert code == 2 and "a CSV with just a 'bag' column" in err and len(err.splitlines()) == 1
    code, _, err = _run(capsys, "train", "--bags-dir", tmp_path / "bags", *FAST, "--out", tmp_path / "n.safetensors")
    assert code == 2 and len(err.splitlines()) == 1 and not (tmp_path / "n.safetensors").exists()


def _raw_csv(path, header, rows):
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    return path


def _bag_rows(labels, extra=""):
    return [f"b{i},{lab},{0.1 * k + i % 2:.2f},{0.3 * k:.2f}{extra}" for i, lab in enumerate(labels) for k in range(2)]


@pytest.mark.parametrize("labels,words", [
    (["0", "1", "01", "0", "1", "01"], "labels '1' and '01' of column 'label' are the same number"),
    (["1.0", "0", "1", "0"], "labels '1.0' and '1' of column 'label' are the same number"),
    (["Cancer", "cancer", "healthy", "healthy"], "labels 'Cancer' and 'cancer' of column 'label' differ only in case"),
    (["cancer", "cancer ", "healthy", "healthy"], "differ only in case or surrounding spaces"),
    (["True", "1", "False", "0"], "mixes true/false with numbers"),
    (["0", "99999999999999999999", "0", "99999999999999999999"], "too large for a class label (is it an id column?)"),
])
def test_labels_that_name_one_class_two_ways_are_refused_not_merged_or_split(tmp_path, capsys, labels, words):
    # "01" and "1" had been one class re-spelled "1", "Cancer" and "cancer" two of three classes fitted silently.
    path = _raw_csv(tmp_path / "l.csv", "bag,label,f0,f1", _bag_rows(labels))
    with pytest.raises(ValueError, match=re.escape(words)):
        load_bags_csv(path)
    code, _, err = _run(capsys, "train", "--csv", path, *FAST, "--out", tmp_path / "m.safetensors")
    assert code == 2 and words in err and len(err.splitlines()) == 1
    folder = tmp_path / "folder"
    bags, _ = make_concept_bags(n_bags=len(labels), n_features=2)
    write_bag_folder(folder, bags, None, [f"b{i}" for i in range(len(labels))])
    (folder / "labels.csv").write_text("bag,label\n" + "".join(f"b{i},{lab}\n" for i, lab in enumerate(labels)))
    code, _, err = _run(capsys, "train", "--bags-dir", folder, *FAST, "--out", tmp_path / "m.safetensors")
    assert code == 2 and words in err
    assert not (tmp_path / "m.safetensors").exists()


def test_labels_as_written_na_is_a_class_and_true_false_in_any_case_are_booleans(tmp_path):
    na = load_bags_csv(_raw_csv(tmp_path / "na.csv", "bag,label,f0,f1", _bag_rows(["NA", "tumour"] * 2)))
    assert sorted(set(na.y.tolist())) == ["NA", "tumour"]  # a class called NA, not a missing label
    yes = load_bags_csv(_raw_csv(tmp_path / "b.csv", "bag,label,f0,f1", _bag_rows(["true", "FALSE", "True", "false"])))
    assert yes.y.dtype == bool and yes.y.tolist() == [True, False, True, False]
    plain = load_bags_csv(_raw_csv(tmp_path / "p.csv", "bag,label,f0,f1", _bag_rows(["1", "0", "-1", "1"])))
    assert plain.y.dtype == np.int64 and plain.y.tolist() == [1, 0, -1, 1]
    with pytest.raises(ValueError, match="missing a value"):
        load_bags_csv(_raw_csv(tmp_path / "e.csv", "bag,label,f0,f1", _bag_rows(["", "1", "0", "1"])))
    # Among numbers (or true/false) NA is pandas' missing value still, not a third class.
    with pytest.raises(ValueError, match=r"missing a value \(line 6\)"):
        load_bags_csv(_raw_csv(tmp_path / "n.csv", "bag,label,f0,f1", _bag_rows(["0", "1", "NA", "1"])))


def test_rows_with_one_field_more_than_the_header_are_refused(tmp_path, capsys):
    # pandas took the bag ids as the row index: predict reported 2 "bags" named 0 and 1 of 8, exit 0.
    path = _raw_csv(tmp_path / "s.csv", "bag,label,a,b", [f"s{i},{i % 2},1,2,{i}" for i in range(8)])
    with pytest.raises(ValueError, match="one field more than the header"):
        load_bags_csv(path)
    good = _csv(tmp_path / "g.csv", [f"g{i}" for i in range(6)], [0, 1] * 3, n_features=3)
    model = tmp_path / "m.safetensors"
    assert _run(capsys, "train", "--csv", good, *FAST, "--out", model)[0] == 0
    for argv in (["train", "--csv", path, *FAST, "--out", model], ["predict", "--model", model, "--csv", path]):
        code, out, err = _run(capsys, *argv)
        assert code == 2 and "one field more than the header" in err and out == ""
    folder = tmp_path / "folder"
    write_bag_folder(folder, make_concept_bags(n_bags=4, n_features=2)[0], [0, 1, 0, 1], ["a", "b", "c", "d"])
    (folder / "labels.csv").write_text("bag,label\n" + "".join(f"{b},{i % 2},\n" for i, b in enumerate("abcd")))
    code, _, err = _run(capsys, "train", "--bags-dir", folder, *FAST, "--out", model)
    assert code == 2 and "one field more than the header" in err


def test_the_library_reader_refuses_headers_pandas_would_invent_names_for(tmp_path):
    frame = pd.read_csv(_csv(tmp_path / "d.csv", ["a", "b", "c", "d"], [0, 1, 0, 1]))
    frame.to_csv(tmp_path / "indexed.csv")  # a saved index: an unnamed first column, the row number
    with pytest.raises(ValueError, match="column 0 has no name in the header"):
        load_bags_csv(tmp_path / "indexed.csv")
    frame.set_axis(["bag", "label", "f0", "f0", "f2"], axis=1).to_csv(tmp_path / "twice.csv", index=False)
    with pytest.raises(ValueError, match="names 'f0' twice"):
        load_bags_csv(tmp_path / "twice.csv")
    # Any keyword had turned the check off, the docstring's own sep=";" and encoding= too.
    frame.set_axis(["bag", "label", "f0", "f0", "f2"], axis=1).to_csv(tmp_path / "semi.csv", index=False, sep=";")
    with pytest.raises(ValueError, match="names 'f0' twice"):
        load_bags_csv(tmp_path / "semi.csv", sep=";")
    for spelling in ("utf-8", "UTF-8", "utf_8"):  # a byte-order mark is no part of the first name in any spelling
        (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + (tmp_path / "indexed.csv").read_bytes())
        with pytest.raises(ValueError, match="column 0 has no name in the header"):
            load_bags_csv(tmp_path / "bom.csv", encoding=spelling)
    (tmp_path / "bad.csv").write_bytes("bag,label,f\xe9\n".encode("latin-1") + b"a,0,1\n")
    with pytest.raises(ValueError, match=r"bad.csv is not a readable CSV \(another encoding"):
        load_bags_csv(tmp_path / "bad.csv")


def test_cv_writes_its_three_files_together_or_none(tmp_path, capsys, monkeypatch):
    from minitorch_proto import outputs

    data = _csv(tmp_path / "d.csv", [f"b{i}" for i in range(8)], [0, 1] * 4)
    (tmp_path / "res.run.json").mkdir()  # in the way of the third file: the run had ended with two of three
    argv = ["cv", "--csv", data, "--folds", "2", "--repeats", "1", *FAST, "--quiet", "--out", tmp_path / "res.csv"]
    code, out, err = _run(capsys, *argv)
    assert code == 2 and "res.run.json" in err and out == "" and not (tmp_path / "res.csv").exists()
    (tmp_path / "res.run.json").rmdir()
    real = os.replace

    def fail_on_the_last(src, dst):
        if str(dst).endswith(".run.json"):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(outputs.os, "replace", fail_on_the_last)
    code, _, err = _run(capsys, *argv)
    assert code != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv"]  # nothing half-written, no temporaries left


def test_wording_for_other_separators_modified_benchmarks_and_odd_bags(tmp_path, capsys):
    from minitorch_proto.validation import check_bags

    semi = tmp_path / "semi.csv"
    semi.write_text("bag;label;f0\nb1;0;1,5\nb2;1;2,5\n")  # European: ';' between fields, ',' in numbers
    code, _, err = _run(capsys, "train", "--csv", semi, *FAST, "--out", tmp_path / "m.safetensors")
    assert code == 2 and "seems separated by ';'" in err
    with pytest.raises(ValueError, match="seems separated by ';'"):
        load_bags_csv(semi)
    assert load_bags_csv(semi, sep=";", decimal=",").bags[0][0, 0] == 1.5
    # A bag folder's labels file: no Python reader takes a separator, so the advice is to convert it alone.
    from minitorch_proto.data.bag_files import BagFileError
    from minitorch_proto.data.disk import DiskBagDataset

    write_bag_folder(tmp_path / "bags", [np.ones((2, 1)), np.zeros((2, 1))], np.array([0, 1]), ["b1", "b2"])
    (tmp_path / "labels.csv").write_text("bag;label\nb1;0\nb2;1\n")
    with pytest.raises(BagFileError, match=r"separated by ';', not by commas \(convert it to a comma-separated "
                                           r"file\)\.$"):
        DiskBagDataset(tmp_path / "bags", tmp_path / "labels.csv")
    with pytest.raises(ValueError, match=r"instance 0, feature 0: 1e\+300\)"):
        check_bags([np.array([[1e300]])])
    with pytest.raises(ValueError, match=r"bags\[1\] could not be converted"):
        check_bags([np.ones((2, 2)), [[1.0, 2.0], [3.0]]])


def test_a_modified_benchmark_copy_is_pointed_at_the_command_line_not_the_api(tmp_path, capsys, shared_mil):
    original = shared_mil / "Musk1.csv"
    (tmp_path / "Musk1.csv").write_text("".join(original.read_text().splitlines(keepends=True)[:-3]))
    code, _, err = _run(capsys, "cv", "--dataset", "musk1", "--data-dir", tmp_path, "--no-verify", "--no-download",
                        "--repeats", "1", "--folds", "2", *FAST)
    assert code == 2 and err.endswith(f"pass it as --csv {tmp_path / 'Musk1.csv'} --no-header.")
    assert "read_mil_csv" not in err


def test_train_replaces_a_model_file_but_not_a_stranger_and_predict_writes_dash_to_standard_output(tmp_path, capsys):
    data = _csv(tmp_path / "d.csv", [f"b{i}" for i in range(6)], [0, 1] * 3)
    precious = tmp_path / "notes.txt"
    precious.write_text("a week of notes\n")
    code, _, err = _run(capsys, "train", "--csv", data, *FAST, "--out", precious)
    assert code == 2 and "not a model file" in err and precious.read_text() == "a week of notes\n"
    import zipfile

    sheet, settings = tmp_path / "report.xlsx", tmp_path / "settings.json"
    with zipfile.ZipFile(sheet, "w") as archive:  # any zip ("PK") had passed for a 0.1 model file
        archive.writestr("xl/workbook.xml", "<w/>")
    settings.write_text('{"data":{"lr":0.1}}\n')  # "{" at byte 8 had passed for a safetensors header
    for stranger in (sheet, settings):
        before = stranger.read_bytes()
        code, _, err = _run(capsys, "train", "--csv", data, *FAST, "--out", stranger)
        assert code == 2 and "not a model file" in err and stranger.read_bytes() == before
    code, _, err = _run(capsys, "train", "--csv", data, *FAST, "--out", "-")
    assert code == 2 and "standard output" in err and not Path("-").exists()
    long_name = tmp_path / ("a" * 300 + ".safetensors")  # the file system's own error had exited 1
    code, _, err = _run(capsys, "train", "--csv", data, *FAST, "--out", long_name)
    assert code == 2 and err.startswith("error: --out") and "File name too long" in err
    code, _, err = _run(capsys, "train", "--csv", tmp_path / ("b" * 300 + ".csv"), *FAST, "--out", tmp_path / "z")
    assert code == 2 and err.startswith("error: --csv") and "File name too long" in err
    model = tmp_path / "m.safetensors"
    for _ in range(2):  # a model file may be replaced by a new one
        assert _run(capsys, "train", "--csv", data, *FAST, "--out", model)[0] == 0
    code, out, _ = _run(capsys, "predict", "--model", model, "--csv", data, "--out", "-")
    assert code == 0 and out.startswith("bag,predicted") and not Path("-").exists()


def test_bag_folder_messages_point_at_the_near_miss(tmp_path, capsys):
    import h5py

    bags, y = make_concept_bags(n_bags=4, n_features=2)
    folder = tmp_path / "f"
    write_bag_folder(folder, bags, y, ["b0", "b1", "b2", "b3"], fmt="npy")
    model = tmp_path / "m.safetensors"
    (folder / "labels.csv").write_text("bag,label\n" + "".join(f"b{i},{int(y[i])}\n" for i in range(3)))
    code, _, err = _run(capsys, "train", "--bags-dir", folder, *FAST, "--out", model)
    assert code == 0 and "1 feature file(s) in --bags-dir" in err and "b3.npy" in err  # listed nowhere, read nowhere
    (folder / "labels.csv").write_text("bag,label\nb0.npy,0\nb1,1\n")
    code, _, err = _run(capsys, "train", "--bags-dir", folder, *FAST, "--out", model)
    assert code == 2 and "ids name files without their suffix" in err
    (folder / "b0.npy").rename(folder / "b0.NPY")
    (folder / "labels.csv").write_text("bag,label\nb0,0\nb1,1\n")
    code, _, err = _run(capsys, "train", "--bags-dir", folder, *FAST, "--out", model)
    assert code == 2 and "found 'b0.NPY': rename it with a lower-case suffix" in err
    other = tmp_path / "h"
    other.mkdir()
    with h5py.File(other / "s0.h5", "w") as fh:
        fh["feats"] = bags[0]
    (other / "labels.csv").write_text("bag,label\ns0,0\n")
    code, _, err = _run(capsys, "predict", "--model", model, "--bags-dir", other)
    assert code == 2 and "no 'features' dataset in the HDF5 file (it holds ['feats'])" in err


def test_bag_ids_that_differ_only_in_spaces_stay_two_bags_with_a_note(tmp_path, capsys):
    path = _csv(tmp_path / "s.csv", ["b1", "b1 ", "b2", "b3"], [0, 1, 0, 1])
    code, out, err = _run(capsys, "train", "--csv", path, *FAST, "--out", tmp_path / "m.safetensors")
    assert code == 0 and "4 bags" in out and "'b1' and 'b1 ' differ only in surrounding spaces" in err


def test_the_readers_own_options_still_rule_their_columns(tmp_path):
    # From a review of the label change: an index the caller names, their own parsing of labels, usecols.
    (tmp_path / "i.csv").write_text("sample,bag,label,f0\n" + "".join(f"s{k},b{k // 2},{k // 2 % 2},{k}\n"
                                                                      for k in range(8)))
    assert load_bags_csv(tmp_path / "i.csv", index_col="sample").n_bags == 4
    (tmp_path / "d.csv").write_text('bag;label;f0\n' + "".join(f"b{k};{k % 2},0;{k},5\n" for k in range(4)))
    assert load_bags_csv(tmp_path / "d.csv", sep=";", decimal=",").y.tolist() == [0, 1, 0, 1]
    (tmp_path / "u.csv").write_text("bag,label,f0,junk\nb0,,1,x\nb1,1,2,y\n")
    with pytest.raises(ValueError, match="missing a value"):
        load_bags_csv(tmp_path / "u.csv", usecols=["bag", "label", "f0"])
    (tmp_path / "n.csv").write_text("bag,label,f0\n" + "".join(f"b{k},{lab},{k}\n" for k, lab in
                                                             enumerate(["1.benign", "2.malignant", "NA", "NA"])))
    assert load_bags_csv(tmp_path / "n.csv").y.tolist() == ["1.benign", "2.malignant", "NA", "NA"]


def test_a_failed_rename_keeps_the_old_files_whole(tmp_path, monkeypatch):
    from minitorch_proto import outputs

    real = os.replace
    calls = []

    def fail_at(n):
        def replace(src, dst):
            calls.append(dst)
            if len(calls) == n:
                raise OSError(28, "No space left on device")
            return real(src, dst)
        return replace

    model = tmp_path / "model.safetensors"
    model.write_text("OLD")
    monkeypatch.setattr(outputs.os, "replace", fail_at(1))
    with pytest.raises(OSError):
        outputs.write_atomic(model, "NEW")
    assert model.read_text() == "OLD"  # the rollback had taken it for a new file and deleted it
    stem = "x" * 45  # long names: the backups had shared one name
    files = [tmp_path / f"{stem}.csv", tmp_path / f"{stem}.predictions.csv", tmp_path / f"{stem}.run.json"]
    for f in files:
        f.write_text("OLD " + f.name)
    calls.clear()
    monkeypatch.setattr(outputs.os, "replace", fail_at(6))  # the last of three (aside, new) pairs
    with pytest.raises(OSError):
        outputs.write_together({f: "NEW" for f in files})
    assert [f.read_text() for f in files] == ["OLD " + f.name for f in files]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([model.name] + [f.name for f in files])


# From the second model-files audit: malformed metadata, class and tensor dtypes, parameters that contradict
# the tensors, and the permissions of a file saved over. Each case had loaded (or failed with a traceback).
@pytest.mark.parametrize("value", ["object", "number"])
def test_model_metadata_that_is_not_text_is_a_one_line_error(saved, capsys, value):
    from minitorch_proto.serialization import is_model_file

    path, _ = saved
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    outer = json.loads(data[8:8 + n])
    inner = json.loads(outer["__metadata__"]["minitorch_proto"])
    outer["__metadata__"]["minitorch_proto"] = inner if value == "object" else 5  # safetensors wants text
    text = json.dumps(outer).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n:])
    kind = "an object" if value == "object" else "a number"
    with pytest.raises(ModelFileError, match=f"metadata is {kind}; it must be text"):  # was a TypeError
        load_model(path)
    assert not is_model_file(path)
    data_csv = _csv(path.parent / "d.csv", [f"b{i}" for i in range(6)], [0, 1] * 3)
    code, _, err = _run(capsys, "predict", "--model", path, "--csv", data_csv)
    assert code == 2 and len(err.splitlines()) == 1 and str(path) in err and kind in err
    before = path.read_bytes()
    code, _, err = _run(capsys, "train", "--csv", data_csv, *FAST, "--out", path)
    assert code == 2 and "not a model file" in err and path.read_bytes() == before


@pytest.mark.parametrize("edit, words", [
    ({"classes": ["neg", "pos"], "classes_dtype": "<U1"}, r"would read the classes \['neg', 'pos'\] as \['n', 'p'\]"),
    ({"classes": [0, 300], "classes_dtype": "<i1"}, "cannot hold the classes"),  # an OverflowError traceback
    ({"classes": [0, 2 ** 70], "classes_dtype": "<i8"}, "cannot hold the classes"),
    ({"classes": [0, 1], "classes_dtype": "M8[D]"}, "'M8\\[D\\]' is not a label type save writes"),
    ({"classes": [1.5, 2.5], "classes_dtype": "<i8"}, r"as \[1, 2\]; it must hold them unchanged"),
    ({"classes": [0, 5], "classes_dtype": "|b1"}, r"as \[False, True\]"),
    ({"classes": ["neg", "pos"], "classes_dtype": "<U3000000"}, "wider than any label save writes"),  # 24 MB
], ids=["U1", "int8 overflow", "int64 overflow", "dates", "floats as ints", "ints as booleans", "huge width"])
def test_a_classes_dtype_that_changes_the_labels_is_refused(saved, capsys, edit, words):
    path, _ = saved
    _rewrite(path, edit_header=lambda h: {**h, **edit})
    with pytest.raises(ModelFileError, match=words) as exc:
        load_model(path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)
    code, _, err = _run(capsys, "predict", "--model", path, "--csv", _csv(path.parent / "p.csv", ["a", "b"], [0, 1]))
    assert code == 2 and len(err.splitlines()) == 1


@pytest.mark.parametrize("labels", [[False, True], ["neg", "pos"], np.array(["a", "bc"], dtype=object), [0.0, 1.0],
                                    np.array([3, 7], dtype=np.uint8), np.array([-1, 1], dtype=">i2")],
                         ids=["bool", "text", "object", "float", "uint8", "big-endian int16"])
def test_every_label_type_save_writes_loads_unchanged(saved, labels):
    from minitorch_proto.serialization import to_jsonable

    path, bags = saved
    classes = np.asarray(labels)  # as save writes classes_: its values, and its dtype's .str
    _rewrite(path, edit_header=lambda h: {**h, "classes": to_jsonable(classes), "classes_dtype": classes.dtype.str})
    clf = load_model(path)
    assert clf.classes_.dtype == classes.dtype and clf.classes_.tolist() == classes.tolist()
    assert set(clf.predict(bags).tolist()) <= set(classes.tolist())


def _complex_nan(t):
    p = t["model/prototypes"].to(torch.complex64)
    p[0, 0] = complex(float("nan"), 0.0)
    t["model/prototypes"] = p


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.update({"model/prototypes": t["model/prototypes"].to(torch.int64)}),
     "tensor 'model/prototypes' has dtype torch.int64, and save writes it as torch.float32"),
    (lambda t: t.update({"model/weight": t["model/weight"].bool()}), "'model/weight' has dtype torch.bool"),
    (lambda t: t.update({"model/weight": t["model/weight"].to(torch.uint8)}), "'model/weight' has dtype torch.uint8"),
    (lambda t: t.update({"model/prototypes": t["model/prototypes"].double()}), "has dtype torch.float64, and save"),
    (_complex_nan, "'model/prototypes' has dtype torch.complex64"),  # its NaN had passed the finiteness check
    (lambda t: t.update({"standardizer/scale": t["standardizer/scale"].to(torch.complex64)}),
     "'standardizer/scale' has dtype torch.complex64, and save writes it as torch.float64"),  # NotImplementedError
    (lambda t: t.update({"standardizer/mean": t["standardizer/mean"].float()}), "'standardizer/mean' has dtype"),
    (lambda t: t.update({"prototype_sources": torch.zeros(1, 3, 2)}),
     "'prototype_sources' has dtype torch.float32, and save writes it as torch.int64"),
], ids=["int64", "bool", "uint8", "float64", "complex nan", "complex scale", "float32 mean", "float sources"])
def test_a_tensor_of_another_dtype_than_save_writes_is_refused(saved, capsys, edit, words):
    path, _ = saved
    _rewrite(path, edit_tensors=edit)
    with pytest.raises(ModelFileError, match=words) as exc:
        load_model(path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)
    code, _, err = _run(capsys, "predict", "--model", path, "--csv", _csv(path.parent / "p.csv", ["a", "b"], [0, 1]))
    assert code == 2 and len(err.splitlines()) == 1 and str(path) in err


def _params(**changes):
    return lambda h: {**h, "params": {k: v for k, v in {**h["params"], **changes}.items() if v != "DROP"}}


@pytest.mark.parametrize("edit_tensors, edit_header, words", [
    (None, _params(distance="DROP"), r"params lack \['distance'\], which decide its predictions"),
    (None, _params(pooling="DROP"), r"params lack \['pooling'\]"),
    (None, _params(monotone="DROP"), r"params lack \['monotone'\]"),  # layer_norm=None leaves it to monotone
    (None, _params(standardization="none"), "params.standardization is 'none' but its standardizer is 'feature'"),
    (None, _params(head_similarity=True), "params.head_similarity is True but 'model' lacks the similarity block"),
    (lambda t: t.update({"model/similarity_sigma2": torch.tensor(1.0)}), None,
     "params.head_similarity is False but 'model' has the similarity block"),
    (None, _params(device="bogus"), "device 'bogus' is not one fit takes"),
    (None, _params(device=3), "device 3 is not one fit takes"),
    (None, _params(backend="bogus"), "backend must be 'auto', 'compiled' or 'tensor', got 'bogus'"),
    (None, _params(autocast="bogus"), "autocast must be None or 'bf16', got 'bogus'"),
    (None, _params(random_state="x"), "random_state must be None or an int from 0 to 2\\*\\*63 - 1, got 'x'"),
    (None, _params(random_state=-1), "random_state must be None or an int"),
    (None, lambda h: {**h, "history": "x"}, "history must be a list of per-epoch records"),
    (lambda t: t.update({"junk": torch.zeros(2)}), None,
     r"written by a newer version or another program \(unknown tensors \['junk'\]\)"),
    (lambda t: t.update({"model/extra": torch.zeros(2)}), None, r"unknown tensors \['model/extra'\]"),
], ids=["no distance", "no pooling", "no monotone", "standardization", "similarity param", "similarity tensor",
        "device", "device number", "backend", "autocast", "random_state text", "random_state negative", "history",
        "junk tensor", "module tensor"])
def test_parameters_must_state_the_model_and_fit_settings_must_be_fittable(saved, capsys, edit_tensors, edit_header,
                                                                            words):
    path, _ = saved
    _rewrite(path, edit_tensors, edit_header)
    with pytest.raises(ModelFileError, match=words) as exc:
        load_model(path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)
    code, _, err = _run(capsys, "predict", "--model", path, "--csv", _csv(path.parent / "p.csv", ["a", "b"], [0, 1]))
    assert code == 2 and len(err.splitlines()) == 1


def test_files_save_writes_still_load_and_refit(tmp_path):
    from sklearn.base import clone

    bags, y = make_concept_bags(n_bags=12, n_features=3)
    # Every tensor save writes: two members, their similarity blocks, the pushed prototypes' sources.
    clf = PrototypeMILClassifier(epochs=1, n_prototypes=3, n_seeds=2, push=True, head="logistic",
                                 head_similarity=True, standardization="instance", device="cpu").fit(bags, y)
    loaded = load_model(clf.save(tmp_path / "m.safetensors"))
    np.testing.assert_array_equal(loaded.predict_proba(bags), clf.predict_proba(bags))
    np.testing.assert_array_equal(clone(loaded).fit(bags, y).predict_proba(bags), clf.predict_proba(bags))
    one = PrototypeMILClassifier(epochs=1, n_prototypes=3, device="cpu").fit(bags, y)
    path = one.save(tmp_path / "one.safetensors")
    for device in ("cuda", "None"):  # a GPU-trained model loads on the CPU; "None" is how save once wrote None
        _rewrite(path, edit_header=_params(device=device))
        np.testing.assert_array_equal(load_model(path).predict_proba(bags), one.predict_proba(bags))


@pytest.mark.parametrize("name", ["model_21e2568.safetensors", "model_4d483af.pt"])
def test_files_earlier_versions_saved_still_load_and_predict_as_they_did(name):
    """Files written by the package's own save at older commits (tests/data: the file, and beside it the
    probabilities the old code predicted): before layer_norm_eps was a parameter, a format-2 file and every
    0.1 file lack it, and its default is the value those models used."""
    import json
    import warnings

    path = Path(__file__).parent / "data" / name
    made = json.loads(path.with_name(name + ".json").read_text())
    rng = np.random.default_rng(0)  # the bags the old code predicted (benchmarks-free: made here as it made them)
    bags = [rng.normal(size=(3, 4)).astype(np.float32) for _ in range(8)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a 0.1 file is loaded with a warning to save it again
        loaded = load_model(path)
    # Float noise only (the old code returned float32 probabilities): another model would differ by far more.
    np.testing.assert_allclose(loaded.predict_proba(bags), made["predict_proba"], rtol=0, atol=1e-6)


def test_save_refuses_settings_the_file_could_not_load_with(tmp_path):
    bags, y = make_concept_bags(n_bags=12, n_features=3)
    clf = PrototypeMILClassifier(epochs=1, n_prototypes=3, device="cpu").fit(bags, y)
    for change, words in (({"standardization": "none"}, r"set_params changed standardization \('feature' when"),
                          ({"backend": "bogus"}, "backend must be 'auto', 'compiled' or 'tensor'"),
                          ({"random_state": -3}, "random_state must be None or an int")):
        old = {k: clf.get_params()[k] for k in change}
        clf.set_params(**change)
        with pytest.raises(ValueError, match=words):
            clf.save(tmp_path / "x.safetensors")
        assert not (tmp_path / "x.safetensors").exists()
        clf.set_params(**old)
    clf.model_.double()  # load reads float32 modules only: the file would not load
    with pytest.raises(ValueError, match=r"must be float32 to be saved, as fit leaves them; model/prototypes \(torch"):
        clf.save(tmp_path / "x.safetensors")
    clf.model_.float()
    assert load_model(clf.save(tmp_path / "x.safetensors")).standardization == "feature"


def test_saving_over_a_file_keeps_its_permission_bits(saved, tmp_path):
    from minitorch_proto.outputs import write_atomic, write_together

    path, _ = saved
    clf = load_model(path)
    os.chmod(path, 0o600)  # a model someone made private
    clf.save(path)
    assert path.stat().st_mode & 0o7777 == 0o600  # had become 0o644
    mask = os.umask(0o022)
    os.umask(mask)
    fresh = clf.save(tmp_path / "new.safetensors")
    assert fresh.stat().st_mode & 0o7777 == 0o666 & ~mask
    table, notes = tmp_path / "t.csv", tmp_path / "n.txt"
    table.write_text("old\n")
    os.chmod(table, 0o640)
    write_atomic(table, "new\n")
    assert table.stat().st_mode & 0o7777 == 0o640 and table.read_text() == "new\n"
    os.chmod(table, 0o604)
    write_together({table: "a\n", notes: "b\n"})
    assert table.stat().st_mode & 0o7777 == 0o604 and notes.stat().st_mode & 0o7777 == 0o666 & ~mask
    # A results folder written again (reproduce, compare --out): a replaced file keeps its bits too.
    from minitorch_proto.outputs import staged_directory

    out = tmp_path / "run"
    for content in ("first\n", "second\n"):
        with staged_directory(out, "test") as stage:
            (stage / "results.csv").write_text(content)
            (stage / "new.txt").write_text(content)
        if content == "first\n":
            os.chmod(out / "results.csv", 0o600)
            (out / "new.txt").unlink()
    assert (out / "results.csv").read_text() == "second\n" and (out / "results.csv").stat().st_mode & 0o7777 == 0o600
    assert (out / "new.txt").stat().st_mode & 0o7777 == 0o666 & ~mask


def _wide(n_bags=8, per_bag=3, n_features=120, seed=0) -> pd.DataFrame:
    """label, bag, features: a file wider than pandas' 100-block consolidation threshold."""
    rng = np.random.default_rng(seed)
    rows = n_bags * per_bag
    frame = pd.DataFrame(rng.normal(size=(rows, n_features)), columns=[f"f{j}" for j in range(n_features)])
    frame.insert(0, "bag", [f"slide-{i // per_bag:02d}" for i in range(rows)])
    frame.insert(0, "label", [(i // per_bag) % 2 for i in range(rows)])
    return frame


def test_predicting_a_wide_unlabelled_file_prints_no_pandas_warning(tmp_path, capsys):
    # read_csv gives each column a block; adding the label placeholder to 100+ blocks printed a two-line
    # PerformanceWarning naming the package's source on every predict of real (wide) data.
    import warnings

    frame = _wide()
    frame.to_csv(tmp_path / "train.csv", index=False)
    frame.drop(columns="label").to_csv(tmp_path / "new.csv", index=False)
    frame.drop(columns="label").to_csv(tmp_path / "new_noheader.csv", index=False, header=False)
    frame.to_csv(tmp_path / "train_noheader.csv", index=False, header=False)
    model, bare = tmp_path / "m.safetensors", tmp_path / "bare.safetensors"
    assert _run(capsys, "train", "--csv", tmp_path / "train.csv", *FAST, "--out", model)[0] == 0
    assert _run(capsys, "train", "--csv", tmp_path / "train_noheader.csv", "--no-header", *FAST, "--out", bare)[0] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        code, out, err = _run(capsys, "predict", "--model", model, "--csv", tmp_path / "new.csv")
        assert code == 0 and len(out.splitlines()) == 9, err
        code, out, err = _run(capsys, "predict", "--model", bare, "--csv", tmp_path / "new_noheader.csv",
                              "--no-header", "--bag-col", "0")
        assert code == 0 and len(out.splitlines()) == 9, err


def test_a_headerless_file_one_column_short_is_not_only_called_unlabelled(tmp_path, capsys):
    # label, bag and all but one feature: the advice had been --bag-col alone, which then read the label
    # column as bag ids (or as a feature) and predicted with exit 0.
    frame = _wide(n_features=6)
    frame.to_csv(tmp_path / "train.csv", index=False, header=False)
    frame.iloc[:, :-1].to_csv(tmp_path / "short.csv", index=False, header=False)
    model = tmp_path / "m.safetensors"
    assert _run(capsys, "train", "--csv", tmp_path / "train.csv", "--no-header", *FAST, "--out", model)[0] == 0
    code, _, err = _run(capsys, "predict", "--model", model, "--csv", tmp_path / "short.csv", "--no-header")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "either the bags are unlabelled" in err and "lacks one of the model's features" in err


def test_predict_says_when_the_bag_and_label_columns_look_swapped(tmp_path, capsys):
    # bag, label, features read with --no-header's label, bag, features: the "bags" are the two label values.
    frame = _wide(n_features=6)
    frame.to_csv(tmp_path / "train.csv", index=False, header=False)
    frame[["bag", "label", *frame.columns[2:]]].to_csv(tmp_path / "swapped.csv", index=False, header=False)
    model = tmp_path / "m.safetensors"
    assert _run(capsys, "train", "--csv", tmp_path / "train.csv", "--no-header", *FAST, "--out", model)[0] == 0
    code, out, err = _run(capsys, "predict", "--model", model, "--csv", tmp_path / "swapped.csv", "--no-header")
    assert code == 0 and len(out.splitlines()) == 3  # still predicted (labels are not read), but said:
    assert "2 of 2 bags hold instances with different values in the label column '0'" in err
    assert "the bag and label columns are swapped" in err
    code, _, err = _run(capsys, "predict", "--model", model, "--csv", tmp_path / "train.csv", "--no-header")
    assert code == 0 and "different values" not in err  # one label per bag: nothing to say
    broken = frame[["bag", "label", *frame.columns[2:]]].astype(object)
    broken.iloc[3, 4] = "nan"
    broken.to_csv(tmp_path / "broken.csv", index=False, header=False)
    code, _, err = _run(capsys, "predict", "--model", model, "--csv", tmp_path / "broken.csv", "--no-header")
    assert code == 2 and len(err.splitlines()) == 1 and "different values" not in err, err  # the error alone


def test_train_names_the_columns_it_took_as_features(tmp_path, capsys):
    # Every column but the bag and label ones is a feature: an id or a site column too, which predict then
    # requires. The summary says which.
    path = _csv(tmp_path / "d.csv", ["a", "b", "c", "d"], [0, 1, 0, 1])
    pd.read_csv(path).assign(site=1.0).to_csv(path, index=False)
    code, out, _ = _run(capsys, "train", "--csv", path, *FAST, "--out", tmp_path / "m.safetensors")
    assert code == 0 and "4 features: ['f0', 'f1', 'f2', 'site']" in out, out


def test_a_model_of_a_headerless_file_points_a_named_file_at_no_header(tmp_path, capsys):
    frame = _wide(n_features=4)
    frame.to_csv(tmp_path / "train.csv", index=False, header=False)
    frame.to_csv(tmp_path / "named.csv", index=False)
    model = tmp_path / "m.safetensors"
    assert _run(capsys, "train", "--csv", tmp_path / "train.csv", "--no-header", *FAST, "--out", model)[0] == 0
    code, _, err = _run(capsys, "predict", "--model", model, "--csv", tmp_path / "named.csv")
    assert code == 2 and len(err.splitlines()) == 1 and "read this one with --no-header" in err, err


def test_a_text_cell_among_numbers_is_named_by_its_line_and_value(tmp_path):
    # NaN, infinity and float32 overflow were named by line and value; a stray word was named by column alone.
    path = tmp_path / "d.csv"
    path.write_text("bag,label,f0,f1\na,0,1.0,2.0\na,0,1.5,2.5\nb,1,3.0,x7\nb,1,3.5,4.0\n")
    with pytest.raises(ValueError, match=r"\['f1'\] are not numeric \(dtype \w+, line 4: 'x7'\)"):
        load_bags_csv(path)


def test_a_labels_file_without_a_header_row_is_told_so(tmp_path):
    from minitorch_proto.data.bag_files import BagFileError
    from minitorch_proto.data.disk import DiskBagDataset

    bags, y = make_concept_bags(n_bags=4, n_features=3)
    write_bag_folder(tmp_path / "bags", bags, y, ["s0", "s1", "s2", "s3"])
    (tmp_path / "labels.csv").write_text("".join(f"s{i},{int(v)}\n" for i, v in enumerate(y)))
    with pytest.raises(BagFileError, match=r"first row reads as a bag and its label.*header row \(bag,label\)"):
        DiskBagDataset(tmp_path / "bags", tmp_path / "labels.csv")


def test_ignore_cols_leaves_a_column_out_of_train_predict_and_explain_alike(tmp_path, capsys):
    path = _csv(tmp_path / "d.csv", ["a", "b", "c", "d"], [0, 1, 0, 1])
    frame = pd.read_csv(path).assign(site=[7.0, 8.0] * 4)
    frame.to_csv(path, index=False)
    model = tmp_path / "m.safetensors"
    code, out, _ = _run(capsys, "train", "--csv", path, "--ignore-cols", "site", *FAST, "--out", model)
    assert code == 0 and "3 features: ['f0', 'f1', 'f2']" in out, out
    code, want, err = _run(capsys, "predict", "--model", model, "--csv", path, "--ignore-cols", " site ")
    assert code == 0 and len(want.splitlines()) == 5, err
    frame.drop(columns="site").to_csv(tmp_path / "plain.csv", index=False)
    assert _run(capsys, "predict", "--model", model, "--csv", tmp_path / "plain.csv")[1] == want
    code, _, err = _run(capsys, "predict", "--model", model, "--csv", path)  # the column is no feature of the model
    assert code == 2 and "name them with --ignore-cols" in err
    assert _run(capsys, "explain", "--model", model, "--csv", path, "--ignore-cols", "site", "--top", "1")[0] == 0
    for given, words in (("nosuch", "which --csv"), ("site,,f0", "empty name"), ("label", "the label column")):
        code, _, err = _run(capsys, "train", "--csv", path, "--ignore-cols", given, *FAST, "--out", tmp_path / "x.pt")
        assert code == 2 and len(err.splitlines()) == 1 and words in err, (given, err)
    code, _, err = _run(capsys, "train", "--dataset", "musk1", "--ignore-cols", "f0", "--out", tmp_path / "x.pt")
    assert code == 2 and "--ignore-cols describes a --csv file" in err


def test_an_error_stays_one_line_when_notes_were_due(tmp_path, capsys):
    # Notes about the input are held until it has passed: a folder without labels.csv scored by a model of
    # other width, or a file read by a model without feature names that then fails, had printed note + error.
    bags, y = make_concept_bags(n_bags=4, n_features=3)
    write_bag_folder(tmp_path / "bags", bags, y, ["a", "b", "c", "d"])
    (tmp_path / "bags" / "labels.csv").unlink()
    wide, _ = make_concept_bags(n_bags=4, n_features=5)
    model = PrototypeMILClassifier(epochs=1, n_prototypes=2).fit(wide, y).save(tmp_path / "m.safetensors")
    code, _, err = _run(capsys, "predict", "--model", model, "--bags-dir", tmp_path / "bags")
    assert code == 2 and len(err.splitlines()) == 1 and "note:" not in err, err
    code, _, err = _run(capsys, "explain", "--model", model, "--bags-dir", tmp_path / "bags")
    assert code == 2 and len(err.splitlines()) == 1 and "note:" not in err, err
    narrow = PrototypeMILClassifier(epochs=1, n_prototypes=2).fit(bags, y).save(tmp_path / "n.safetensors")
    code, out, err = _run(capsys, "predict", "--model", narrow, "--bags-dir", tmp_path / "bags")
    assert code == 0 and err.startswith("note:") and "scoring every feature file" in err  # said when it worked
    path = _csv(tmp_path / "d.csv", ["a", "b"], [0, 1])
    pd.read_csv(path).assign(f3=1.0, f4=2.0).to_csv(tmp_path / "five.csv", index=False)
    code, _, err = _run(capsys, "predict", "--model", model, "--csv", path)  # 3 columns for 5 features
    assert code == 2 and len(err.splitlines()) == 1, err


def test_ignore_cols_takes_names_as_the_file_writes_them_and_names_what_it_took_away(tmp_path, capsys):
    path = _csv(tmp_path / "d.csv", ["a", "b", "c", "d"], [0, 1, 0, 1])
    pd.read_csv(path).assign(**{" site": 1.0}).to_csv(path, index=False)
    model = tmp_path / "m.safetensors"
    code, out, err = _run(capsys, "train", "--csv", path, "--ignore-cols", " site", *FAST, "--out", model)
    assert code == 0 and "3 features: ['f0', 'f1', 'f2']" in out, err
    code, _, err = _run(capsys, "predict", "--model", model, "--csv", path, "--ignore-cols", " site,f0")
    assert code == 2 and "--ignore-cols leaves out ['f0'], feature(s) the model was trained on" in err, err


def test_bag_folder_labels_advice_on_the_command_line(tmp_path, capsys, monkeypatch):
    bags, y = make_concept_bags(n_bags=4, n_features=3)
    write_bag_folder(tmp_path / "features", bags, y, ["a", "b", "c", "d"])
    monkeypatch.chdir(tmp_path)
    out = ["--epochs", "1", "--prototypes", "2", "--out", "m.safetensors"]
    code, _, err = _run(capsys, "train", "--bags-dir", "features", "--labels", "labels.csv", *out)
    assert code == 2 and "features/labels.csv is: pass --labels features/labels.csv" in err, err
    (tmp_path / "features" / "labels.csv").unlink()
    code, _, err = _run(capsys, "train", "--bags-dir", "features", *out)
    assert code == 2 and "has no labels.csv, and training needs one" in err and len(err.splitlines()) == 1, err
    np.save(tmp_path / "features" / "._a.npy", np.zeros(3))  # no bag, named or not
    (tmp_path / "features" / "sub.npy").mkdir()
    model = PrototypeMILClassifier(epochs=1, n_prototypes=2).fit(bags, y).save(tmp_path / "m2.safetensors")
    code, got, err = _run(capsys, "predict", "--model", model, "--bags-dir", "features")
    assert code == 0 and [r.split(",")[0] for r in got.splitlines()[1:]] == ["a", "b", "c", "d"], err
