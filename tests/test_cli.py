"""The command-line interface, run as a user would (a real subprocess for the entry point)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from minitorch_proto.cli import main
from minitorch_proto.data import BENCHMARKS, load_benchmark

from .conftest import assert_predictions_match, make_concept_bags


@pytest.mark.parametrize("command", ["reproduce", "cv", "train", "predict", "explain", "datasets"])
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert "usage: minitorch-proto " + command in capsys.readouterr().out


def test_console_script_runs():
    exe = [sys.executable, "-m", "minitorch_proto.cli", "--version"]
    out = subprocess.run(exe, capture_output=True, text=True, check=True)
    assert "minitorch-proto" in out.stdout


def test_reproduce_writes_results_for_musk1(shared_mil, tmp_path, capsys):
    out = tmp_path / "res"
    code = main(["reproduce", "--datasets", "musk1", "--repeats", "1", "--folds", "3", "--epochs", "2",
                 "--data-dir", str(shared_mil), "--out", str(out), "--quiet", "--compat", "official"])
    assert code == 0
    res = pd.read_csv(out / "results.csv")
    assert {"dataset", "method", "repeat", "fold", "accuracy", "auc", "evaluation"} <= set(res.columns)
    assert set(res.method) == {"prototype", "prototype (published code)"}
    assert len(res[res.evaluation == "final"]) == 6
    assert len(res[res.evaluation == "test_selected"]) == 3
    assert res.accuracy.between(0, 1).all()
    printed = capsys.readouterr().out
    assert "Prototype learning (paper, reported; its ± about an SD over folds)" in printed and "0.908" in printed
    assert "test-fold selection: optimistic" in printed
    assert (out / "table2.txt").read_text().startswith("1 x 3-fold CV, seed 0, epochs 2, data musk1, code ")
    assert "average rank" not in printed  # one data set: no rank
    assert (out / "summary.csv").exists()
    # Each test bag's scores under both rows and both evaluations, by Musk1's own bag ids.
    pred = pd.read_csv(out / "predictions.csv")
    assert_predictions_match(pred, res)
    assert set(pred.bag) <= set(load_benchmark("musk1", data_dir=shared_mil).bag_ids) and len(set(pred.bag)) == 92
    # run.json says what a rerun needs: the command line, the data file's checksum, the folds' shuffle
    # seeds, the device used and the libraries' versions.
    record = json.loads((out / "run.json").read_text())
    assert record["argv"][1:4] == ["reproduce", "--datasets", "musk1"]
    assert record["data"]["musk1"]["sha256"] == BENCHMARKS["musk1"].sha256
    assert record["data"]["musk1"]["bags"] == 92 and record["split_seeds"] == [0]
    assert record["device"] == "cpu" and record["flags_reach"] == ["prototype", "prototype (published code)"]
    assert {"numpy", "scikit-learn", "torch", "numba"} <= set(record["versions"]) and record["finished_utc"]
    ran = record["configs"]  # what each row ran with: the compat row's own switches, the flags' epochs
    assert ran["prototype"]["musk1"]["train"]["epochs"] == 2
    assert ran["prototype"]["musk1"]["standardization"] == "feature"
    assert ran["prototype (published code)"]["musk1"]["standardization"] == "instance"


def test_unknown_dataset_is_a_clear_error(tmp_path, capsys):
    code = main(["reproduce", "--datasets", "mnist", "--out", str(tmp_path / "x"), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "mnist" in err and "musk1" in err
    assert not (tmp_path / "x" / "results.csv").exists()  # nothing half-written


def test_missing_files_offline_is_a_clear_error(tmp_path, capsys):
    code = main(["cv", "--dataset", "musk1", "--data-dir", str(tmp_path), "--no-download"])
    assert code == 2
    err = capsys.readouterr().err
    assert "Musk1.csv" in err
    assert "download=False" not in err and "load_benchmark(" not in err  # the library's words, not the flags'
    assert "Drop --no-download" in err or "--no-download was given" in err or "--data-dir" in err


def test_train_then_predict_on_a_users_csv(tmp_path, capsys):
    bags, y = make_concept_bags(n_bags=30, seed=0)
    rows = [dict(bag=f"b{i}", label=int(y[i]), **{f"f{j}": v for j, v in enumerate(inst)})
            for i, bag in enumerate(bags) for inst in bag]
    csv = tmp_path / "mine.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    model = tmp_path / "model.pt"
    assert main(["train", "--csv", str(csv), "--out", str(model), "--epochs", "30", "--prototypes", "8",
                 "--lr-prototypes", "0.03", "--lr-classifier", "0.03", "--device", "cpu"]) == 0
    preds = tmp_path / "pred.csv"
    assert main(["predict", "--model", str(model), "--csv", str(csv), "--out", str(preds)]) == 0
    p = pd.read_csv(preds)
    assert list(p.bag) == [f"b{i}" for i in range(30)]
    assert {"proba_0", "proba_1", "predicted"} <= set(p.columns)
    np.testing.assert_allclose(p.proba_0 + p.proba_1, 1, rtol=1e-6)
    assert (p.predicted == y).mean() > 0.8


def test_a_headerless_csv_in_the_classic_layout(tmp_path, capsys):
    # The five benchmarks' layout (label, bag, features..., no header) is the commonest MIL file a user has.
    from minitorch_proto.data import read_mil_csv
    from minitorch_proto.estimator import load_model

    bags, y = make_concept_bags(n_bags=20, seed=3)
    rows = [[int(y[i]), 100 + i, *inst] for i, bag in enumerate(bags) for inst in bag]
    csv = tmp_path / "classic.csv"
    pd.DataFrame(rows).to_csv(csv, index=False, header=False)
    model, preds, ev = tmp_path / "m.safetensors", tmp_path / "p.csv", tmp_path / "e.csv"
    assert main(["train", "--csv", str(csv), "--out", str(model)]) == 2
    assert "first row looks like data" in capsys.readouterr().err and not model.exists()
    assert main(["train", "--csv", str(csv), "--no-header", "--out", str(model), "--epochs", "3", "--prototypes", "4",
                 "--device", "cpu"]) == 0
    clf = load_model(model)
    assert list(clf.feature_names_in_) == [str(j) for j in range(2, 2 + bags[0].shape[1])]
    classic = read_mil_csv(csv)  # the benchmarks' reader sees the same bags
    assert clf.n_features_in_ == classic.bags[0].shape[1] and len(classic.bags) == 20
    assert main(["predict", "--model", str(model), "--csv", str(csv), "--no-header", "--out", str(preds)]) == 0
    p = pd.read_csv(preds, dtype={"bag": str})
    assert list(p.bag) == [str(100 + i) for i in range(20)]
    np.testing.assert_allclose(p[["proba_0", "proba_1"]].to_numpy(), clf.predict_proba(classic.bags), atol=1e-6)
    assert main(["explain", "--model", str(model), "--csv", str(csv), "--no-header", "--top", "1",
                 "--out", str(ev)]) == 0
    assert len(pd.read_csv(ev)) == 20
    # Unlabelled bags in the same layout less its label column: the bag column must be named, the features
    # are the model's in order, and a wrong column count says what the model needs.
    unlabelled = tmp_path / "unlabelled.csv"
    pd.DataFrame([r[1:] for r in rows]).to_csv(unlabelled, index=False, header=False)
    assert main(["predict", "--model", str(model), "--csv", str(unlabelled), "--no-header", "--out", str(preds)]) == 2
    assert "either the bags are unlabelled (say which column holds the bag ids with --bag-col" in capsys.readouterr().err
    assert main(["predict", "--model", str(model), "--csv", str(unlabelled), "--no-header", "--bag-col", "0",
                 "--out", str(preds)]) == 0
    p = pd.read_csv(preds, dtype={"bag": str})
    assert list(p.bag) == [str(100 + i) for i in range(20)]
    np.testing.assert_allclose(p[["proba_0", "proba_1"]].to_numpy(), clf.predict_proba(classic.bags), atol=1e-6)
    narrow = tmp_path / "narrow.csv"
    pd.DataFrame([r[:-2] for r in rows]).to_csv(narrow, index=False, header=False)
    assert main(["predict", "--model", str(model), "--csv", str(narrow), "--no-header", "--out", str(preds)]) == 2
    width = bags[0].shape[1]
    assert f"has {width} columns; the model needs {width + 2} (label, bag" in capsys.readouterr().err
    # Columns are numbers without a header; the option describes a CSV only.
    assert main(["train", "--csv", str(csv), "--no-header", "--bag-col", "bag", "--out", str(model)]) == 2
    assert "give a number" in capsys.readouterr().err
    assert main(["train", "--dataset", "musk1", "--no-header", "--out", str(tmp_path / "x.safetensors")]) == 2
    assert "--no-header describes a --csv file" in capsys.readouterr().err


def test_train_recommended_from_a_bag_folder_held_or_streamed(tmp_path, capsys):
    from minitorch_proto.data.disk import write_bag_folder
    from minitorch_proto.estimator import PrototypeMILClassifier, load_model

    bags, y = make_concept_bags(n_bags=30, seed=2)
    labels = write_bag_folder(tmp_path / "bags", bags, y, fmt="npy")
    folder = ["--bags-dir", str(tmp_path / "bags"), "--labels", str(labels), "--device", "cpu"]
    recipe = ["--recommended", "--prototypes", "8", "--seed", "4", "--class-weight", "balanced"]
    assert main(["train", *folder, *recipe, "--out", str(tmp_path / "held.safetensors")]) == 0
    assert main(["train", *folder, *recipe, "--stream", "--chunk-size", "5",
                 "--out", str(tmp_path / "streamed.safetensors")]) == 0
    held, streamed = load_model(tmp_path / "held.safetensors"), load_model(tmp_path / "streamed.safetensors")
    # The recipe, with only the flags given changed; both paths give the same model.
    want = PrototypeMILClassifier.recommended(n_prototypes=8, random_state=4, class_weight="balanced").get_params()
    for clf in (held, streamed):
        got = clf.get_params()
        assert {k: got[k] for k in ("n_prototypes", "distance", "push", "head", "n_seeds", "class_weight",
                                    "epochs", "random_state")} == \
            {k: want[k] for k in ("n_prototypes", "distance", "push", "head", "n_seeds", "class_weight",
                                  "epochs", "random_state")}
    np.testing.assert_array_equal(streamed.prototype_sources_, held.prototype_sources_)
    np.testing.assert_allclose(streamed.predict_proba(bags), held.predict_proba(bags), atol=1e-6)
    # explain reads a bag folder bag by bag: the top instance of each bag, named by the folder's ids
    top = tmp_path / "top.csv"
    assert main(["explain", "--model", str(tmp_path / "streamed.safetensors"), *folder[:4], "--top", "1",
                 "--out", str(top)]) == 0
    ev = pd.read_csv(top, dtype={"bag": str})
    assert list(ev.bag) == list(pd.read_csv(labels, dtype={"bag": str}).bag) and (ev["rank"] == 1).all()
    assert main(["train", *folder, "--recommended", "--compat", "official", "--out", str(tmp_path / "x.pt")]) == 2
    assert "choose one" in capsys.readouterr().err
    assert main(["train", *folder, "--class-weight", "balanced", "--out", str(tmp_path / "x.pt")]) == 2
    assert "--class-weight weights the convex head of --recommended" in capsys.readouterr().err
    assert not (tmp_path / "x.pt").exists()


def test_explain_writes_each_instances_evidence_and_finds_the_planted_instances(tmp_path, capsys):
    from minitorch_proto.estimator import load_model
    from minitorch_proto.evaluation.evidence import instance_scores

    # Positive bags hold one instance moved towards a concept (make_concept_bags); the rest is noise.
    bags, y = make_concept_bags(n_bags=40, seed=3, shift=4.0, min_size=4, max_size=8)
    rows = [dict(bag=f"s{i}", label=["benign", "tumour"][int(y[i])], **{f"f{j}": v for j, v in enumerate(inst)})
            for i, bag in enumerate(bags) for inst in bag]
    csv = tmp_path / "slides.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    model = tmp_path / "model.safetensors"
    assert main(["train", "--csv", str(csv), "--recommended", "--prototypes", "8", "--device", "cpu",
                 "--out", str(model)]) == 0
    out = tmp_path / "evidence.csv"
    assert main(["explain", "--model", str(model), "--csv", str(csv), "--out", str(out)]) == 0
    ev = pd.read_csv(out)
    # The file says what it holds: the method (units differ) and which class "positive" is.
    assert list(ev.columns) == ["bag", "instance", "evidence", "rank", "method", "evidence_for"]
    assert set(ev.method) == {"removal"} and set(ev.evidence_for) == {"tumour"}
    assert len(ev) == sum(len(b) for b in bags)
    clf = load_model(model)
    first = ev[ev.bag == "s1"].sort_values("instance")
    np.testing.assert_allclose(first.evidence, instance_scores(clf, bags[1], "removal"), rtol=1e-6, atol=1e-9)
    best = ev[ev["rank"] == 1].set_index("bag")
    assert (ev.groupby("bag").evidence.max() == best.evidence.reindex(ev.groupby("bag").evidence.max().index)).all()
    # The planted instance is the one that moved furthest along the concept direction (+shift in every feature).
    hits = [best.loc[f"s{i}", "instance"] == int(np.argmax(bags[i].sum(1))) for i in range(1, 40, 2)]
    assert np.mean(hits) >= 0.8
    assert main(["explain", "--model", str(model), "--csv", str(csv), "--top", "2", "--method", "share",
                 "--out", str(out)]) == 0
    assert pd.read_csv(out).groupby("bag").size().max() == 2
    # A model fitted on a pandas string column (labels as Python str objects) names its class too;
    # explain used to fail on them after computing every bag's evidence.
    from minitorch_proto.estimator import PrototypeMILClassifier

    objects = pd.Series(["benign", "tumour"]).to_numpy()[y.astype(int)]
    PrototypeMILClassifier(n_prototypes=4, epochs=2, device="cpu").fit(bags, objects).save(model)
    assert main(["explain", "--model", str(model), "--csv", str(csv), "--top", "1", "--out", str(out)]) == 0
    assert "evidence for class 'tumour'" in capsys.readouterr().err and len(pd.read_csv(out)) == len(bags)
    bad = tmp_path / "bad.csv"
    with pytest.raises(SystemExit) as exc:  # a usage error of argparse's, naming the flag
        main(["explain", "--model", str(model), "--csv", str(csv), "--top", "0", "--out", str(bad)])
    assert exc.value.code == 2 and "--top: 0 is out of range (at least 1)" in capsys.readouterr().err
    assert not bad.exists()


def test_explain_writes_the_patch_coordinates_of_h5_bags(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    bags, y = make_concept_bags(n_bags=24, seed=5)
    folder = tmp_path / "slides"
    folder.mkdir()
    coords = {}
    for i, bag in enumerate(bags):  # as CLAM writes them: 'features' and 'coords' (x, y of each patch)
        coords[f"slide{i}"] = np.column_stack([np.arange(len(bag)) * 256, np.full(len(bag), 512 * i)])
        with h5py.File(folder / f"slide{i}.h5", "w") as f:
            f["features"], f["coords"] = bag, coords[f"slide{i}"]
    pd.DataFrame({"bag": list(coords), "label": y}).to_csv(folder / "labels.csv", index=False)
    model = tmp_path / "m.safetensors"
    assert main(["train", "--bags-dir", str(folder), "--recommended", "--prototypes", "6", "--device", "cpu",
                 "--out", str(model)]) == 0
    out = tmp_path / "ev.csv"
    assert main(["explain", "--model", str(model), "--bags-dir", str(folder), "--coords-key", "coords", "--top", "2",
                 "--out", str(out)]) == 0
    ev = pd.read_csv(out)
    assert list(ev.columns) == ["bag", "instance", "evidence", "rank", "coords_0", "coords_1", "method",
                                "evidence_for"] and len(ev) == 48
    for row in ev.itertuples():
        assert [row.coords_0, row.coords_1] == coords[row.bag][row.instance].tolist()
    assert main(["explain", "--model", str(model), "--bags-dir", str(folder), "--coords-key", "nope",
                 "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "no 'nope' dataset" in err and "per-instance array" in err and "features are read" not in err
    assert not (tmp_path / "x.csv").exists()
    npy = tmp_path / "npy"
    from minitorch_proto.data.disk import write_bag_folder

    write_bag_folder(npy, bags, y, fmt="npy")
    assert main(["explain", "--model", str(model), "--bags-dir", str(npy), "--coords-key", "coords"]) == 2
    assert "a .npy file holds the features only" in capsys.readouterr().err


def test_explain_draws_a_heatmap_per_slide(tmp_path, capsys, monkeypatch):
    pytest.importorskip("h5py")
    from minitorch_proto.data.disk import DiskBagDataset, write_bag_folder

    bags, y = make_concept_bags(n_bags=16, seed=6)
    coords = [np.column_stack([np.arange(len(b)) % 4 * 256, np.arange(len(b)) // 4 * 256]) for b in bags]
    ids = [f"slide{i}" for i in range(16)]
    folder = tmp_path / "slides"
    labels = write_bag_folder(folder, bags, y, ids, fmt="h5", instance_arrays={"coords": coords})
    pt = write_bag_folder(tmp_path / "pt", bags, y, ids, fmt="pt", instance_arrays={"coords": coords})
    for data in (DiskBagDataset(folder, labels), DiskBagDataset(tmp_path / "pt", pt)):  # what the writer stored
        np.testing.assert_array_equal(data.instance_array(3, "coords"), coords[3])
        np.testing.assert_allclose(data[3], bags[3].astype(np.float32))
    with pytest.raises(ValueError, match="fmt='h5' or 'pt'"):
        write_bag_folder(tmp_path / "npy", bags, y, fmt="npy", instance_arrays={"coords": coords})
    with pytest.raises(ValueError, match="a row per instance"):
        write_bag_folder(tmp_path / "bad", bags, y, fmt="h5", instance_arrays={"coords": coords[:-1]})
    model = tmp_path / "m.safetensors"
    assert main(["train", "--bags-dir", str(folder), "--recommended", "--prototypes", "6", "--device", "cpu",
                 "--out", str(model)]) == 0
    explain = ["explain", "--model", str(model), "--bags-dir", str(folder), "--coords-key", "coords", "--top", "2"]
    maps, plain, drawn = tmp_path / "maps", tmp_path / "plain.csv", tmp_path / "drawn.csv"
    assert main([*explain, "--out", str(plain)]) == 0
    assert main([*explain, "--heatmaps", str(maps), "--out", str(drawn)]) == 0
    assert "wrote 16 heatmaps" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_csv(drawn), pd.read_csv(plain))  # the table is the same with maps
    for bag in ids:
        assert (maps / f"{bag}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Bad requests fail before any work, and leave no folder behind.
    assert main(["explain", "--model", str(model), "--bags-dir", str(folder), "--heatmaps", str(tmp_path / "m2")]) == 2
    assert "--heatmaps needs --coords-key" in capsys.readouterr().err and not (tmp_path / "m2").exists()
    assert main([*explain, "--heatmaps", str(drawn)]) == 2
    assert "is a file" in capsys.readouterr().err
    mine = tmp_path / "mine"  # a folder of the user's own images named like bags: it had been overwritten
    mine.mkdir()
    (mine / "slide3.png").write_bytes(b"my annotated slide")
    assert main([*explain, "--heatmaps", str(mine), "--out", str(tmp_path / "x.csv")]) == 2
    assert "already holds slide3.png" in capsys.readouterr().err
    assert (mine / "slide3.png").read_bytes() == b"my annotated slide" and not (tmp_path / "x.csv").exists()
    flat = write_bag_folder(tmp_path / "flat", bags, y, ids, fmt="h5",
                            instance_arrays={"coords": [c[:, 0] for c in coords]})
    assert main(["explain", "--model", str(model), "--bags-dir", str(tmp_path / "flat"), "--labels", str(flat),
                 "--coords-key", "coords", "--heatmaps", str(tmp_path / "m3")]) == 2
    assert "two coordinates per patch" in capsys.readouterr().err and not (tmp_path / "m3").exists()
    holes = [c.astype(float) for c in coords]
    holes[9][2, 0] = np.nan
    nan = write_bag_folder(tmp_path / "nan", bags, y, ids, fmt="h5", instance_arrays={"coords": holes})
    assert main(["explain", "--model", str(model), "--bags-dir", str(tmp_path / "nan"), "--labels", str(nan),
                 "--coords-key", "coords", "--heatmaps", str(tmp_path / "m4")]) == 2
    err = capsys.readouterr().err
    assert "'slide9'" in err and "NaN" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "m4").exists() and not list(tmp_path.glob(".m4*"))  # nothing half-written
    # The maps and the table are published together: one path for both is refused before any work,
    # and a table that cannot be written leaves no maps either.
    assert main([*explain, "--heatmaps", str(tmp_path / "same"), "--out", str(tmp_path / "same")]) == 2
    assert "both name" in capsys.readouterr().err and not (tmp_path / "same").exists()
    import minitorch_proto.cli as cli

    def full_disk(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli, "write_atomic", full_disk)
    assert main([*explain, "--heatmaps", str(tmp_path / "m5"), "--out", str(tmp_path / "m5.csv")]) == 1
    assert "No space left" in capsys.readouterr().err
    assert not (tmp_path / "m5").exists() and not list(tmp_path.glob(".m5*"))
    monkeypatch.undo()
    # With the table on standard output, the note about the maps goes to standard error.
    assert main([*explain, "--heatmaps", str(tmp_path / "m6"), "--out", "-"]) == 0
    out, err = capsys.readouterr()
    assert "heatmaps" not in out and "wrote 16 heatmaps" in err
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(out)), pd.read_csv(plain))


def test_cv_and_train_commands_on_a_users_csv_with_and_without_bars(tmp_path, capsys):
    bags, y = make_concept_bags(n_bags=20, seed=0)
    rows = [dict(bag=i, label=int(y[i]), a=inst[0], b=inst[1], c=inst[2], d=inst[3])
            for i, bag in enumerate(bags) for inst in bag]
    csv = tmp_path / "mine.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    out = tmp_path / "cv.csv"
    cv = ["cv", "--csv", str(csv), "--repeats", "1", "--folds", "2", "--epochs", "2", "--out", str(out),
          "--device", "cpu"]
    assert main(cv) == 0
    assert len(pd.read_csv(out)) == 2
    assert_predictions_match(pd.read_csv(tmp_path / "cv.predictions.csv"), pd.read_csv(out))
    record = json.loads((tmp_path / "cv.run.json").read_text())  # what made the CSV, beside it
    assert record["command"] == "cv" and record["data"]["mine"]["sha256"] and record["split_seeds"] == [0]
    assert capsys.readouterr().err.strip()  # the progress bar
    assert main([*cv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""  # none, as with reproduce --quiet and compare --quiet
    from minitorch_proto.estimator import load_model

    train = ["train", "--csv", str(csv), "--epochs", "2", "--device", "cpu", "--out", str(tmp_path / "m.safetensors")]
    assert main(train) == 0 and capsys.readouterr().err.strip()
    assert main([*train, "--quiet"]) == 0 and capsys.readouterr().err == ""
    assert load_model(tmp_path / "m.safetensors").get_params()["verbose"] is False


# --------------------------------------------------------------------------- #
# Issue 15: model files, predictions and outputs a user can trust
# --------------------------------------------------------------------------- #
def _user_frame(n_bags=30, seed=0, labels=(0, 1)):
    bags, y = make_concept_bags(n_bags=n_bags, seed=seed)
    rows = [dict(bag=f"b{i}", label=labels[int(y[i])], **{f"f{j}": v for j, v in enumerate(inst)})
            for i, bag in enumerate(bags) for inst in bag]
    return pd.DataFrame(rows), y


TRAIN = ["--epochs", "30", "--prototypes", "8", "--lr-prototypes", "0.03", "--lr-classifier", "0.03",
         "--device", "cpu"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A model trained by the CLI on a user's CSV with named feature columns."""
    root = tmp_path_factory.mktemp("trained")
    frame, y = _user_frame()
    csv = root / "mine.csv"
    frame.to_csv(csv, index=False)
    model = root / "model.safetensors"
    assert main(["train", "--csv", str(csv), "--out", str(model), *TRAIN]) == 0
    return frame, y, model


