"""Bag folders from strangers: ids are names, links stay inside, every unreadable file is one line (issue 29)."""
from __future__ import annotations

import os

import h5py
import numpy as np
import pytest
import torch

from minitorch_proto import cli
from minitorch_proto.data import bag_files
from minitorch_proto.data.disk import BagFileError, DiskBagDataset, write_bag_folder

from .conftest import make_concept_bags


@pytest.fixture
def folder(tmp_path):
    bags, y = make_concept_bags(n_bags=6, n_features=3, seed=2)
    root = tmp_path / "bags"
    write_bag_folder(root, bags, y, [f"b{i}" for i in range(6)])
    secret = tmp_path / "secret.npy"
    np.save(secret, np.full((4, 3), 1e3))
    return root, secret


def _labels(root, ids, labels=None):
    labels = labels if labels is not None else [i % 2 for i in range(len(ids))]
    (root / "labels.csv").write_text("bag,label\n" + "".join(f"{b},{lab}\n" for b, lab in zip(ids, labels)))


def _train(root, capsys, *extra):
    code = cli.main(["train", "--bags-dir", str(root), "--epochs", "1", "--out", str(root.parent / "m.safetensors"),
                     *extra])
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize("bad_id", ["../secret", "SECRET_ABS", "sub/b1", "..", "", "a\\b"])
def test_a_labels_file_cannot_reach_outside_its_folder(folder, capsys, bad_id):
    root, secret = folder
    bad = str(secret.with_suffix("")) if bad_id == "SECRET_ABS" else bad_id
    ids = [f"b{i}" for i in range(5)] + [bad]
    _labels(root, ids)
    if bad == "":
        # an empty id is a missing id for the CSV reader: still refused, still one line
        with pytest.raises(ValueError):
            DiskBagDataset(root, root / "labels.csv")
    else:
        with pytest.raises(BagFileError, match="bag ids are file names, not paths"):
            DiskBagDataset(root, root / "labels.csv")
    code, err = _train(root, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and not (root.parent / "m.safetensors").exists()


def test_links_out_of_the_folder_need_an_explicit_flag(folder, capsys):
    root, secret = folder
    os.symlink(secret, root / "evil.npy")
    os.symlink(root / "b0.npy", root / "inside.npy")  # a link that stays inside is fine
    _labels(root, [f"b{i}" for i in range(1, 6)] + ["evil", "inside"], [0, 1, 0, 1, 0, 1, 0])
    with pytest.raises(BagFileError, match="leads outside"):
        DiskBagDataset(root, root / "labels.csv")
    code, err = _train(root, capsys)
    assert code == 2 and "--follow-links" in err and len(err.splitlines()) == 1
    ds = DiskBagDataset(root, root / "labels.csv", follow_links=True)
    assert ds.sizes[-2] == 4
    assert _train(root, capsys, "--follow-links")[0] == 0


def test_a_symlink_loop_says_so(folder):
    root, _ = folder
    os.symlink(root / "loop.npy", root / "loop.npy")
    _labels(root, ["b0", "b1", "loop"])
    with pytest.raises(BagFileError, match="symbolic link loop"):
        DiskBagDataset(root, root / "labels.csv")


class Evil:
    def __reduce__(self):
        return (print, ("this would run",))


@pytest.mark.parametrize("content,message", [
    ("pickle", "refused: loading it would run code"),
    ("text", "not a readable PyTorch tensor file"),
    ("empty", "not a readable PyTorch tensor file"),
    ("list", "expected a tensor"),
])
def test_unsafe_or_unreadable_pt_files_are_one_line_errors(folder, capsys, content, message):
    root, _ = folder
    (root / "b5.npy").unlink()
    path = root / "b5.pt"
    if content == "pickle":
        torch.save({"features": torch.zeros(2, 3), "extra": Evil()}, path)
    elif content == "text":
        path.write_text("these are not tensors\n")
    elif content == "empty":
        path.write_bytes(b"")
    else:
        torch.save([1, 2, 3], path)
    _labels(root, [f"b{i}" for i in range(6)])
    with pytest.raises(BagFileError, match=message) as exc:
        DiskBagDataset(root, root / "labels.csv")
    assert "weights_only=False" not in str(exc.value) and "\n" not in str(exc.value)
    code, err = _train(root, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "weights_only" not in err


def test_npy_that_is_text_or_objects_is_named_for_what_it_is(folder):
    root, _ = folder
    (root / "b5.npy").write_text("1,2,3\n")
    _labels(root, [f"b{i}" for i in range(6)])
    with pytest.raises(BagFileError, match="not a NumPy .npy file"):
        DiskBagDataset(root, root / "labels.csv")
    with open(root / "b5.npy", "wb") as fh:
        np.save(fh, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(BagFileError, match="Python objects"):
        DiskBagDataset(root, root / "labels.csv")


def test_labels_without_the_label_column_name_the_column(folder, capsys):
    root, _ = folder
    (root / "labels.csv").write_text("bag,target\n" + "".join(f"b{i},{i % 2}\n" for i in range(6)))
    code, err = _train(root, capsys)
    assert code == 2 and "no label column 'label'" in err and "target" in err


def _h5_reaching_out(path, how, outside):
    with h5py.File(path, "w") as fh:
        if how == "external link":
            fh["features"] = h5py.ExternalLink(str(outside), "features")
        elif how == "soft link to an external link":
            fh["elsewhere"] = h5py.ExternalLink(str(outside), "features")
            fh["features"] = h5py.SoftLink("/elsewhere")
        elif how == "external raw storage":
            fh.create_dataset("features", shape=(4, 3), dtype="<f8",
                              external=[(str(outside.with_suffix(".raw")), 0, 96)])
        else:
            layout = h5py.VirtualLayout(shape=(4, 3), dtype="f8")
            layout[:] = h5py.VirtualSource(str(outside), "features", shape=(4, 3))
            fh.create_virtual_dataset("features", layout)


@pytest.mark.parametrize("how", ["external link", "soft link to an external link", "external raw storage",
                                 "virtual dataset"])
def test_an_h5_file_cannot_read_other_files(folder, capsys, how):
    root, _ = folder
    outside = root.parent / "secret.h5"
    with h5py.File(outside, "w") as fh:
        fh["features"] = np.full((4, 3), 1e3)
    outside.with_suffix(".raw").write_bytes(np.full(12, 1e3, dtype="<f8").tobytes())
    (root / "b5.npy").unlink()
    _h5_reaching_out(root / "b5.h5", how, outside)
    _labels(root, [f"b{i}" for i in range(6)])
    with pytest.raises(BagFileError, match="'features' is .*(another file|reads other files).*--follow-links"):
        DiskBagDataset(root, root / "labels.csv")
    code, err = _train(root, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "b5.h5" in err
    # The opt-in reads it: the refusal above was about the link, not a damaged file.
    ds = DiskBagDataset(root, root / "labels.csv", follow_links=True)
    np.testing.assert_array_equal(ds[5], np.full((4, 3), 1e3))


def test_soft_links_inside_an_h5_file_are_fine(folder):
    root, _ = folder
    (root / "b5.npy").unlink()
    with h5py.File(root / "b5.h5", "w") as fh:
        fh["group/real"] = np.arange(6.0).reshape(2, 3)
        fh["features"] = h5py.SoftLink("group/real")
        fh["loop"] = h5py.SoftLink("/loop")
    _labels(root, [f"b{i}" for i in range(6)])
    np.testing.assert_array_equal(DiskBagDataset(root, root / "labels.csv")[5], np.arange(6.0).reshape(2, 3))
    with pytest.raises(BagFileError, match="loop of HDF5 soft links"):
        DiskBagDataset(root, root / "labels.csv", key="loop")


def test_the_folders_own_labels_file_may_not_link_outside(folder, capsys):
    root, _ = folder
    elsewhere = root.parent / "labels_elsewhere.csv"
    elsewhere.write_text("bag,label\n" + "".join(f"b{i},{i % 2}\n" for i in range(6)))
    (root / "labels.csv").unlink()
    os.symlink(elsewhere, root / "labels.csv")
    with pytest.raises(BagFileError, match="labels.csv leads outside"):
        DiskBagDataset(root, root / "labels.csv")
    code, err = _train(root, capsys)
    assert code == 2 and "--follow-links" in err and len(err.splitlines()) == 1
    assert len(DiskBagDataset(root, root / "labels.csv", follow_links=True)) == 6
    # A labels file the user names outside the folder is theirs, not the folder's.
    assert len(DiskBagDataset(root, elsewhere)) == 6


def test_a_folder_or_fifo_under_a_feature_files_name_says_what_it_is(folder):
    root, _ = folder
    _labels(root, [f"b{i}" for i in range(6)])
    (root / "b5.npy").unlink()
    (root / "b5.npy").mkdir()
    with pytest.raises(BagFileError, match=r"b5\.npy: a folder, not a feature file"):
        DiskBagDataset(root, root / "labels.csv")
    (root / "b5.npy").rmdir()
    os.mkfifo(root / "b5.npy")
    # Hold both ends open with bytes waiting, so a reader that wrongly opened the FIFO fails instead of hanging.
    r = os.open(root / "b5.npy", os.O_RDONLY | os.O_NONBLOCK)
    w = os.open(root / "b5.npy", os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(w, b"x" * 256)
        with pytest.raises(BagFileError, match=r"b5\.npy: a special file"):
            DiskBagDataset(root, root / "labels.csv")
    finally:
        os.close(w)
        os.close(r)


def test_permission_denied_is_one_line(folder, monkeypatch):
    root, _ = folder
    _labels(root, [f"b{i}" for i in range(6)])
    if os.geteuid() != 0:
        os.chmod(root / "b5.npy", 0)
    else:  # root reads any file: make the reader's open fail as it would for another user
        real_open = open

        def denied(path, *args, **kwargs):
            if str(path).endswith("b5.npy"):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(bag_files, "open", denied, raising=False)  # where feature files are opened
    with pytest.raises(BagFileError, match=r"b5\.npy: could not be read \(.*Permission denied") as exc:
        DiskBagDataset(root, root / "labels.csv")
    assert "\n" not in str(exc.value)


def test_line_breaks_in_a_bag_id_keep_every_error_one_line(folder, capsys):
    # Found by the fuzz test: a quoted id holding a line break, with no file of that name.
    root, _ = folder
    (root / "labels.csv").write_text('bag,label\n"b0",0\n"x\n..",1\nb2,1\nb3,0\n')
    with pytest.raises(FileNotFoundError) as exc:
        DiskBagDataset(root, root / "labels.csv")
    assert "\n" not in str(exc.value) and "x\\n.." in str(exc.value)
    code, err = _train(root, capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert "\n" not in str(BagFileError("a\nb\rc"))
