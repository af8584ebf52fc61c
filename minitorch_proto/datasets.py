"""Multiple-instance data sets: the classic benchmarks and the user's own bags.

A *bag* is a 2-D array (instances x features) with one label for the whole bag.
:class:`BagDataset` holds a list of bags, their labels and their original ids.

Classic benchmarks (Musk1, Musk2, Fox, Tiger, Elephant) are loaded with
:func:`load_benchmark`. Their licences are unclear or require attribution, so
the package does not ship them: it reads them from a folder the user names, or
downloads them on demand into a per-user cache and checks them against a known
sha256. Two on-disk formats are understood:

* the CSV layout of the multipleinstancelearning.com collection (no header;
  ``bag_label, bag_id, feature_1 .. feature_L``; one row per instance), read by
  :func:`read_mil_csv`;
* the PRTools ``.mat`` files of miproblems.org (struct ``x`` with fields
  ``data``, ``nlab``, ``lablist`` and ``ident.milbag``), read by
  :func:`read_mil_mat`.

The user's own data, one row per instance with a bag column and a label column,
come in through :func:`from_dataframe` or :func:`load_bags_csv`.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from .validation import check_bags, check_labels

__all__ = [
    "BENCHMARKS",
    "DATA_ENV_VAR",
    "CACHE_ENV_VAR",
    "BagDataset",
    "BenchmarkInfo",
    "ChecksumError",
    "DownloadError",
    "default_cache_dir",
    "download_file",
    "from_dataframe",
    "load_bags_csv",
    "load_benchmark",
    "read_mil_csv",
    "read_mil_mat",
    "read_split_files",
    "sha256_of",
]

DATA_ENV_VAR = "MINITORCH_PROTO_DATA"
CACHE_ENV_VAR = "MINITORCH_PROTO_CACHE"

_CHUNK = 1 << 20


class ChecksumError(ValueError):
    """A file's sha256 differs from the expected one."""


class DownloadError(RuntimeError):
    """Every URL given to :func:`download_file` failed."""


# --------------------------------------------------------------------------- #
# The data container
# --------------------------------------------------------------------------- #
# eq=False: the fields hold arrays, for which the generated ``==`` would be ambiguous.
@dataclass(eq=False)
class BagDataset:
    """Bags of instances with one label per bag.

    Parameters
    ----------
    name : str
        Short name, e.g. ``"musk1"``.
    bags : list of ndarray
        One float64 array of shape (n_instances_i, n_features) per bag.
    y : ndarray of int64, shape (n_bags,)
        Bag labels (0/1 for the binary benchmarks).
    bag_ids : ndarray, shape (n_bags,)
        The bag ids as found in the source (integers for the benchmarks,
        whatever the bag column held for the user's data).
    source : str
        File path or URL the data were read from ("" when built in memory).

    Notes
    -----
    The constructor validates its inputs with
    :func:`minitorch_proto.validation.check_bags`, so every bag is a finite,
    2-D, C-contiguous float64 array and all bags share the number of features.
    """

    name: str
    bags: list[np.ndarray]
    y: np.ndarray
    bag_ids: np.ndarray
    source: str = ""

    def __post_init__(self) -> None:
        self.bags = check_bags(self.bags, name=f"{self.name} bags")
        n = len(self.bags)
        y = np.asarray(self.y)
        # check_labels rejects 2-D, NaN and non-integer labels; its encoding is not used
        # because it would renumber a single-class subset such as "only positives" to 0.
        check_labels(y, n_bags=n, min_classes=1)
        if y.dtype.kind not in "biuf":
            raise ValueError(
                f"{self.name}: bag labels must be integers, got dtype {y.dtype}."
            )
        self.y = y.reshape(-1).astype(np.int64)
        self.bag_ids = np.asarray(self.bag_ids).reshape(-1)
        if len(self.bag_ids) != n:
            raise ValueError(
                f"{self.name}: {n} bags but {len(self.bag_ids)} bag ids: they must match."
            )

    @property
    def n_bags(self) -> int:
        """Number of bags."""
        return len(self.bags)

    @property
    def n_instances(self) -> int:
        """Total number of instances over all bags."""
        return int(sum(b.shape[0] for b in self.bags))

    @property
    def n_features(self) -> int:
        """Number of features per instance."""
        return int(self.bags[0].shape[1])

    @property
    def bag_sizes(self) -> np.ndarray:
        """Number of instances in each bag, as an int64 array."""
        return np.array([b.shape[0] for b in self.bags], dtype=np.int64)

    def __len__(self) -> int:
        return self.n_bags

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"BagDataset(name={self.name!r}, bags={s['bags']} "
            f"({s['positive']} positive, {s['negative']} negative), "
            f"instances={s['instances']}, features={s['features']})"
        )

    def summary(self) -> dict:
        """Counts describing the data set.

        Returns
        -------
        dict
            Keys ``name``, ``bags``, ``positive`` (bags with label 1),
            ``negative`` (bags with label 0), ``instances``, ``features``,
            ``min_bag_size`` and ``max_bag_size``; values are plain Python
            ``str``/``int``.
        """
        sizes = self.bag_sizes
        return {
            "name": self.name,
            "bags": self.n_bags,
            "positive": int(np.sum(self.y == 1)),
            "negative": int(np.sum(self.y == 0)),
            "instances": int(sizes.sum()),
            "features": self.n_features,
            "min_bag_size": int(sizes.min()),
            "max_bag_size": int(sizes.max()),
        }

    def subset(self, indices) -> "BagDataset":
        """Return the bags at ``indices`` as a new :class:`BagDataset`.

        Parameters
        ----------
        indices : array-like of int, boolean mask of length ``n_bags``, or slice
            Positions of the bags to keep (positions, not bag ids; use
            ``np.searchsorted(ds.bag_ids, ids)`` to turn sorted ids into positions).

        Returns
        -------
        BagDataset
            Same name and source; the bag arrays are shared, not copied.

        Raises
        ------
        IndexError
            If an index is out of range or a mask has the wrong length.
        ValueError
            If the selection is empty.
        """
        positions = np.arange(self.n_bags)[indices]
        positions = np.atleast_1d(positions)
        return BagDataset(
            name=self.name,
            bags=[self.bags[i] for i in positions],
            y=self.y[positions],
            bag_ids=self.bag_ids[positions],
            source=self.source,
        )


