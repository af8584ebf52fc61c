"""Bags from disk: one file per bag (.npy, .pt, .h5) plus a labels CSV, equal to the same bags in memory."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from minitorch_proto.cli import main
from minitorch_proto.data.bag_files import BagFileError
from minitorch_proto.data.disk import DiskBagDataset, write_bag_folder
from minitorch_proto.estimator import PrototypeMILClassifier
from minitorch_proto.preprocessing import BagStandardizer

from .conftest import make_concept_bags

FORMATS = ["npy", "pt", "h5"]


def _float32(bags):
    # Files store float32, as slide-processing tools write; the in-memory twin holds the same values.
    return [np.asarray(b, dtype=np.float32).astype(np.float64) for b in bags]


@pytest.fixture
def problem():
    bags, y = make_concept_bags(n_bags=16, n_features=5, seed=3, min_size=1, max_size=9)
    return _float32(bags), y


@pytest.mark.parametrize("fmt", FORMATS)
def test_disk_dataset_reads_what_was_written(tmp_path, problem, fmt):
    bags, y = problem
    ids = [f"slide_{i:02d}" for i in range(len(bags))]
    labels = write_bag_folder(tmp_path, bags, y, ids, fmt=fmt)
    data = DiskBagDataset(tmp_path, labels)
    assert len(data) == len(bags) and data.n_features == 5
    np.testing.assert_array_equal(data.y, y)
    np.testing.assert_array_equal(data.bag_ids, ids)
    np.testing.assert_array_equal(data.sizes, [len(b) for b in bags])
    for i in (0, 7, len(bags) - 1):
        np.testing.assert_array_equal(np.asarray(data[i], dtype=np.float64), bags[i])
        np.testing.assert_array_equal(data.rows(i, 1, 3), bags[i][1:3].astype(np.float32))
    sub = data[[3, 1]]
    assert list(sub.bag_ids) == [ids[3], ids[1]] and list(sub.y) == [y[3], y[1]]
    np.testing.assert_array_equal(np.asarray(sub[0], dtype=np.float64), bags[3])


@pytest.mark.parametrize("fmt", FORMATS)
def test_estimator_on_disk_equals_in_memory(tmp_path, problem, fmt, one_torch_thread):
    bags, y = problem
    data = DiskBagDataset(tmp_path, write_bag_folder(tmp_path, bags, y, fmt=fmt))
    params = dict(n_prototypes=3, epochs=3, lr_prototypes=1e-2, lr_classifier=1e-2, device="cpu", random_state=4)
    on_disk = PrototypeMILClassifier(**params).fit(data, data.y)
    in_memory = PrototypeMILClassifier(**params).fit(bags, y)
    for name, value in in_memory.model_.state_dict().items():
        torch.testing.assert_close(on_disk.model_.state_dict()[name], value, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(on_disk.predict_proba(data), in_memory.predict_proba(bags), rtol=1e-6, atol=1e-9)


def test_streaming_standardiser_equals_the_concatenated_fit(problem):
    bags, _ = problem
    whole = BagStandardizer("feature").fit(bags)
    streamed = BagStandardizer("feature")
    for bag in bags:
        for start in range(0, len(bag), 2):  # pieces smaller than a bag, as chunked reads give
            streamed.partial_fit(bag[start : start + 2])
    np.testing.assert_allclose(streamed.mean_, whole.mean_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(streamed.scale_, whole.scale_, rtol=1e-12)
    halves = [BagStandardizer("feature"), BagStandardizer("feature")]
    for i, bag in enumerate(bags):
        halves[i % 2].partial_fit(bag)
    merged = BagStandardizer("feature").merge(halves[0]).merge(halves[1])
    np.testing.assert_allclose(merged.mean_, whole.mean_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(merged.scale_, whole.scale_, rtol=1e-12)


@pytest.mark.parametrize("fmt", ["npy", "pt", "h5"])
def test_a_file_changed_after_opening_is_an_error_not_another_shape(tmp_path, fmt):
    pytest.importorskip("h5py") if fmt == "h5" else None
    bags = [np.ones((3, 4), np.float32) * i for i in range(3)]
    data = DiskBagDataset(tmp_path, write_bag_folder(tmp_path, bags, [0, 1, 0], fmt=fmt))
    write_bag_folder(tmp_path / "new", [np.ones((2, 5), np.float32)] * 2, [0, 1], fmt=fmt)
    (tmp_path / "new" / f"1.{fmt}").replace(tmp_path / f"1.{fmt}")
    # It had come back 2 x 5 beside sizes[1] == 3 and n_features == 4, and chunks yielded an empty piece.
    with pytest.raises(BagFileError, match="changed since the folder was opened"):
        data[1]
    with pytest.raises(BagFileError, match="changed since the folder was opened"):
        list(data.chunks(1, 2))
    np.testing.assert_array_equal(data[0], bags[0])


def test_partial_fit_after_fit_goes_on_from_fits_instances():
    # fit had kept no running statistics: fit(A).partial_fit(C) gave C's mean alone (11, not 6).
    a, c = np.full((10, 1), 1.0), np.full((10, 1), 11.0)
    assert BagStandardizer("feature").fit([a]).partial_fit(c).mean_[0] == 6.0
    merged = BagStandardizer("feature").merge(BagStandardizer("feature").fit([a, c]))
    assert merged.mean_[0] == 6.0 and merged.scale_[0] == 5.0


def test_a_constant_feature_of_large_value_stays_constant():
    # Its computed spread is rounding (about 1e-11 at 12345.678): an absolute 1e-12 cut took it as the
    # scale, so a value 0.001 away standardised to 4e7 and outweighed every other distance.
    rng = np.random.default_rng(0)
    bags = [np.column_stack([rng.normal(size=n), np.full(n, 12345.678)]) for n in (30, 50, 70)]
    whole = BagStandardizer("feature").fit(bags)
    streamed = BagStandardizer("feature")
    for bag in bags:
        streamed.partial_fit(bag)
    for fitted in (whole, streamed):
        assert fitted.scale_[1] == 1.0
        assert abs(fitted.transform_instances(np.array([[0.0, 12345.679]]))[0, 1]) < 0.01
    row = BagStandardizer("instance").transform_instances(np.full((1, 4), 12345.678))
    assert np.abs(row).max() < 1e-6  # an instance of equal large features, likewise


def test_cross_validation_on_disk_equals_in_memory(tmp_path, problem, one_torch_thread):
    from minitorch_proto.estimator import PrototypeMILClassifier
    from minitorch_proto.evaluation.cv import cross_validate, stratified_folds

    bags, y = problem
    data = DiskBagDataset(tmp_path, write_bag_folder(tmp_path, bags, y, fmt="npy"))
    folds = stratified_folds(y, 1, 2, random_state=0)
    est = PrototypeMILClassifier(n_prototypes=3, epochs=2, device="cpu")
    a = cross_validate(est, data, data.y, folds)
    b = cross_validate(est, bags, y, folds)
    np.testing.assert_allclose(a.auc.to_numpy(), b.auc.to_numpy(), rtol=1e-6)
    np.testing.assert_allclose(a.accuracy.to_numpy(), b.accuracy.to_numpy())


def test_pt_dict_and_string_labels(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(4):
        torch.save({"features": torch.from_numpy(rng.normal(size=(3 + i, 4)).astype(np.float32)),
                    "coords": torch.zeros(3 + i, 2)}, tmp_path / f"s{i}.pt")
    pd.DataFrame({"bag": [f"s{i}" for i in range(4)], "label": ["tumour", "normal"] * 2}).to_csv(
        tmp_path / "labels.csv", index=False)
    data = DiskBagDataset(tmp_path, tmp_path / "labels.csv")
    assert data.sizes.tolist() == [3, 4, 5, 6] and list(data.y) == ["tumour", "normal"] * 2


def test_what_a_folder_is_asked_for_that_it_cannot_give_is_an_error(tmp_path, problem):
    bags, y = problem
    data = DiskBagDataset(tmp_path, write_bag_folder(tmp_path, bags, y, fmt="pt"))  # one tensor per file
    np.testing.assert_array_equal(data.instance_array(0, "features"), data[0])  # the features are that tensor
    # Another array of a single-tensor file had been the features again, silently.
    with pytest.raises(ValueError, match=r"holds one tensor \(the features\), no 'coords'"):
        data.instance_array(0, "coords")
    # numpy reads a short boolean mask's missing tail as False; a mask has one value per bag.
    with pytest.raises(IndexError, match=r"a boolean mask of shape \(3,\) for 16 bags"):
        data.subset(np.array([True, False, True]))
    assert len(data.subset(np.arange(16) % 2 == 0)) == 8
    empty = data.subset([]).summary()  # numpy's "zero-size array to reduction" before
    assert (empty["bags"], empty["instances"], empty["max_bag"], empty["features"]) == (0, 0, 0, 0)
    for bad in (["1"], [0.9], 1.0):  # the id "1" had given the bag at position 1, 0.9 position 0
        with pytest.raises(IndexError, match="bag positions must be integers"):
            data[bad] if not isinstance(bad, list) else data.subset(bad)
    for bad in (0, -1, 2.5):  # 0 had raised range()'s own error, -1 had yielded nothing
        with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
            list(data.chunks(0, bad))
    assert np.array_equal(np.concatenate([rows for _, rows in data.chunks(1, 2)]), data[1])
    every = data.subset([3, 0]).to_memory(np.float32)
    assert [b.dtype for b in every] == [np.float32] * 2
    np.testing.assert_array_equal(every[0], bags[3].astype(np.float32))
    np.testing.assert_array_equal(every[1], bags[0].astype(np.float32))


@pytest.mark.parametrize("value, dtype, message", [
    (np.inf, np.float32, "NaN or infinite"), (-np.inf, np.float64, "NaN or infinite"),
    (np.nan, np.float16, "NaN or infinite"), (1e39, np.float64, "beyond float32's range"),
    (-1e39, np.float64, "beyond float32's range"),
])
def test_every_bad_value_a_read_meets_is_named(tmp_path, value, dtype, message):
    # The check reads only the rows' smallest and largest values: one bad value anywhere, of
    # either sign, in any float width, must still be found and located.
    labels = write_bag_folder(tmp_path, [np.ones((2, 4)), np.ones((6, 4))], np.array([0, 1]), ["a", "b"], fmt="npy")
    X = np.ones((6, 4), dtype=dtype)
    X[4, 3] = value
    np.save(tmp_path / "b.npy", X)  # written behind the writer's back, as a stranger's folder may be
    data = DiskBagDataset(tmp_path, labels)
    assert data.rows(0, 0, 2).shape == (2, 4)
    np.testing.assert_array_equal(data.rows(1, 0, 4), X[:4])  # the bad row not among those read
    with pytest.raises(ValueError, match=rf"b\.npy .*{message}.*instance 4, feature 3"):
        data.rows(1, 2, 6)


def test_a_cut_npy_file_is_called_truncated(tmp_path):
    labels = write_bag_folder(tmp_path, [np.ones((3, 4)), np.ones((5, 4))], np.array([0, 1]), ["a", "b"], fmt="npy")
    path = tmp_path / "b.npy"
    path.write_bytes(path.read_bytes()[:-40])  # the header intact, the last values gone
    with pytest.raises(ValueError, match=r"b\.npy: truncated: its header describes more values than the file holds"):
        DiskBagDataset(tmp_path, labels)


def test_errors_name_the_file(tmp_path, problem):
    bags, y = problem
    labels = write_bag_folder(tmp_path, bags[:4], y[:4], ["a", "b", "c", "d"], fmt="npy")
    (tmp_path / "c.npy").unlink()
    with pytest.raises(FileNotFoundError, match="'c'.*looked for 'c.npy'"):
        DiskBagDataset(tmp_path, labels)
    np.save(tmp_path / "c.npy", np.ones((3, 7), dtype=np.float32))
    with pytest.raises(ValueError, match=r"c\.npy has 7 features"):
        DiskBagDataset(tmp_path, labels)
    bad = np.ones((3, 5), dtype=np.float32)
    bad[1, 2] = np.nan
    np.save(tmp_path / "c.npy", bad)
    data = DiskBagDataset(tmp_path, labels)
    with pytest.raises(ValueError, match=r"c\.npy contains NaN.*instance 1, feature 2"):
        data[2]
    np.save(tmp_path / "c.npy", np.ones((0, 5), dtype=np.float32))
    with pytest.raises(ValueError, match=r"c\.npy: the bag is empty"):
        DiskBagDataset(tmp_path, labels)
    np.save(tmp_path / "c.npy", np.ones((3, 5), dtype=np.float32))
    import h5py

    with h5py.File(tmp_path / "d.h5", "w") as fh:
        fh.create_dataset("feats", data=np.ones((2, 5)))
    with pytest.raises(ValueError, match="several feature files"):
        DiskBagDataset(tmp_path, labels)
    (tmp_path / "d.npy").unlink()
    with pytest.raises(ValueError, match=r"d\.h5: no 'features' dataset"):
        DiskBagDataset(tmp_path, labels)
    (tmp_path / "dup.csv").write_text("bag,label\na,0\na,1\n")
    with pytest.raises(ValueError, match="listed twice"):
        DiskBagDataset(tmp_path, tmp_path / "dup.csv")
    with pytest.raises(ValueError, match="no bag-id column 'slide'"):
        DiskBagDataset(tmp_path, labels, bag_col="slide")


def test_cli_train_and_predict_from_a_bag_folder(tmp_path, problem, capsys):
    bags, y = problem
    folder = tmp_path / "bags"
    labels = write_bag_folder(folder, bags, y, fmt="h5")
    model = tmp_path / "model.pt"
    code = main(["train", "--bags-dir", str(folder), "--labels", str(labels), "--epochs", "2", "--prototypes", "3",
                 "--device", "cpu", "--out", str(model)])
    assert code == 0 and model.exists()
    out = tmp_path / "pred.csv"
    assert main(["predict", "--model", str(model), "--bags-dir", str(folder), "--labels", str(labels),
                 "--out", str(out)]) == 0
    pred = pd.read_csv(out)
    assert len(pred) == len(bags) and set(pred.predicted) <= {0, 1}
    capsys.readouterr()
    assert main(["train", "--bags-dir", str(tmp_path / "nowhere"), "--labels", str(labels), "--out",
                 str(tmp_path / "x.pt")]) == 2
    assert "nowhere" in capsys.readouterr().err and not (tmp_path / "x.pt").exists()


def test_cross_validating_a_bag_folder_reads_each_bag_once_and_pools_it_once(tmp_path, monkeypatch):
    """Folds share bags: a folder's bag is read once, and its float32 values are converted into one copy."""
    import minitorch_proto.estimator_training as estimator_module
    from minitorch_proto import PrototypeMILClassifier
    from minitorch_proto.evaluation import cross_validate, stratified_folds

    from .conftest import make_concept_bags

    bags, y = make_concept_bags(n_bags=24, seed=9)
    data = DiskBagDataset(tmp_path, write_bag_folder(tmp_path, bags, y, fmt="npy"))  # float32 files
    reads, pooled = [], []
    shipped_rows, shipped_pool = DiskBagDataset.rows, estimator_module.shared_pool
    monkeypatch.setattr(DiskBagDataset, "rows", lambda self, *a: reads.append(a[0]) or shipped_rows(self, *a))
    monkeypatch.setattr(estimator_module, "shared_pool", lambda sets: pooled.append(shipped_pool(sets)) or pooled[-1])
    folds = stratified_folds(data.y, n_repeats=2, n_folds=3)
    res = cross_validate(PrototypeMILClassifier(n_prototypes=3, epochs=2, device="cpu"), data, data.y, folds)
    assert sorted(reads) == list(range(24))  # each bag once, test folds included (not 2 x 24 + 2 x 24 x 2/3)
    assert len(pooled[0][0]) == 24
    in_memory = cross_validate(PrototypeMILClassifier(n_prototypes=3, epochs=2, device="cpu"),
                               [b.astype(np.float32) for b in bags], y, folds)
    assert np.array_equal(res["auc"].to_numpy(), in_memory["auc"].to_numpy())


