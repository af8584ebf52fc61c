"""The classic benchmarks (Musk1, Musk2, Fox, Tiger, Elephant): what is known about
each file, :func:`load_benchmark`, and the
published fold assignments (:func:`read_split_files`).

Their licences are unclear or require attribution, so the package does not ship
them: it reads them from a folder the user names, or downloads them on demand into
the per-user cache and checks them against a known sha256.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .containers import BagDataset
from .download import (DATA_ENV_VAR, ChecksumError, DownloadError, default_cache_dir, download_deadline, download_file,
                       sha256_of)
from .readers import read_mil_csv, read_mil_mat

__all__ = ["BENCHMARKS", "BenchmarkInfo", "benchmark_status", "load_benchmark", "read_split_files"]


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
# Benchmarks
# --------------------------------------------------------------------------- #
def _benchmark_info(name: str) -> BenchmarkInfo:
    key = str(name).strip().lower()
    if key not in BENCHMARKS:
        from .pathology import PATHOLOGY

        hint = f" {name!r} is a pathology data set: use load_pathology." if key in PATHOLOGY else ""
        raise ValueError(
            f"Unknown benchmark {name!r}; valid names are: {', '.join(sorted(BENCHMARKS))}.{hint}"
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
    download_timeout: float | None = None,
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
        Cache folder; default :func:`default_cache_dir`. Not looked in when ``data_dir`` or
        ``$MINITORCH_PROTO_DATA`` names a folder (that folder is the only place looked).
    verify : bool
        Check the file's sha256 against :data:`BENCHMARKS` (turn off for a
        copy that differs byte-wise, e.g. re-saved with other line endings).
        Downloads are always verified. The bag, label, instance and feature
        counts are checked either way.
    download_timeout : float, optional
        Overall limit in seconds for a download (see :func:`download_file`'s
        ``deadline``; default ``$MINITORCH_PROTO_DOWNLOAD_TIMEOUT``, else 900 s).

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
    path, fmt, cached = _locate(
        info, data_dir, download, cache_dir, download_timeout,
        find_named=lambda folder: _find_benchmark(folder, info),
        looked_too=lambda folder: f"also looked for {Path('miproblems') / info.mat_file} there",
        sources=_sources_text(info),
        call=f"load_benchmark({info.name!r}, download=True)",
    )
    if verify:
        _verify(path, info.sha256 if fmt == "csv" else info.mat_sha256, info, cached, download=download,
                download_timeout=download_timeout)
    ds = read_mil_csv(path, name=info.name) if fmt == "csv" else read_mil_mat(path, name=info.name)
    _check_counts(ds, info, path)
    return ds


def benchmark_status(data_dir: str | os.PathLike | None = None, download: bool = False,
                     download_timeout: float | None = None, verify: bool = True) -> tuple[pd.DataFrame, list[str]]:
    """Whether each benchmark loads (:func:`load_benchmark` with these arguments), as a table, and
    one line per benchmark that does not.

    Returns
    -------
    table : DataFrame
        One row per benchmark: ``dataset``, ``status`` (``ok``, ``missing``: not found or not
        downloaded, ``corrupt``: its checksum differs, ``unusable``: it does not read as the
        benchmark), and for loaded ones ``bags``, ``instances``, ``features`` and ``source``.
    problems : list of str
        ``"<name>: <status>: <the loader's one-line message>"``, which says the fix.
    """
    if download:  # a bad limit is the caller's mistake, not five unusable benchmarks
        download_deadline(download_timeout, "download_timeout")
    rows, problems = [], []
    for name in BENCHMARKS:
        try:
            d = load_benchmark(name, data_dir=data_dir, download=download, download_timeout=download_timeout,
                               verify=verify)
        except (OSError, ValueError, RuntimeError) as exc:  # FileNotFoundError, ChecksumError, DownloadError, ...
            status = ("corrupt" if isinstance(exc, ChecksumError) else
                      "unusable" if isinstance(exc, ValueError) else "missing")
            rows.append({"dataset": name, "status": status})
            problems.append(f"{name}: {status}: {getattr(exc, 'one_line', None) or ' '.join(str(exc).split())}")
            continue
        s = d.summary()
        rows.append({"dataset": name, "status": "ok", "bags": s["bags"], "instances": s["instances"],
                     "features": s["features"], "source": d.source})
    table = pd.DataFrame(rows, columns=["dataset", "status", "bags", "instances", "features", "source"])
    table = table.astype({**{c: "Int64" for c in ("bags", "instances", "features")}, "source": object})
    return table.fillna({"source": ""}), problems


def _locate(info: BenchmarkInfo, data_dir, download: bool, cache_dir, download_timeout, *,
            find_named, looked_too, sources: str, call: str) -> tuple[Path, str, bool]:
    """The rule every registered file follows: ``(path, "csv" or "mat", whether it is the cache's copy)``.

    ``data_dir``, else ``$MINITORCH_PROTO_DATA``, is only read (``find_named(folder)``);
    a named folder that lacks the file is an error, never a download. Otherwise the
    cache folder is read and, with ``download``, filled from ``info.urls``.
    """
    if download_timeout is not None:
        download_deadline(download_timeout, "download_timeout")  # a bad value is an error even when no download is needed
    env_dir = os.environ.get(DATA_ENV_VAR)
    if data_dir is not None or env_dir:
        folder = Path(data_dir if data_dir is not None else env_dir).expanduser()
        origin = "data_dir" if data_dir is not None else f"${DATA_ENV_VAR}"
        found = find_named(folder)
        if found is None:
            state = "" if folder.is_dir() else (" (a file, not a folder)" if folder.exists() else
                                                " (the folder does not exist)")
            raise FileNotFoundError(
                f"{info.file_name} not found in {folder}{state}, given by {origin}; "
                f"{looked_too(folder)}. {sources}"
            )
        return (*found, False)
    folder = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    csv = _find_file(folder, info.file_name)
    if csv is not None:
        return csv, "csv", True
    mat = _find_file(folder / "miproblems", info.mat_file) if info.mat_file else None
    if mat is not None:
        return mat, "mat", True
    target = folder / info.file_name
    if not download:
        raise FileNotFoundError(
            f"{info.file_name} is not in the cache {folder} and download=False. "
            f"Call {call}, or save the file "
            f"as {target}, or put it in a folder and set {DATA_ENV_VAR} to that "
            f"folder (or pass data_dir=...). {sources}"
        )
    if not info.sha256:  # a download that cannot be verified would sit in the cache as if it had been
        raise FileNotFoundError(f"{info.file_name} is not in the cache {folder}, and no checksum is known for "
                                f"{info.name}, so it is not downloaded; save the file as {target}. {sources}")
    download_file(info.urls, target, info.sha256, deadline=download_timeout)
    return target, "csv", True


def _verify(path: Path, expected: str, info: BenchmarkInfo, cached: bool, *, download: bool = False,
            download_timeout: float | None = None) -> None:
    """A one-line :class:`ChecksumError` when ``path``'s sha256 is not ``expected``.

    The cache holds only verified downloads, so a cached CSV that fails its check was damaged
    from outside; with ``download`` it is fetched again (atomically, verified) instead.
    """
    if not expected:
        raise ChecksumError(f"{path}: no checksum is known for {info.name}'s {path.suffix} file, so it cannot be "
                            "verified; pass verify=False to use it as it is.")
    got = sha256_of(path)
    if got == expected:
        return
    if cached and download and info.urls and path.name == info.file_name:
        try:
            download_file(info.urls, path, expected, deadline=download_timeout)
            return
        except DownloadError as exc:  # one line: the mirrors' reasons, and where a good copy goes
            raise ChecksumError(f"{path} has sha256 {got}, expected {expected} for {info.name}: the cached copy is "
                                f"damaged, and fetching it again failed ({exc.one_line}); delete it, or save a "
                                f"good copy of {info.file_name} there.") from exc
    # Only the CSV of the benchmark's own name is fetched again: a cached .mat (or a CSV named otherwise) is
    # not, so download=True would not help; once it is deleted the CSV is downloaded.
    refetched = cached and path.name == info.file_name and bool(info.urls)
    fix = (
        ("Delete it, or call with download=True to fetch it again." if refetched and not download else
         f"Delete it; {info.file_name} is then downloaded in its place.")
        if cached
        else "If this is your own re-saved copy, pass verify=False."
    )
    raise ChecksumError(
        f"{path} has sha256 {got}, expected {expected} for {info.name}. "
        f"The file is corrupt, truncated or a different version. {fix}"
    )


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
        arrays in file order. :func:`~minitorch_proto.evaluation.cv.split_file_folds` turns
        them into folds, refusing ids the data set does not hold (``np.searchsorted`` would
        quietly take a neighbouring bag for a missing id).

    Raises
    ------
    FileNotFoundError
        If the folder does not exist or holds no split files for ``name``.
    ValueError
        If a line is not an integer.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"Split-file folder {folder} " + ("is a file, not a folder." if folder.exists() else
                                                                 "does not exist."))
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