# --------------------------------------------------------------------------- #
# The benchmark table
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class BenchmarkInfo:
    """What is known about one benchmark file.

    Attributes
    ----------
    name : str
        Key in :data:`BENCHMARKS` (lower case).
    file_name : str
        CSV file name, e.g. ``"Musk1.csv"``.
    sha256 : str
        sha256 of the CSV file.
    n_bags, n_positive, n_negative, n_instances, n_features : int
        Expected counts; a file that disagrees is rejected.
    min_bag_size, max_bag_size : int
        Expected smallest and largest bag.
    urls : tuple of str
        Download locations of the CSV, tried in order.
    mat_file : str
        File name of the miproblems.org PRTools copy, looked for in a
        ``miproblems`` sub-folder.
    mat_sha256 : str
        sha256 of that ``.mat`` file.
    citation : str
        What to cite when using the data.
    licence : str
        What is known about the licence.
    """

    name: str
    file_name: str
    sha256: str
    n_bags: int
    n_positive: int
    n_negative: int
    n_instances: int
    n_features: int
    min_bag_size: int
    max_bag_size: int
    urls: tuple[str, ...]
    mat_file: str
    mat_sha256: str
    citation: str
    licence: str


_CSV_COLLECTION = "multipleinstancelearning.com/datasets"
_CSV_CITATION = "CSV collection: Kucukasci & Baydogan (2018)."
_MUSK_CITATION = (
    "Dietterich, Lathrop & Lozano-Perez (1997), Solving the multiple instance problem "
    "with axis-parallel rectangles, Artificial Intelligence 89. UCI Musk data sets, "
    "DOIs 10.24432/C5ZK5B and 10.24432/C51608. " + _CSV_CITATION
)
_MUSK_LICENCE = "CC BY 4.0 (UCI Machine Learning Repository)."
_COREL_CITATION = (
    "Andrews, Tsochantaridis & Hofmann (2002), Support vector machines for "
    "multiple-instance learning, NIPS 15. " + _CSV_CITATION
)
_COREL_LICENCE = (
    "No licence stated; features derive from Corel images and redistribution is "
    "unclear, so the file is downloaded on demand and never bundled."
)

# Sources other than the CSV collection, named in error messages so that a user
# without a working download knows where else to look.
_OTHER_SOURCES = (
    "Other sources: http://www.miproblems.org/datasets/musk/ and "
    "http://www.miproblems.org/datasets/foxtigerelephant/ (PRTools .mat files, which "
    "load_benchmark also reads from a 'miproblems' sub-folder)."
)


def _urls(file_name: str) -> tuple[str, ...]:
    # The authors' collection is plain http; the https form of the same address is
    # tried second in case the host goes TLS-only. The sha256 guards both.
    return (
        f"http://www.{_CSV_COLLECTION}/{file_name}",
        f"https://www.{_CSV_COLLECTION}/{file_name}",
    )


def _info(name, file_name, sha, counts, sizes, mat_sha, citation, licence) -> BenchmarkInfo:
    bags, pos, neg, inst, feat = counts
    return BenchmarkInfo(
        name=name,
        file_name=file_name,
        sha256=sha,
        n_bags=bags,
        n_positive=pos,
        n_negative=neg,
        n_instances=inst,
        n_features=feat,
        min_bag_size=sizes[0],
        max_bag_size=sizes[1],
        urls=_urls(file_name),
        mat_file=f"{name}.mat",
        mat_sha256=mat_sha,
        citation=citation,
        licence=licence,
    )