@pytest.mark.parametrize("fmt", ["npy", "pt"])
def test_bags_read_from_a_folder_do_not_hold_their_files_open(tmp_path, fmt):
    # A fit holds every bag; were they views of memory-mapped files, a folder of more bags than
    # ``ulimit -n`` (often 1,024) would fail with "Too many open files".
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("needs /proc to count open files")
    rng = np.random.default_rng(0)
    bags = [rng.normal(size=(3, 4)).astype(np.float32) for _ in range(50)]
    data = DiskBagDataset(tmp_path, write_bag_folder(tmp_path, bags, np.arange(50) % 2, fmt=fmt))
    before = len(list(fds.iterdir()))
    held = [data[i] for i in range(len(data))] + [data.rows(i, 1, 3) for i in range(len(data))]
    assert len(list(fds.iterdir())) - before < 5
    assert all(np.array_equal(a, b) for a, b in zip(held, bags)) and held[0].flags.writeable


def test_an_error_in_a_later_group_of_a_folder_names_its_own_bag(tmp_path, capsys):
    # A folder is predicted a group of bags at a time; an error must name the bag's place in the
    # folder, not in its group (it named bags[0] for bag 7).
    bags, y = make_concept_bags(n_bags=12, seed=1)
    clf = PrototypeMILClassifier(n_prototypes=2, epochs=1, chunk_size=4).fit(bags, y)
    bad = [b.copy() for b in bags]
    bad[7][:] = 1e30  # finite and within float32, but its distances would overflow
    labels = write_bag_folder(tmp_path / "bags", bad, y, fmt="npy")
    data = DiskBagDataset(tmp_path / "bags", labels)
    with pytest.raises(ValueError, match=r"bags\[7\] has values too large"):
        clf.predict_proba(data)
    model = clf.save(tmp_path / "m.safetensors")
    assert main(["predict", "--model", str(model), "--bags-dir", str(tmp_path / "bags")]) == 2
    assert "bag '7' has values too large" in capsys.readouterr().err