def _predict(model, frame, tmp_path, name):
    csv = tmp_path / f"{name}.csv"
    frame.to_csv(csv, index=False)
    out = tmp_path / f"{name}_pred.csv"
    assert main(["predict", "--model", str(model), "--csv", str(csv), "--out", str(out)]) == 0
    return pd.read_csv(out)


def test_model_file_records_classes_and_feature_names(trained):
    from minitorch_proto.estimator import load_model
    from minitorch_proto.serialization import load_model_file

    _, _, model = trained
    clf = load_model(model)
    assert list(clf.feature_names_in_) == ["f0", "f1", "f2", "f3"]
    assert list(clf.classes_) == [0, 1]
    header = load_model_file(model).header
    assert header["format"] == "minitorch_proto.model" and header["params"]["n_prototypes"] == 8


def test_predict_scores_bags_without_a_label_column(trained, tmp_path):
    frame, y, model = trained
    labelled = _predict(model, frame, tmp_path, "labelled")
    unlabelled = _predict(model, frame.drop(columns="label"), tmp_path, "unlabelled")
    assert list(unlabelled.columns) == ["bag", "predicted", "proba_0", "proba_1"]
    pd.testing.assert_frame_equal(labelled, unlabelled)
    assert (unlabelled.predicted == y).mean() > 0.8