BENCHMARKS: dict[str, BenchmarkInfo] = {
    "musk1": _info(
        "musk1", "Musk1.csv",
        "6eb13180b63f7cfabd1c759c510a036ecb561069aa8e86700c76a2fe139d297a",
        (92, 47, 45, 476, 166), (2, 40),
        "70df92db207795ce7d3a8212d8f945a6b4b2d29eff2a5be1cfa11e8e36d02e9e",
        _MUSK_CITATION, _MUSK_LICENCE,
    ),
    "musk2": _info(
        "musk2", "Musk2.csv",
        "14040c8891369392f87f4ce8969a20657e615e40e042f02d1a2fe2cabab01717",
        (102, 39, 63, 6598, 166), (1, 1044),
        "ae8c0a8e2b08a2e22d1ac422bf708bba4d19d83757a42aefb273f2de533febfe",
        _MUSK_CITATION, _MUSK_LICENCE,
    ),
    "fox": _info(
        "fox", "Fox.csv",
        "6bd4cc0b2c3952103e295930c84a70932835483998d5d8f7658d97af19bfbf96",
        (200, 100, 100, 1320, 230), (2, 13),
        "39ee635d3b9614d9483048acd13aee69175a03a884193e9e0a5ad5ead9af0a8b",
        _COREL_CITATION, _COREL_LICENCE,
    ),
    "tiger": _info(
        "tiger", "Tiger.csv",
        "81afcfa1a33d7db9cdb1709ef2298b927d2e9523fa3561561ffb114f1c6d5da4",
        (200, 100, 100, 1220, 230), (1, 13),
        "0c1c118f12010e81181cff8d101eba7225d93335b6012412fba4d354431b8513",
        _COREL_CITATION, _COREL_LICENCE,
    ),
    "elephant": _info(
        "elephant", "Elephant.csv",
        "ffe36a08fb0b8175ff8a4e7eeac6ccfd3300f84dbc047a6fb3ff7ca1a1caf6c9",
        (200, 100, 100, 1391, 230), (2, 13),
        "0104e50255d1719842612c882d5c5fcc820eb9ee2a64f05bac98b7379eb10de0",
        _COREL_CITATION, _COREL_LICENCE,
    ),
}


# --------------------------------------------------------------------------- #
# Files, checksums, downloads
# --------------------------------------------------------------------------- #
def default_cache_dir() -> Path:
    """Per-user folder where downloaded benchmark files are kept.

    Returns
    -------
    Path
        ``$MINITORCH_PROTO_CACHE`` if set, else ``$XDG_CACHE_HOME/minitorch_proto``
        if ``XDG_CACHE_HOME`` is set, else ``~/.cache/minitorch_proto``. The
        folder is not created here.
    """
    override = os.environ.get(CACHE_ENV_VAR)
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec says relative values are invalid and must be ignored.
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "minitorch_proto"
    return Path.home() / ".cache" / "minitorch_proto"