def test_a_bag_id_too_long_for_a_file_name_is_named(tmp_path):
    from minitorch_proto.data.bag_files import BagFileError

    bags, y = make_concept_bags(n_bags=4, n_features=3)
    ids = ["a", "b", "c", "x" * 260]
    with pytest.raises(BagFileError, match="bag_ids: bag id 'xxxx.*is 260 bytes long"):
        write_bag_folder(tmp_path / "w", bags, y, ids)
    folder = tmp_path / "r"
    folder.mkdir()
    pd.DataFrame({"bag": ids, "label": y}).to_csv(folder / "labels.csv", index=False)
    with pytest.raises(BagFileError, match="labels.csv: bag id 'xxxx.*file names stop at 255 bytes"):
        DiskBagDataset(folder, folder / "labels.csv")  # a bare "File name too long" OSError, exit 1, before


def test_a_legacy_format_pt_bag_is_read_once_for_all_its_chunks(tmp_path, monkeypatch):
    bags, y = make_concept_bags(n_bags=4, n_features=3, min_size=9, max_size=9)
    folder = tmp_path / "bags"
    folder.mkdir()
    for i, b in enumerate(bags):  # torch's pre-1.6 format, which cannot be memory-mapped
        torch.save(torch.as_tensor(b), folder / f"{i}.pt", _use_new_zipfile_serialization=False)
    pd.DataFrame({"bag": range(4), "label": y}).to_csv(folder / "labels.csv", index=False)
    data = DiskBagDataset(folder, folder / "labels.csv")
    loads = []
    real = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(k.get("mmap", False)) or real(*a, **k))
    chunks = [data.rows(2, s, s + 2) for s in range(0, 9, 2)]
    np.testing.assert_allclose(np.concatenate(chunks), bags[2])
    assert loads.count(False) == 1  # five whole reads of the file before, one per chunk