def test_predict_matches_feature_columns_by_name(trained, tmp_path):
    frame, _, model = trained
    straight = _predict(model, frame, tmp_path, "straight")
    # Columns reversed, bag and label moved: the model must still see f0..f3 in its own order.
    shuffled = frame[["f3", "label", "f1", "f0", "bag", "f2"]]
    reordered = _predict(model, shuffled, tmp_path, "reordered")
    pd.testing.assert_frame_equal(straight, reordered)


def test_predict_in_chunks_gives_one_call_s_numbers_and_names_bags_by_their_ids(trained, tmp_path, monkeypatch,
                                                                              capsys):
    import minitorch_proto.cli as cli
    from minitorch_proto.estimator import load_model

    frame, _, model = trained
    whole = load_model(model).predict_proba([g.filter(like="f").to_numpy() for _, g in frame.groupby("bag",
                                                                                                   sort=False)])
    monkeypatch.setattr(cli, "PREDICT_CHUNK", 7)  # 30 bags: four full steps and a short one
    chunked = _predict(model, frame, tmp_path, "chunked")
    np.testing.assert_allclose(chunked[["proba_0", "proba_1"]].to_numpy(), whole, atol=1e-6)
    # A bag in a later step is named by its own id, not by its place in that step.
    big = frame.copy()
    big.loc[big.bag == "b20", "f0"] = 1e30  # within float32, but its distances overflow
    big.to_csv(tmp_path / "big.csv", index=False)
    assert main(["predict", "--model", str(model), "--csv", str(tmp_path / "big.csv")]) != 0
    err = capsys.readouterr().err
    assert "bag 'b20'" in err and "bag 'b6'" not in err, err