def sha256_of(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in chunks so large files need little memory.

    Parameters
    ----------
    path : str or PathLike

    Returns
    -------
    str
        64 lower-case hex digits.
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _progress_bar(total: int | None, desc: str, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the progress bar is a nicety, not a requirement
        return None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, leave=False)


def _fetch_one(url: str, dest: Path, sha256: str | None, timeout: float, progress: bool) -> None:
    """Download ``url`` to ``dest`` atomically; on failure leave nothing behind."""
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        n_read = 0
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            bar = _progress_bar(total, dest.name, progress)
            try:
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(chunk)
                    h.update(chunk)
                    n_read += len(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
            finally:
                if bar is not None:
                    bar.close()
        if n_read == 0:
            raise OSError("the server sent an empty file")
        if total is not None and n_read != total:
            raise OSError(f"the transfer stopped after {n_read} of {total} bytes")
        got = h.hexdigest()
        if sha256 is not None and got != sha256.lower():
            raise ChecksumError(f"sha256 mismatch: expected {sha256.lower()}, got {got}")
        os.replace(tmp, dest)
    finally:
        # After a successful os.replace the temporary name no longer exists.
        tmp.unlink(missing_ok=True)


def download_file(
    urls: Sequence[str] | str,
    dest: str | os.PathLike,
    sha256: str | None,
    *,
    timeout: float = 30,
    progress: bool = True,
) -> Path:
    """Download a file, trying several URLs, and check its sha256.

    The data are streamed into a temporary ``.part`` file beside ``dest`` and
    moved into place with :func:`os.replace` only after the checksum matched, so
    an interrupted or corrupt download never leaves a file that looks complete.

    Parameters
    ----------
    urls : sequence of str, or str
        Addresses tried in order until one succeeds (``http``, ``https``,
        ``ftp`` and ``file`` URLs, whatever :mod:`urllib.request` opens).
    dest : str or PathLike
        Final path of the file; missing parent folders are created.
    sha256 : str or None
        Expected hex sha256; ``None`` skips the check.
    timeout : float
        Socket timeout in seconds for each URL.
    progress : bool
        Show a tqdm progress bar (when tqdm is installed).

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    DownloadError
        (a ``RuntimeError``) if every URL failed. The message lists each URL
        with its error and says where to put the file by hand.
    """
    if isinstance(urls, (str, bytes, os.PathLike)):
        urls = [os.fsdecode(urls)]
    urls = list(urls)
    if not urls:
        raise ValueError("download_file needs at least one URL.")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    for url in urls:
        try:
            _fetch_one(url, dest, sha256, timeout, progress)
            return dest
        # Any failure of one mirror (URLError, HTTPError, timeout, unknown scheme,
        # IncompleteRead, ChecksumError) is recorded and the next one is tried.
        except Exception as exc:
            errors.append(f"  {url}\n      -> {type(exc).__name__}: {exc}")
    raise DownloadError(
        f"Could not download {dest.name}; tried:\n"
        + "\n".join(errors)
        + f"\nTo install it by hand, download {dest.name} yourself and save it as\n"
        f"  {dest}\n"
        f"or put it in any folder and set the environment variable {DATA_ENV_VAR} "
        f"to that folder (or pass data_dir=...)."
    )


# --------------------------------------------------------------------------- #
# Parsing helpers
# --------------------------------------------------------------------------- #
def _group_rows(
    X: np.ndarray,
    labels: np.ndarray,
    keys: np.ndarray,
    *,
    sort_ids: bool,
    where: str,
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Split instance rows into bags.

    ``labels`` is numeric and NaN-free. Bags come in ascending key order when
    ``sort_ids``, else in order of first appearance; rows keep their file order
    inside a bag. Returns (bags, raw bag labels, bag ids).
    """
    if sort_ids:
        ids, codes = np.unique(keys, return_inverse=True)
    else:
        codes, ids = pd.factorize(keys, sort=False)
        ids = np.asarray(ids)
    codes = np.asarray(codes).reshape(-1)
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=len(ids))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    lab = labels[order]
    lo = np.minimum.reduceat(lab, starts)
    hi = np.maximum.reduceat(lab, starts)
    mixed = np.flatnonzero(lo != hi)
    if mixed.size:
        b = mixed[0]
        found = [_plain(v) for v in np.unique(lab[starts[b]: starts[b] + counts[b]])]
        found = [int(v) if float(v).is_integer() else v for v in found]
        raise ValueError(
            f"{where}: bag {_plain(ids[b])!r} has instances with different labels "
            f"{found}; every instance of a bag must carry the bag's label."
        )
    bags = np.split(X[order], np.cumsum(counts)[:-1])
    return bags, lo, ids


def _bag_labels_to_int(raw: np.ndarray, where: str) -> np.ndarray:
    """Turn numeric bag labels into int64, mapping a -1/+1 coding to 0/1."""
    raw = np.asarray(raw, dtype=np.float64)
    if np.any(raw != np.round(raw)):
        bad = raw[raw != np.round(raw)][0]
        raise ValueError(f"{where}: bag labels must be integers, found {bad}.")
    y = raw.astype(np.int64)
    values = set(np.unique(y).tolist())
    # Some mirrors code the classes as -1/+1.
    if -1 in values and values <= {-1, 1}:
        return np.where(y == -1, 0, 1).astype(np.int64)
    if min(values) < 0:
        raise ValueError(
            f"{where}: bag labels must be 0/1 (or -1/+1, read as 0/1) or other "
            f"non-negative integers; found {sorted(values)}."
        )
    return y


# Before pandas 3 the default float parser could be off by one unit in the last
# place; "round_trip" reads every value exactly (pandas 3 does so by default and
# deprecates the argument).
_EXACT_FLOATS = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


def _plain(value):
    """A numpy scalar as the Python value, so messages read ``7``, not ``np.int64(7)``."""
    return value.item() if isinstance(value, np.generic) else value


def _dataset_name(path: Path, name: str | None) -> str:
    return name if name is not None else path.stem.lower()


# --------------------------------------------------------------------------- #
# Readers
# --------------------------------------------------------------------------- #
def read_mil_csv(path: str | os.PathLike, name: str | None = None) -> BagDataset:
    """Read a MIL CSV file without header: ``bag_label, bag_id, features...``.

    This is the layout of the multipleinstancelearning.com collection: one row
    per instance, the bag's label (0/1, or -1/+1 which is mapped to 0/1) in the
    first column and an integer bag id in the second.

    Parameters
    ----------
    path : str or PathLike
    name : str, optional
        Data set name; defaults to the file name's stem in lower case.

    Returns
    -------
    BagDataset
        Bags in ascending bag-id order, instances in file order within a bag.

    Raises
    ------
    ValueError
        If the file is empty, has fewer than three columns, holds non-numeric
        values or non-integer bag ids, or a bag has instances with different labels.
    """
    path = Path(path)
    try:
        df = pd.read_csv(path, header=None, **_EXACT_FLOATS)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path} is empty.") from exc
    if df.shape[0] == 0:
        raise ValueError(f"{path} has no rows.")
    if df.shape[1] < 3:
        raise ValueError(
            f"{path} has {df.shape[1]} column(s); expected bag_label, bag_id and at "
            "least one feature per row."
        )
    non_numeric = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
    if non_numeric:
        col = non_numeric[0]
        example = df[col][pd.to_numeric(df[col], errors="coerce").isna()].iloc[0]
        raise ValueError(
            f"{path}: column {col + 1} holds non-numeric values (e.g. {example!r}). "
            "read_mil_csv expects a headerless file of numbers; for a file with a "
            "header use load_bags_csv."
        )
    values = df.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(values)):
        row, col = np.argwhere(~np.isfinite(values))[0]
        raise ValueError(
            f"{path}: missing or non-finite value in row {row + 1}, column {col + 1}."
        )
    raw_ids = values[:, 1]
    if np.any(raw_ids != np.round(raw_ids)):
        raise ValueError(f"{path}: the bag ids in column 2 must be integers.")
    ids = raw_ids.astype(np.int64)
    bags, raw_y, bag_ids = _group_rows(
        np.ascontiguousarray(values[:, 2:]), values[:, 0], ids, sort_ids=True, where=str(path)
    )
    y = _bag_labels_to_int(raw_y, str(path))
    return BagDataset(_dataset_name(path, name), bags, y, bag_ids, source=str(path))


def _mat_label_names(lablist) -> list[str]:
    """Class names from a PRTools ``lablist`` as read with ``simplify_cells``."""
    if isinstance(lablist, str):
        return [lablist.strip()]
    arr = np.asarray(lablist, dtype=object)
    # Newer PRTools stores a cell array {names, prior, ...; labeling names, current, ...};
    # its first cell holds the class names of the active labeling. Older files store
    # the names directly as a char matrix.
    if arr.ndim == 2 and arr.size and not isinstance(arr.flat[0], str):
        arr = np.asarray(arr[0, 0], dtype=object)
    return [str(v).strip() for v in np.ravel(arr)]


def _mat_instance_labels(nlab: np.ndarray, names: list[str], where: str) -> np.ndarray:
    if np.any(nlab < 1) or np.any(nlab > len(names)):
        raise ValueError(
            f"{where}: nlab holds values outside 1..{len(names)} (0 means unlabelled "
            "in PRTools); every instance needs its bag's label."
        )
    lowered = [n.lower() for n in names]
    if "positive" in lowered:
        return (nlab == lowered.index("positive") + 1).astype(np.float64)
    try:
        numeric = np.array([float(n) for n in names])
    except ValueError:
        raise ValueError(
            f"{where}: cannot tell which class is positive from the label names {names}; "
            "expected 'negative'/'positive' or numeric names."
        ) from None
    return numeric[nlab - 1]


def read_mil_mat(path: str | os.PathLike, name: str | None = None) -> BagDataset:
    """Read a PRTools/miproblems.org ``.mat`` MIL data set.

    The file holds a struct (normally named ``x``) with the instance matrix in
    ``data``, 1-based class indices in ``nlab``, the class names in ``lablist``
    and each instance's bag in ``ident.milbag`` (numbers or names).

    Parameters
    ----------
    path : str or PathLike
    name : str, optional
        Data set name; defaults to the file name's stem in lower case.

    Returns
    -------
    BagDataset
        Bags are numbered 1, 2, ... in order of their first instance in the
        file; for the five benchmarks this is the numbering of the CSV
        collection, so both formats give identical data sets. The label is 1
        for the class named ``positive`` (or the numeric class names, with
        -1/+1 mapped to 0/1).

    Raises
    ------
    ValueError
        If the file lacks the expected fields, is a MATLAB v7.3 (HDF5) file,
        or a bag has instances with different labels.
    """
    import scipy.io
    import scipy.sparse

    path = Path(path)
    try:
        content = scipy.io.loadmat(path, simplify_cells=True)
    except NotImplementedError as exc:
        raise ValueError(f"{path}: MATLAB v7.3 (HDF5) files are not supported.") from exc
    structs = {k: v for k, v in content.items() if not k.startswith("__") and isinstance(v, dict)}
    if "x" in structs:
        x = structs["x"]
    elif len(structs) == 1:
        x = next(iter(structs.values()))
    else:
        raise ValueError(
            f"{path}: expected one PRTools dataset struct (named 'x'); found "
            f"{sorted(k for k in content if not k.startswith('__'))}."
        )
    missing = [f for f in ("data", "nlab", "lablist", "ident") if f not in x]
    if missing or not isinstance(x.get("ident"), dict) or "milbag" not in x["ident"]:
        raise ValueError(
            f"{path}: not a PRTools MIL data set (needs fields data, nlab, lablist and "
            f"ident.milbag; missing {missing or ['ident.milbag']})."
        )
    data = x["data"]
    if scipy.sparse.issparse(data):
        data = data.toarray()
    X = np.atleast_2d(np.asarray(data, dtype=np.float64))
    nlab = np.asarray(x["nlab"]).reshape(-1).astype(np.int64)
    milbag = np.asarray(x["ident"]["milbag"])
    # Bag names are stored as a blank-padded char matrix; numbers come as a column.
    keys = np.array([str(v).strip() for v in milbag.reshape(-1)], dtype=object)
    if not (len(X) == len(nlab) == len(keys)):
        raise ValueError(
            f"{path}: data has {len(X)} rows but nlab {len(nlab)} and milbag {len(keys)}."
        )
    labels = _mat_instance_labels(nlab, _mat_label_names(x["lablist"]), str(path))
    bags, raw_y, _ = _group_rows(X, labels, keys, sort_ids=False, where=str(path))
    y = _bag_labels_to_int(raw_y, str(path))
    bag_ids = np.arange(1, len(bags) + 1, dtype=np.int64)
    return BagDataset(_dataset_name(path, name), bags, y, bag_ids, source=str(path))


def from_dataframe(
    df: pd.DataFrame,
    bag_col: str = "bag",
    label_col: str = "label",
    feature_cols: Iterable[str] | None = None,
    name: str = "custom",
) -> BagDataset:
    """Build a :class:`BagDataset` from a table with one row per instance.

    Parameters
    ----------
    df : pandas.DataFrame
    bag_col : str
        Column holding each row's bag id (any hashable values).
    label_col : str
        Column holding the bag label (integers or booleans; -1/+1 is read as
        0/1). It must be the same on every row of a bag.
    feature_cols : iterable of str, optional
        Feature columns in the wanted order; default: every column except
        ``bag_col`` and ``label_col``, in table order.
    name : str
        Data set name.

    Returns
    -------
    BagDataset
        Bags in order of their first row in ``df``; ``bag_ids`` holds the
        bag column's values.

    Raises
    ------
    ValueError
        If the table is empty, a column is missing, a feature column is not
        numeric, a value is missing or infinite (the message names the column),
        or a bag has rows with different labels.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"from_dataframe expects a pandas DataFrame, got {type(df).__name__}.")
    if df.shape[0] == 0:
        raise ValueError(f"{name}: the table has no rows.")
    columns = list(df.columns)
    for role, col in (("bag_col", bag_col), ("label_col", label_col)):
        if col not in columns:
            raise ValueError(f"{name}: column {col!r} ({role}) not found; columns are {columns}.")
    if feature_cols is None:
        feature_cols = [c for c in columns if c not in (bag_col, label_col)]
    else:
        feature_cols = list(feature_cols)
        unknown = [c for c in feature_cols if c not in columns]
        if unknown:
            raise ValueError(f"{name}: feature column(s) {unknown} not found; columns are {columns}.")
        clash = [c for c in feature_cols if c in (bag_col, label_col)]
        if clash:
            raise ValueError(f"{name}: {clash} cannot be both a feature and the bag/label column.")
    if not feature_cols:
        raise ValueError(f"{name}: no feature columns (only {bag_col!r} and {label_col!r}).")
    non_numeric = [c for c in feature_cols if not pd.api.types.is_numeric_dtype(df[c])]
    if non_numeric:
        raise ValueError(
            f"{name}: feature column(s) {non_numeric} are not numeric (dtype "
            f"{df[non_numeric[0]].dtype}); convert or drop them, or pass feature_cols=."
        )
    X = df[feature_cols].to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(X)):
        row, col = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(
            f"{name}: feature column {feature_cols[col]!r} holds a missing (NaN) or "
            f"infinite value (row {df.index[row]!r})."
        )
    keys = df[bag_col].to_numpy()
    if pd.isna(df[bag_col]).any():
        row = df.index[pd.isna(df[bag_col]).to_numpy()][0]
        raise ValueError(f"{name}: bag column {bag_col!r} is missing a value (row {row!r}).")
    if not (pd.api.types.is_numeric_dtype(df[label_col]) or pd.api.types.is_bool_dtype(df[label_col])):
        raise ValueError(
            f"{name}: label column {label_col!r} must hold integers or booleans "
            f"(dtype {df[label_col].dtype}); map the classes first, e.g. "
            "df[label].map({'neg': 0, 'pos': 1})."
        )
    labels = df[label_col].to_numpy(dtype=np.float64, na_value=np.nan)
    if np.isnan(labels).any():
        row = df.index[np.isnan(labels)][0]
        raise ValueError(f"{name}: label column {label_col!r} is missing a value (row {row!r}).")
    bags, raw_y, bag_ids = _group_rows(X, labels, keys, sort_ids=False, where=name)
    y = _bag_labels_to_int(raw_y, name)
    return BagDataset(name, bags, y, bag_ids)


def load_bags_csv(
    path: str | os.PathLike,
    bag_col: str = "bag",
    label_col: str = "label",
    feature_cols: Iterable[str] | None = None,
    name: str | None = None,
    **read_csv_kwargs,
) -> BagDataset:
    """Read the user's own CSV (with a header row) of one instance per row.

    Parameters
    ----------
    path : str or PathLike
    bag_col, label_col, feature_cols :
        As in :func:`from_dataframe`.
    name : str, optional
        Data set name; defaults to the file name's stem.
    **read_csv_kwargs
        Passed to :func:`pandas.read_csv` (e.g. ``sep=";"``).

    Returns
    -------
    BagDataset
        Bags in order of first appearance; ``source`` is the path.
    """
    path = Path(path)
    try:
        df = pd.read_csv(path, **read_csv_kwargs)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path} is empty.") from exc
    ds = from_dataframe(
        df,
        bag_col=bag_col,
        label_col=label_col,
        feature_cols=feature_cols,
        name=name if name is not None else path.stem,
    )
    ds.source = str(path)
    return ds