def test_a_folder_without_a_labels_file_reads_every_feature_file_sorted_and_unlabelled(tmp_path):
    bags, y = make_concept_bags(n_bags=3, n_features=2)
    write_bag_folder(tmp_path / "f", bags, y, ["b", "a10", "a9"], fmt="npy")
    ds = DiskBagDataset(tmp_path / "f", None)
    assert list(ds.bag_ids) == ["a10", "a9", "b"] and ds.y is None and ds.unlisted == []
    np.testing.assert_allclose(ds[2], bags[0], rtol=1e-6)  # "b", written first (as float32)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "labels.csv").write_text("bag\n")
    with pytest.raises(BagFileError, match="holds no feature files"):
        DiskBagDataset(tmp_path / "empty", None)
    (tmp_path / "f" / "._b.npy").write_bytes(b"\x00\x05\x16\x07")  # macOS's AppleDouble twin: no bag
    assert list(DiskBagDataset(tmp_path / "f", None).bag_ids) == ["a10", "a9", "b"]


def test_a_labels_path_meant_inside_the_folder_is_pointed_at(tmp_path, monkeypatch):
    bags, y = make_concept_bags(n_bags=2, n_features=2)
    write_bag_folder(tmp_path / "features", bags, y, ["a", "b"])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"labels.csv does not exist; features/labels.csv does: pass that path"):
        DiskBagDataset("features/", "labels.csv")
    assert len(DiskBagDataset("features/", "features/labels.csv")) == 2