def test_labels_1_2_are_encoded_alike_by_train_predict_and_cv(tmp_path):
    frame01, y = _user_frame(n_bags=20)
    frame12 = frame01.assign(label=frame01.label + 1)
    runs = {}
    for name, frame in (("01", frame01), ("12", frame12)):
        csv = tmp_path / f"{name}.csv"
        frame.to_csv(csv, index=False)
        out = tmp_path / f"cv{name}.csv"
        assert main(["cv", "--csv", str(csv), "--repeats", "1", "--folds", "2", "--epochs", "3", "--out", str(out),
                     "--device", "cpu"]) == 0
        runs[name] = pd.read_csv(out)
    assert runs["12"].auc.notna().all()
    np.testing.assert_allclose(runs["12"].accuracy, runs["01"].accuracy)
    np.testing.assert_allclose(runs["12"].auc, runs["01"].auc)
    model = tmp_path / "m12.safetensors"
    assert main(["train", "--csv", str(tmp_path / "12.csv"), "--out", str(model), "--epochs", "3",
                 "--device", "cpu"]) == 0
    pred = _predict(model, frame12.drop(columns="label"), tmp_path, "p12")
    assert list(pred.columns) == ["bag", "predicted", "proba_1", "proba_2"]
    assert set(pred.predicted) <= {1, 2}


