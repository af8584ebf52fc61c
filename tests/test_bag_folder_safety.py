"""Bag folders from strangers: ids are names, links stay inside, every unreadable file is one line (issue 29)."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch

from minitorch_proto import cli
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
    assert pickle  # the module is used by the Evil fixture above


def test_labels_without_the_label_column_name_the_column(folder, capsys):
    root, _ = folder
    (root / "labels.csv").write_text("bag,target\n" + "".join(f"b{i},{i % 2}\n" for i in range(6)))
    code, err = _train(root, capsys)
    assert code == 2 and "no label column 'label'" in err and "target" in err