def test_features_key_reads_h5_bags_stored_under_another_name(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    bags, y = make_concept_bags(n_bags=8, n_features=3)
    folder = tmp_path / "slides"
    folder.mkdir()
    for i, bag in enumerate(bags):
        with h5py.File(folder / f"s{i}.h5", "w") as f:
            f.create_dataset("feats", data=bag)
    pd.DataFrame({"bag": [f"s{i}" for i in range(8)], "label": y}).to_csv(folder / "labels.csv", index=False)
    model = tmp_path / "m.safetensors"
    train = ["train", "--bags-dir", str(folder), "--epochs", "1", "--prototypes", "2", "--out", str(model), "--quiet"]
    assert main(train) == 2 and "features" in capsys.readouterr().err  # the default key is not there
    assert main([*train, "--features-key", "feats"]) == 0 and "trained on 8 bags" in capsys.readouterr().out
    assert main(["predict", "--model", str(model), "--bags-dir", str(folder), "--features-key", "feats"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 9
    assert main(["train", "--csv", str(folder / "labels.csv"), "--features-key", "feats", "--out", str(model)]) == 2
    assert "--features-key describes a --bags-dir folder" in capsys.readouterr().err


def test_a_wrong_features_key_names_the_flag(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    folder = tmp_path / "slides"
    folder.mkdir()
    with h5py.File(folder / "s0.h5", "w") as f:
        f.create_dataset("feats", data=np.ones((2, 3)))
    torch.save({"feats": torch.ones(2, 3)}, folder / "s1.pt")
    for bag in ("s0", "s1"):
        with pytest.raises(BagFileError, match="--features-key for the features"):
            DiskBagDataset(folder, None, key="wrong")[["s0", "s1"].index(bag)]