def test_output_files_honour_the_umask(trained, tmp_path):
    frame, _, model = trained
    old = os.umask(0o022)
    try:
        preds = tmp_path / "p.csv"
        csv = tmp_path / "in.csv"
        frame.to_csv(csv, index=False)
        assert main(["predict", "--model", str(model), "--csv", str(csv), "--out", str(preds)]) == 0
        model2 = tmp_path / "m.safetensors"
        assert main(["train", "--csv", str(csv), "--out", str(model2), "--epochs", "1", "--device", "cpu"]) == 0
        for p in (preds, model2):
            assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    finally:
        os.umask(old)


def _toy_benchmarks(args, names):
    from minitorch_proto.data import BagDataset

    bags, y = make_concept_bags(n_bags=12, seed=1)
    return {n: BagDataset(n, bags, y, np.arange(len(bags))) for n in names}


def test_reproduce_refuses_a_pooling_the_monotone_row_cannot_take(tmp_path, monkeypatch, capsys):
    import minitorch_proto.cli as cli

    monkeypatch.setattr(cli, "load_benchmarks", _toy_benchmarks)
    argv = ["reproduce", "--datasets", "toy", "--repeats", "1", "--folds", "2", "--epochs", "1", "--quiet",
            "--device", "cpu", "--methods", "prototype,prototype-monotone"]
    # The row had trained with min pooling while run.json said --pooling reached it.
    assert main([*argv, "--pooling", "min,mean", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "prototype-monotone pools by min only" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "a").exists()
    assert main([*argv, "--pooling", "min", "--out", str(tmp_path / "b")]) == 0


def test_reproduce_writes_all_files_or_none(tmp_path, monkeypatch):
    import minitorch_proto.cli as cli

    monkeypatch.setattr(cli, "load_benchmarks", _toy_benchmarks)
    out = tmp_path / "res"
    argv = ["reproduce", "--datasets", "toy", "--repeats", "1", "--folds", "2", "--epochs", "1", "--out", str(out),
            "--quiet", "--device", "cpu"]
    assert main(argv) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {"results.csv", "summary.csv", "timings.csv", "table2.txt", "run.json"} <= set(before)
    record = json.loads(before["run.json"])
    assert re.fullmatch(r"[0-9a-f]{7,40}(\+dirty)?", record["commit"]), record["commit"]
    assert record["datasets"] == ["toy"] and record["settings"]["folds"] == 2 and record["settings"]["seed"] == 0
    (out / "notes.txt").write_text("the user's own file")

    # A crash while the third result file is written: nothing of the new run may appear.
    real = Path.write_text
    calls = []

    def crash(self, *a, **k):
        calls.append(self.name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", crash)
    assert main([*argv, "--seed", "7"]) == 1
    monkeypatch.setattr(Path, "write_text", real)
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.name != "notes.txt"}
    assert after == before
    assert (out / "notes.txt").read_text() == "the user's own file"
    assert [p.name for p in tmp_path.iterdir()] == ["res"]  # no staging folder left behind
    # And a run that finishes replaces them.
    assert main([*argv, "--seed", "7"]) == 0
    assert (out / "results.csv").read_bytes() != before["results.csv"]


def test_unknown_method_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--methods", "prototype,nosuch", "--out", str(tmp_path / "r")])
    assert exc.value.code == 2
    assert "nosuch" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, tmp_path, capsys):
    import minitorch_proto.cli as cli

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "load_benchmarks", interrupted)  # as if Ctrl-C came while the data were read
    code = main(["reproduce", "--datasets", "musk1", "--out", str(tmp_path / "r"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 130 and err.count("\n") == 1 and err.startswith("error: interrupted; outputs are written whole")
    assert not (tmp_path / "r").exists()


def test_reproduce_times_each_budget_of_a_baseline_on_its_own_row(shared_mil, tmp_path):
    out = tmp_path / "res"
    assert main(["reproduce", "--datasets", "musk1", "--methods", "bag_stats", "--budget", "both", "--repeats", "1",
                 "--folds", "2", "--data-dir", str(shared_mil), "--out", str(out), "--quiet"]) == 0
    timings = pd.read_csv(out / "timings.csv")
    results = pd.read_csv(out / "results.csv")
    # One row per results label: the common budget's time was folded into the defaults row.
    assert list(timings.method) == list(dict.fromkeys(results.method)) == ["bag_stats", "bag_stats (tuned on inner CV)"]
    assert (timings.wall_seconds > 0).all()


def test_command_line_audit_mends(trained, tmp_path, capsys, monkeypatch):
    from minitorch_proto.estimator import load_model

    frame, _, model = trained
    csv = tmp_path / "mine.csv"
    frame.to_csv(csv, index=False)
    quick = ["--epochs", "1", "--prototypes", "2", "--device", "cpu", "--quiet"]
    # An explicit --standardization wins over --compat official's (it had been replaced silently).
    assert main(["train", "--csv", str(csv), "--compat", "official", "--standardization", "none", *quick,
                 "--out", str(tmp_path / "c.safetensors")]) == 0
    assert load_model(tmp_path / "c.safetensors").standardization == "none"
    assert main(["train", "--csv", str(csv), "--compat", "official", *quick,
                 "--out", str(tmp_path / "d.safetensors")]) == 0
    assert load_model(tmp_path / "d.safetensors").standardization == "instance"
    # --out that is a link writes the file it names (the link had been replaced by a file).
    target, link = tmp_path / "target.csv", tmp_path / "link.csv"
    target.write_text("old\n")
    link.symlink_to(target)
    assert main(["predict", "--model", str(model), "--csv", str(csv), "--out", str(link)]) == 0
    assert link.is_symlink() and target.read_text().startswith("bag,predicted")
    # Usage errors and empty values: one line, exit 2.
    capsys.readouterr()
    for argv in (["train", "--csv", str(csv), "--epochs", "0", "--out", "x.safetensors"],
                 ["train", "--csv", "", "--out", "x.safetensors"], ["predict", "--model", "", "--csv", str(csv)],
                 ["cv", "--csv", str(csv), *quick, "--out", "-"]):
        with pytest.raises(SystemExit) if "" in argv or "0" in argv else contextlib.nullcontext() as exc:
            code = main(argv)
        code = exc.value.code if exc is not None else code
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, (argv, err)
    # A write that fails (a full disk) names its file and leaves none of the folders made for it.
    import minitorch_proto.outputs as outputs

    def full(fd, mode):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs.os, "fdopen", full)
    deep = tmp_path / "a" / "b" / "p.csv"
    assert main(["predict", "--model", str(model), "--csv", str(csv), "--out", str(deep)]) == 1
    err = capsys.readouterr().err
    assert f"could not write {deep}" in err and not (tmp_path / "a").exists()
    with pytest.raises(OSError):
        with outputs.staged_directory(tmp_path / "x" / "y" / "run"):
            raise OSError("failed before publishing")
    assert not (tmp_path / "x").exists()


def test_train_whose_out_becomes_unwritable_during_training_is_no_usage_error(trained, tmp_path, capsys, monkeypatch):
    import minitorch_proto.serialization as serialization

    frame, _, _ = trained
    csv = tmp_path / "mine.csv"
    frame.to_csv(csv, index=False)

    def read_only_now(path, kind="file", what="--out"):  # checked fine before training, refused at save time
        raise ValueError(f"{what} {path} cannot be written: folder is not writable (Read-only file system).")

    monkeypatch.setattr(serialization, "check_output_path", read_only_now)
    out = tmp_path / "m.safetensors"
    assert main(["train", "--csv", str(csv), "--epochs", "1", "--prototypes", "2", "--device", "cpu", "--quiet",
                 "--out", str(out)]) == 1
    assert "Read-only" in capsys.readouterr().err and not out.exists()


def test_failed_writes_remove_every_folder_they_made_and_cv_names_side_files_after_the_link(tmp_path, capsys):
    import minitorch_proto.outputs as outputs

    with pytest.raises(TypeError):  # the second file's data is no text: nothing may stay, in either new chain
        outputs.write_together({tmp_path / "new" / "b" / "f1.txt": "one", tmp_path / "new" / "c" / "f2.txt": 12345})
    assert not (tmp_path / "new").exists()
    frame, _ = _user_frame(n_bags=12)
    csv = tmp_path / "mine.csv"
    frame.to_csv(csv, index=False)
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "abc.csv").write_text("old\n")
    (tmp_path / "today.csv").symlink_to(tmp_path / "store" / "abc.csv")
    assert main(["cv", "--csv", str(csv), "--epochs", "1", "--prototypes", "2", "--repeats", "1", "--folds", "2",
                 "--device", "cpu", "--quiet", "--out", str(tmp_path / "today.csv")]) == 0
    assert (tmp_path / "today.predictions.csv").is_file() and (tmp_path / "today.run.json").is_file()
    assert (tmp_path / "store" / "abc.csv").read_text().startswith("dataset,")


def test_benchmark_names_in_any_case_get_table_1_and_run_once():
    # "FOX" had been keyed as typed: Table 1 (looked up in lower case) missed it, so Fox trained at the
    # default rates under the label "fox", and "fox FOX" ran twice into one row.
    from minitorch_proto.cli import build_parser
    from minitorch_proto.cli_inputs import load_benchmarks
    from minitorch_proto.cli_models import configs_from
    from minitorch_proto.paper import paper_configs

    data_dir = os.environ.get("MINITORCH_PROTO_DATA")
    if not data_dir:
        pytest.skip("needs the benchmarks (MINITORCH_PROTO_DATA)")
    args = build_parser().parse_args(["reproduce", "--datasets", "FOX", "fox", "--data-dir", data_dir])
    data = load_benchmarks(args, args.datasets)
    assert list(data) == ["fox"]
    assert configs_from(args, "fox")[1].lr_prototypes == paper_configs("fox")[1].lr_prototypes != 9e-5


def test_compare_refuses_two_class_methods_on_three_classes_before_any_work(tmp_path, capsys, monkeypatch):
    from minitorch_proto.evaluation import comparison

    rows = [dict(bag=f"b{i}", label=i % 3, f0=float(i + k), f1=float(k)) for i in range(18) for k in range(2)]
    pd.DataFrame(rows).to_csv(tmp_path / "three.csv", index=False)
    ran = []
    monkeypatch.setattr(comparison, "compare_methods", lambda *a, **k: ran.append(1))
    code = main(["compare", "--csv", str(tmp_path / "three.csv"), "--methods",
                 "prototype,mi_svm,miles,prototype-monotone", "--folds", "2", "--out", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2 and not ran  # the prototype CV had run first
    assert "mi_svm, miles, prototype (monotone) handle(s) two classes only" in err


def test_pooling_names_may_have_spaces_after_commas():
    from minitorch_proto.cli import build_parser
    from minitorch_proto.cli_models import configs_from

    args = build_parser().parse_args(["cv", "--csv", "x.csv", "--pooling", "min, max", "--out", "o.csv"])
    assert configs_from(args, "x")[0].pooling == ("min", "max")  # "min, max" had been refused for " max"


def test_reproduce_records_where_each_row_ran_and_refuses_options_that_reach_none(tmp_path, monkeypatch, capsys):
    import minitorch_proto.cli as cli

    monkeypatch.setattr(cli, "load_benchmarks", _toy_benchmarks)
    argv = ["reproduce", "--datasets", "toy", "--repeats", "1", "--folds", "2", "--quiet"]
    out = tmp_path / "a"
    assert main([*argv, "--methods", "prototype,bag_stats", "--epochs", "1", "--device", "cpu", "--backend", "tensor",
                 "--out", str(out)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert "note: --device cpu reaches prototype; the other rows run on the CPU." in err
    assert "note: --backend tensor reaches prototype; the other rows have no such choice." in err
    # run.json had said one device for every row; the scikit-learn row has neither option.
    record = json.loads((out / "run.json").read_text())
    assert record["placement"] == {"prototype": {"device": "cpu", "backend": "tensor"},
                                   "bag_stats": {"device": "cpu", "backend": None}}
    assert record["device"] == "cpu"
    # An option that reaches no row is refused before any work, as a model flag is (it had been recorded only).
    for flags, said in [(["--device", "cpu"], "--device sets only the rows that train with torch"),
                        (["--backend", "compiled"], "--backend sets only the prototype rows' training engine")]:
        assert main([*argv, "--methods", "bag_stats,miles", *flags, "--out", str(tmp_path / "b")]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("budget", ["common", "both"])
def test_reproduce_refuses_a_common_budget_no_row_takes(budget, tmp_path, monkeypatch, capsys):
    import minitorch_proto.cli as cli

    monkeypatch.setattr(cli, "load_benchmarks", _toy_benchmarks)
    # It had run the defaults row and written "budget": "common" into run.json; compare refuses the same.
    assert main(["reproduce", "--datasets", "toy", "--methods", "prototype,prototype-tuned", "--budget", budget,
                 "--repeats", "1", "--folds", "2", "--epochs", "1", "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"drop --budget {budget} or add a baseline" in err
    assert "prototype, prototype-tuned have no common budget" in err
    assert not (tmp_path / "r").exists()


def test_cv_prints_no_empty_standard_error_columns_for_one_repeat(tmp_path, capsys):
    frame, _ = _user_frame(n_bags=12)
    frame.to_csv(tmp_path / "mine.csv", index=False)
    quick = ["--epochs", "1", "--prototypes", "2", "--folds", "2", "--device", "cpu", "--quiet"]
    assert main(["cv", "--csv", str(tmp_path / "mine.csv"), *quick, "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "accuracy_mean" in out and "se_repeats" not in out and "NaN" not in out, out
    assert main(["cv", "--csv", str(tmp_path / "mine.csv"), *quick, "--repeats", "2"]) == 0
    assert "accuracy_se_repeats" in capsys.readouterr().out  # defined from two repeats on