_SPLIT_RE = re.compile(r"^(?P<stem>.+?)(?:\.csv)?_rep(?P<rep>\d+)_fold(?P<fold>\d+)\.txt$", re.IGNORECASE)


def read_split_files(folder: str | os.PathLike, name: str) -> dict[tuple[int, int], np.ndarray]:
    """Read the authors' cross-validation files ``<Name>.csv_rep{r}_fold{f}.txt``.

    Each file lists the 1-based ids of the test bags of one fold, one per line.

    Parameters
    ----------
    folder : str or PathLike
        Folder holding the files.
    name : str
        Data set name, matched case-insensitively (``"elephant"``,
        ``"Elephant"`` and ``"Elephant.csv"`` are the same).

    Returns
    -------
    dict
        ``{(rep, fold): test_bag_ids}`` sorted by (rep, fold); the ids are int64
        arrays in file order. Map ids to positions in a :class:`BagDataset` with
        ``np.searchsorted(ds.bag_ids, ids)``.

    Raises
    ------
    FileNotFoundError
        If the folder does not exist or holds no split files for ``name``.
    ValueError
        If a line is not an integer.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"Split-file folder {folder} does not exist.")
    wanted = name[:-4] if name.lower().endswith(".csv") else name
    info = BENCHMARKS.get(wanted.lower())
    if info is not None:
        wanted = Path(info.file_name).stem
    splits: dict[tuple[int, int], np.ndarray] = {}
    others: set[str] = set()
    for entry in folder.iterdir():
        m = _SPLIT_RE.match(entry.name)
        if m is None or not entry.is_file():
            continue
        if m["stem"].lower() != wanted.lower():
            others.add(m["stem"])
            continue
        ids = []
        for lineno, line in enumerate(entry.read_text().splitlines(), start=1):
            text = line.strip()
            if not text:
                continue
            try:
                ids.append(int(text))
            except ValueError:
                raise ValueError(f"{entry}, line {lineno}: expected a bag id, got {text!r}.") from None
        splits[(int(m["rep"]), int(m["fold"]))] = np.array(ids, dtype=np.int64)
    if not splits:
        hint = f" Split files found for: {sorted(others)}." if others else ""
        raise FileNotFoundError(
            f"No split files for {name!r} in {folder}: expected names like "
            f"{wanted}.csv_rep1_fold1.txt.{hint}"
        )
    return dict(sorted(splits.items()))


# --------------------------------------------------------------------------- #
# Benchmarks
# --------------------------------------------------------------------------- #
def _benchmark_info(name: str) -> BenchmarkInfo:
    key = str(name).strip().lower()
    if key not in BENCHMARKS:
        raise ValueError(
            f"Unknown benchmark {name!r}; valid names are: {', '.join(sorted(BENCHMARKS))}."
        )
    return BENCHMARKS[key]


def _find_file(folder: Path, file_name: str) -> Path | None:
    """``folder/file_name``, also accepting a different letter case."""
    exact = folder / file_name
    if exact.is_file():
        return exact
    if folder.is_dir():
        for entry in folder.iterdir():
            if entry.name.lower() == file_name.lower() and entry.is_file():
                return entry
    return None


def _find_benchmark(folder: Path, info: BenchmarkInfo) -> tuple[Path, str] | None:
    csv = _find_file(folder, info.file_name)
    if csv is not None:
        return csv, "csv"
    mat = _find_file(folder / "miproblems", info.mat_file)
    if mat is not None:
        return mat, "mat"
    return None


def _sources_text(info: BenchmarkInfo) -> str:
    return (
        f"Download {info.file_name} from {' or '.join(info.urls)}. " + _OTHER_SOURCES
    )


def _check_counts(ds: BagDataset, info: BenchmarkInfo, path: Path) -> None:
    s = ds.summary()
    expected = {
        "bags": info.n_bags,
        "positive": info.n_positive,
        "negative": info.n_negative,
        "instances": info.n_instances,
        "features": info.n_features,
        "min_bag_size": info.min_bag_size,
        "max_bag_size": info.max_bag_size,
    }
    wrong = [f"{k}: {s[k]} (expected {v})" for k, v in expected.items() if s[k] != v]
    if wrong:
        raise ValueError(
            f"{path} does not match the {info.name} benchmark: " + "; ".join(wrong)
            + ". Use read_mil_csv to read a modified copy."
        )


def load_benchmark(
    name: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    cache_dir: str | os.PathLike | None = None,
    verify: bool = True,
) -> BagDataset:
    """Load one of the classic MIL benchmarks.

    The file is looked for in ``data_dir``, else in the folder named by the
    environment variable ``MINITORCH_PROTO_DATA``, else in the per-user cache
    (``cache_dir`` or :func:`default_cache_dir`). In each folder the CSV (e.g.
    ``Musk1.csv``) is preferred; ``miproblems/musk1.mat`` is read when the CSV
    is absent. Only the cache is filled by downloading: a folder named
    explicitly that lacks the file is an error, so a typo never triggers a
    download.

    Parameters
    ----------
    name : str
        ``"musk1"``, ``"musk2"``, ``"fox"``, ``"tiger"`` or ``"elephant"``
        (any letter case).
    data_dir : str or PathLike, optional
        Folder holding the benchmark files.
    download : bool
        Download the CSV into the cache when it is not there.
    cache_dir : str or PathLike, optional
        Cache folder; default :func:`default_cache_dir`.
    verify : bool
        Check the file's sha256 against :data:`BENCHMARKS` (turn off for a
        copy that differs byte-wise, e.g. re-saved with other line endings).
        Downloads are always verified. The bag, label, instance and feature
        counts are checked either way.

    Returns
    -------
    BagDataset
        Bags in ascending bag-id order, labels 0/1.

    Raises
    ------
    ValueError
        If the name is unknown or the file's counts differ from the table.
    ChecksumError
        (a ``ValueError``) if ``verify`` and the sha256 differs.
    FileNotFoundError
        If the file is not in the named folder, or not cached and ``download``
        is False.
    DownloadError
        If downloading failed from every URL.
    """
    info = _benchmark_info(name)
    env_dir = os.environ.get(DATA_ENV_VAR)
    if data_dir is not None or env_dir:
        folder = Path(data_dir if data_dir is not None else env_dir).expanduser()
        origin = "data_dir" if data_dir is not None else f"${DATA_ENV_VAR}"
        found = _find_benchmark(folder, info)
        if found is None:
            state = "" if folder.is_dir() else " (the folder does not exist)"
            raise FileNotFoundError(
                f"{info.file_name} not found in {folder}{state}, given by {origin}; "
                f"also looked for {Path('miproblems') / info.mat_file} there. "
                f"{_sources_text(info)}"
            )
        cached = False
    else:
        folder = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        found = _find_benchmark(folder, info)
        cached = True
        if found is None:
            target = folder / info.file_name
            if not download:
                raise FileNotFoundError(
                    f"{info.file_name} is not in the cache {folder} and download=False. "
                    f"Call load_benchmark({info.name!r}, download=True), or save the file "
                    f"as {target}, or put it in a folder and set {DATA_ENV_VAR} to that "
                    f"folder (or pass data_dir=...). {_sources_text(info)}"
                )
            download_file(info.urls, target, info.sha256)
            found = (target, "csv")
    path, fmt = found
    if verify:
        expected = info.sha256 if fmt == "csv" else info.mat_sha256
        got = sha256_of(path)
        if got != expected:
            fix = (
                "Delete it to download it again."
                if cached
                else "If this is your own re-saved copy, pass verify=False."
            )
            raise ChecksumError(
                f"{path} has sha256 {got}, expected {expected} for {info.name}. "
                f"The file is corrupt, truncated or a different version. {fix}"
            )
    ds = read_mil_csv(path, name=info.name) if fmt == "csv" else read_mil_mat(path, name=info.name)
    _check_counts(ds, info, path)
    return ds
