"""Bags stored one file per bag, read lazily.

Whole-slide pathology pipelines write the pre-extracted instance features of each
slide to its own file: ``.h5`` with a ``features`` dataset, or a ``.pt``/``.npy``
array of shape (n_instances, n_features). :class:`DiskBagDataset` turns such a
folder plus a CSV of bag ids and labels into a sequence of bags that the
estimator, the cross-validation runner and the CLI accept like a list of arrays,
without holding the collection in memory: ``.npy`` files are memory-mapped,
``.pt`` files are loaded with ``mmap=True`` and ``.h5`` datasets are sliced, so a
bag (or a range of its rows, :meth:`DiskBagDataset.rows`) is read only when asked for.
(A ``.pt`` file in torch's legacy, non-zip format cannot be mapped: it is read whole, and
kept while its chunks are read, so memory follows that bag's size, not ``chunk_size``.)

The folder and its labels file are often someone else's, so they are read as
untrusted input: a bag id is a file name, never a path (no separators, no ``..``,
nothing that resolves outside the folder), a link that leads outside the folder
is refused unless ``follow_links=True``, ``.pt`` files are loaded with
``weights_only=True`` and refused when they would need code to load, and every
unreadable file is a one-line :class:`BagFileError` naming it
(:mod:`minitorch_proto.data.bag_files` opens each file).
"""
from __future__ import annotations

import errno
import io
import os
import tempfile
from glob import escape as glob_escape
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
from numpy.typing import DTypeLike

from .bag_files import (FEATURE_SUFFIXES, KEY_ADVICE, LINK_ADVICE, BagFile, BagFileError, as_numpy, check_bag_id,
                        escape_breaks, first_line, kind_ok, open_array)
from .labels_file import feature_entries, folder_ids, read_labels_file
from ..validation import check_chunk_size

__all__ = ["BagFileError", "DiskBagDataset", "FEATURE_SUFFIXES", "write_bag_folder"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _extremes_ok(rows: np.ndarray) -> bool:
    """Whether every value is finite and within float32's range, from the smallest and largest alone.

    NaN propagates through ``min`` and ``max``, so two reductions check every value without the
    boolean and absolute-value copies of the rows, which cost more than reading them (measured:
    6.9 ms of a 2,000 x 512 bag's 7.5 ms read, most of it page faults of the copies).
    """
    lo, hi = float(rows.min()), float(rows.max())
    return -_FLOAT32_MAX <= lo and hi <= _FLOAT32_MAX


class DiskBagDataset(Sequence):
    """A folder of per-bag feature files plus a CSV of bag ids and labels.

    Parameters
    ----------
    root : path
        Folder holding ``<bag id>.npy``, ``<bag id>.pt`` or ``<bag id>.h5`` files,
        each of shape (n_instances, n_features) (a 1-D array is one instance).
    labels : path or None
        CSV with one row per bag: a bag-id column and, for training, a label column.
        Only the bags it lists are used, in its order. None: every feature file of
        ``root``, ids sorted, no labels (``y`` is None), as for bags only to be predicted.
    bag_col, label_col : str
        Column names in ``labels`` (the CLI's ``--bag-col``/``--label-col``); ``label_col=None``
        reads no labels (``y`` is None), as for bags only to be predicted.
    key : str
        Dataset name inside ``.h5`` files, or dict key inside ``.pt`` files.
    check_finite : bool
        Check every row read for NaN and infinity (the error names the file).
    name : str, optional
        Short name for messages and reports (default: the folder's name).
    follow_links : bool, default=False
        Read feature files that are symbolic links to places outside ``root``. Off by
        default: a shared folder's links could otherwise make the tool read any file the
        user can read. Links that stay inside ``root`` are always followed.

    Attributes
    ----------
    y : ndarray or None
        Labels in CSV order (None when the CSV has no label column).
    bag_ids : ndarray of str
    sizes : ndarray of int64
        Instances per bag, from the file headers.
    n_features : int

    Notes
    -----
    Construction reads only the file headers: it checks that every listed bag has
    exactly one feature file, that each holds a non-empty 2-D numeric array, and
    that all agree on the number of features. Values are checked for NaN as they
    are read. ``dataset[i]`` returns bag ``i`` as an array of its own (also for
    ``.npy``, read through a memory map and copied); ``dataset[a:b]`` or ``dataset[[i, j]]``
    a subset dataset.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        labels: str | os.PathLike | None,
        *,
        bag_col: str = "bag",
        label_col: str | None = "label",
        key: str = "features",
        check_finite: bool = True,
        name: str | None = None,
        follow_links: bool = False,
    ) -> None:
        root = Path(root)
        self.follow_links = bool(follow_links)
        if not root.is_dir():
            raise FileNotFoundError(f"Bag folder {root} does not exist or is not a folder.")
        if labels is None:  # every feature file of the folder, unlabelled (for prediction)
            labels, ids, y, columns = None, folder_ids(root), None, []
        else:
            labels = Path(labels)
            ids, y, columns = read_labels_file(root, labels, bag_col=bag_col, label_col=label_col,
                                               follow_links=self.follow_links)
        self.root, self.labels_path, self.key = root, labels, key
        self.check_finite = bool(check_finite)
        self.name = name or root.name
        self.columns = columns
        self.bag_ids = ids
        self.y = y
        self._files = [self._inspect(str(b)) for b in self.bag_ids]
        listed = set(self.bag_ids.tolist())
        #: Feature files in the folder that the labels file does not list (they are not read).
        self.unlisted = sorted(p.name for p in feature_entries(root) if p.stem not in listed)
        widths = {f.n_features for f in self._files}
        if len(widths) > 1:
            first = self._files[0]
            odd = next(f for f in self._files if f.n_features != first.n_features)
            raise BagFileError(
                f"{odd.path} has {odd.n_features} features but {first.path} has {first.n_features}: "
                "every bag needs the same number."
            )

    @classmethod
    def _from_parts(cls, parent: "DiskBagDataset", index: np.ndarray) -> "DiskBagDataset":
        sub = cls.__new__(cls)
        sub.__dict__.update(parent.__dict__)
        sub.bag_ids = parent.bag_ids[index]
        sub.y = None if parent.y is None else parent.y[index]
        sub._files = [parent._files[i] for i in index]
        return sub

    def _candidates(self, bag_id: str) -> list[Path]:
        """The bag's feature files, each checked to stay inside the folder (or allowed to leave it)."""
        root = self.root.resolve()
        found = []
        for suffix in FEATURE_SUFFIXES:
            path = self.root / f"{bag_id}{suffix}"
            if not path.is_symlink() and not path.exists():
                continue
            try:
                real = path.resolve(strict=True)
            except (RuntimeError, OSError) as exc:
                loop = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP
                raise BagFileError(f"{path}: {'a symbolic link loop' if loop else 'a broken link'}.") from None
            if not real.is_relative_to(root) and not self.follow_links:
                raise BagFileError(f"{path} leads outside {self.root} (to {real}); {LINK_ADVICE}.")
            if not real.is_file():
                # A folder, FIFO or device under a feature file's name: opening a FIFO would hang.
                what = "a folder" if real.is_dir() else "a special file (FIFO, device or socket)"
                raise BagFileError(f"{path}: {what}, not a feature file.")
            found.append(path)
        return found

    def _inspect(self, bag_id: str) -> BagFile:
        found = self._candidates(bag_id)
        if not found:
            tried = ", ".join(repr(f"{bag_id}{s}") for s in FEATURE_SUFFIXES)
            hint = ""
            if any(bag_id.lower().endswith(s) for s in FEATURE_SUFFIXES):
                hint = "; ids name files without their suffix: write the id without it"
            else:  # the right file under another case of its suffix ("b0.NPY"): the id is right, the name is not
                near = [p.name for p in self.root.glob(f"{glob_escape(bag_id)}.*")
                        if p.suffix.lower() in FEATURE_SUFFIXES and p.suffix not in FEATURE_SUFFIXES]
                if near:
                    hint = f"; found {near[0]!r}: rename it with a lower-case suffix"
            raise FileNotFoundError(escape_breaks(
                f"No feature file for bag {bag_id!r} in {self.root} (looked for {tried}){hint}."))
        if len(found) > 1:
            raise BagFileError(f"Bag {bag_id!r} has several feature files ({', '.join(p.name for p in found)}): keep one.")
        path = found[0]
        try:
            arr, handle = open_array(path, self.key, self.follow_links)
        except BagFileError:
            raise
        except (OSError, EOFError) as exc:
            raise BagFileError(f"{path}: could not be read ({first_line(exc)}).") from None
        try:
            shape, dtype = tuple(arr.shape), arr.dtype
        finally:
            if handle is not None:
                handle.close()
        if not kind_ok(dtype):
            raise BagFileError(f"{path}: features must be numeric, got dtype {dtype}.")
        if len(shape) == 1:
            shape = (1, shape[0])
        if len(shape) != 2:
            raise BagFileError(f"{path}: features must be 2-D (instances x features); got shape {shape}.")
        if shape[0] == 0:
            raise BagFileError(f"{path}: the bag is empty; every bag needs at least one instance.")
        if shape[1] == 0:
            raise BagFileError(f"{path}: the bag has no features.")
        return BagFile(path, int(shape[0]), int(shape[1]))

    # ------------------------------------------------------------ sequence
    def __len__(self) -> int:
        return len(self._files)

    def __getitem__(self, index):
        if isinstance(index, (int, np.integer)):
            i = int(index)
            if not -len(self) <= i < len(self):
                raise IndexError(f"bag index {i} out of range for {len(self)} bags.")
            i %= len(self)
            return self.rows(i, 0, self._files[i].n_instances)
        if isinstance(index, slice):
            return self.subset(np.arange(len(self))[index])
        return self.subset(index)

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"DiskBagDataset({str(self.root)!r}, {len(self)} bags, {int(self.sizes.sum())} instances, " \
               f"{self.n_features} features)"

    def subset(self, indices) -> "DiskBagDataset":
        """The bags at ``indices`` (positions, or a boolean mask) as a dataset of the same files.

        No file is read: the subset keeps this dataset's folder and settings.

        Parameters
        ----------
        indices : array-like of int, or boolean array
            Positions of the bags (negative ones count from the end; a position may repeat), or a
            mask that is True for each bag to keep.

        Returns
        -------
        DiskBagDataset
            The bags in the order of ``indices`` (a mask keeps this dataset's order).

        Raises
        ------
        IndexError
            If a position is out of range or not an integer (a bag id is not a position), or a boolean mask
            does not have one value per bag.
        """
        idx = np.asarray(indices)
        if idx.dtype == bool:
            if idx.shape != (len(self),):  # numpy would read a short mask's missing tail as False
                raise IndexError(f"a boolean mask of shape {idx.shape} for {len(self)} bags.")
            idx = np.flatnonzero(idx)
        if idx.size and idx.dtype.kind not in "iu":  # "1" is an id, not position 1; 0.9 is no position
            raise IndexError(f"bag positions must be integers, got {idx.dtype} values such as {idx.flat[0]!r} (for "
                             "ids: pd.Index(ds.bag_ids).get_indexer(ids)).")
        idx = idx.astype(np.int64).reshape(-1)
        if len(idx) and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(f"bag indices out of range for {len(self)} bags.")
        return self._from_parts(self, idx % max(len(self), 1))

    # ------------------------------------------------------------- reading
    def rows(self, i: int, start: int, stop: int) -> np.ndarray:
        """Instances ``start:stop`` of bag ``i`` (only those are read from disk), as an array in memory.

        ``.npy`` and ``.pt`` files are memory-mapped to read the rows, and the rows copied out: a
        view would hold the file open, and a fit that holds a thousand bags would run out of file
        descriptors (``ulimit -n`` is often 1,024).

        Parameters
        ----------
        i : int
            Position of the bag (negative counts from the end).
        start, stop : int
            Row range, as in a slice ``start:stop`` (a ``stop`` past the bag's end stops there).

        Returns
        -------
        ndarray of shape (n_rows, n_features)
            In the file's dtype (half-precision ``.pt`` tensors widened to float32).

        Raises
        ------
        BagFileError
            If the file can no longer be read or, with ``check_finite``, the rows hold NaN,
            infinity or a value beyond float32's range.
        """
        f = self._files[i]
        try:
            arr, handle = open_array(f.path, self.key, self.follow_links)
            try:
                shape = (1, arr.shape[0]) if len(arr.shape) == 1 else tuple(arr.shape)
                if shape != (f.n_instances, f.n_features):  # sizes, chunks and the model read the opened shape
                    raise BagFileError(f"{f.path}: changed since the folder was opened (now {shape[0]} x {shape[1]}, "
                                       f"was {f.n_instances} x {f.n_features}); open the folder again.")
                if len(arr.shape) == 1:
                    out = as_numpy(arr[:]).reshape(1, -1)[start:stop]
                else:
                    out = as_numpy(arr[start:stop])
                out = out if out.flags.owndata else out.copy()  # not a view of the mapped file
            finally:
                if handle is not None:
                    handle.close()
        except BagFileError:
            raise
        except (OSError, EOFError, ValueError, RuntimeError) as exc:
            # The file changed or was truncated after the folder was opened.
            raise BagFileError(f"{f.path}: could not be read ({first_line(exc)}).") from None
        if self.check_finite and out.dtype.kind == "f" and out.size and not _extremes_ok(out):
            if not np.isfinite(out).all():
                bad = np.argwhere(~np.isfinite(out))[0]
                raise BagFileError(
                    f"{f.path} contains NaN or infinite values (first at instance {int(bad[0]) + start}, "
                    f"feature {int(bad[1])})."
                )
            bad = np.argwhere(np.abs(out) > _FLOAT32_MAX)[0]
            raise BagFileError(f"{f.path} holds a value beyond float32's range (instance {int(bad[0]) + start}, "
                               f"feature {int(bad[1])}); rescale the features.")
        return out

    def instance_array(self, i: int, key: str) -> np.ndarray:
        """Another per-instance array of bag ``i``'s file: an HDF5 dataset or an entry of a saved dict.

        Slide-processing tools store more than the features per bag, CLAM and TRIDENT the
        ``"coords"`` of every patch on the slide; this reads one such array, which must have one
        row per instance (``minitorch-proto explain --coords-key``). ``.npy`` files hold one array only.

        Parameters
        ----------
        i : int
            Position of the bag.
        key : str
            Name of the array: an HDF5 dataset, or an entry of the dict a ``.pt`` file holds.

        Returns
        -------
        ndarray
            At least 1-D, one row per instance.

        Raises
        ------
        BagFileError
            If the bag's file is a ``.npy`` file or a ``.pt`` file of one tensor (the features, unless
            ``key`` names them), its ``.h5`` file or ``.pt`` dict has no ``key``, or that array's rows do
            not match the bag's instances.
        """
        f = self._files[i]
        if f.path.suffix.lower() == ".npy":
            raise BagFileError(f"{f.path}: a .npy file holds the features only, no {key!r}; save the bags as .h5 "
                               "or as .pt dicts to keep per-instance arrays beside them.")
        try:
            arr, handle = open_array(f.path, key, self.follow_links, entry_only=key != self.key)
        except BagFileError as exc:  # the reader's advice covers both keys; here another array was asked for
            text = str(exc)
            raise BagFileError(text.split(f"; {KEY_ADVICE}", 1)[0] + (
                f"; {key!r} was asked for as a per-instance array (such as CLAM's 'coords'; --coords-key names it)."
                if KEY_ADVICE in text else "")) from None
        try:
            out = np.atleast_1d(as_numpy(arr[:]))
            out = out if out.flags.owndata else out.copy()
        finally:
            if handle is not None:
                handle.close()
        if len(out) != f.n_instances:
            raise BagFileError(f"{f.path}: {key!r} has {len(out)} rows but the bag has {f.n_instances} instances.")
        return out

    def chunks(self, i: int, chunk_size: int) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, rows)`` pieces of bag ``i``, ``chunk_size`` instances at a time.

        Parameters
        ----------
        i : int
            Position of the bag.
        chunk_size : int
            Instances per piece, at least 1; the last piece may be shorter.

        Yields
        ------
        start : int
            Position of the piece's first instance in the bag.
        rows : ndarray of shape (n_rows, n_features)
            Those instances, as :meth:`rows` returns them.
        """
        n, step = self._files[i].n_instances, check_chunk_size(chunk_size)
        for start in range(0, n, step):
            yield start, self.rows(i, start, min(start + step, n))

    # ------------------------------------------------------------- metadata
    @property
    def sizes(self) -> np.ndarray:
        """Instances per bag, from the file headers (no bag is read)."""
        return np.array([f.n_instances for f in self._files], dtype=np.int64)

    @property
    def n_features(self) -> int:
        """Features per instance, the same in every file (0 for an empty subset)."""
        return self._files[0].n_features if self._files else 0

    @property
    def paths(self) -> list[Path]:
        """The feature file of each bag, in CSV order."""
        return [f.path for f in self._files]

    # The CLI and report helpers treat a data set as an object with .bags, .n_bags and .source.
    @property
    def bags(self) -> "DiskBagDataset":
        """The dataset itself: it is the sequence of bags."""
        return self

    @property
    def n_bags(self) -> int:
        """Number of bags, ``len(self)``."""
        return len(self)

    @property
    def source(self) -> str:
        """The bag folder, as a string (for reports)."""
        return str(self.root)

    def summary(self) -> dict:
        """Counts in the shape of ``BagDataset.summary`` (bags, instances, features, sizes)."""
        s = self.sizes if len(self) else np.zeros(1, dtype=np.int64)  # an empty subset: sizes of 0, not numpy's error
        out = {"name": self.name, "bags": len(self), "instances": int(s.sum()), "features": self.n_features,
               "min_bag": int(s.min()), "median_bag": float(np.median(s)), "max_bag": int(s.max())}
        if self.y is not None:
            values, counts = np.unique(self.y, return_counts=True)
            out["classes"] = {str(v): int(c) for v, c in zip(values, counts)}
        return out

    def to_memory(self, dtype=np.float64) -> list[np.ndarray]:
        """Every bag as an in-memory array (only for collections that fit in memory).

        Parameters
        ----------
        dtype : numpy dtype, default=np.float64
            dtype of the returned arrays.

        Returns
        -------
        list of ndarray
            One array of shape (n_instances_i, n_features) per bag, in this dataset's order.
        """
        return [np.array(self[i], dtype=dtype) for i in range(len(self))]


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}", suffix=".part")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bag_folder(
    root: str | os.PathLike,
    bags: Sequence[np.ndarray],
    y: Sequence | None,
    bag_ids: Sequence | None = None,
    *,
    fmt: str = "npy",
    labels_name: str = "labels.csv",
    bag_col: str = "bag",
    label_col: str = "label",
    key: str = "features",
    dtype: DTypeLike = np.float32,
    instance_arrays: dict[str, Sequence[np.ndarray]] | None = None,
) -> Path:
    """Write bags one file per bag plus a labels CSV; return the CSV's path.

    Each file is written under a temporary name and renamed, and the CSV is written
    last, so an interrupted call never leaves a labels file pointing at half-written bags.

    Parameters
    ----------
    root : path
        Folder to write into (created if missing); files already there with the same names are replaced.
    bags : sequence of array-like (n_instances_i, n_features)
    y : sequence or None
        One label per bag, written to the ``label_col`` column; None writes no label column.
    bag_ids : sequence, optional
        One id per bag, unique plain file names (``<bag id>.<fmt>``); None (default) gives 0, 1, ...
    fmt : {"npy", "pt", "h5"}, default="npy"
        File type (``.pt`` holds a tensor; ``.h5`` a ``key`` dataset).
    labels_name : str, default="labels.csv"
        File name of the labels CSV inside ``root``.
    bag_col, label_col : str, default="bag", "label"
        Column names of the CSV (as :class:`DiskBagDataset` reads them).
    key : str, default="features"
        Dataset name inside ``.h5`` files, or dict key inside ``.pt`` files that hold instance arrays.
    dtype : numpy dtype, default=np.float32
        Stored dtype (float32, as slide-processing tools write).
    instance_arrays : dict of str to sequences of ndarray, optional
        Per-instance arrays to store beside the features, one per bag with one row per instance,
        e.g. ``{"coords": ...}`` (``.h5`` datasets; a ``.pt`` file then holds a dict).

    Returns
    -------
    Path
        The labels CSV, ``root / labels_name``.

    Raises
    ------
    ValueError
        On an unknown ``fmt``, invalid bags or labels, ``bag_ids`` of the wrong length, repeated or
        not plain file names, a label pandas would read back as missing, or ``instance_arrays``
        with ``fmt="npy"``, named ``key`` or not one row per instance.
    """
    import pandas as pd

    from ..validation import check_bags, check_labels

    if fmt not in ("npy", "pt", "h5"):
        raise ValueError(f"fmt must be 'npy', 'pt' or 'h5', got {fmt!r}.")
    bags = check_bags(bags, dtype=None)  # what DiskBagDataset would refuse to read back is refused before writing
    ids = [str(b) for b in (bag_ids if bag_ids is not None else range(len(bags)))]
    if len(ids) != len(bags):
        raise ValueError(f"Got {len(bags)} bags but {len(ids)} bag ids.")
    for bag_id in ids:
        check_bag_id(bag_id, "bag_ids")
    if len(set(ids)) != len(ids):  # one file per id: a repeat would overwrite a bag
        raise ValueError(f"bag_ids repeats {pd.Index(ids)[pd.Index(ids).duplicated()][:3].tolist()}; ids must be "
                         "unique.")
    if y is not None:
        check_labels(y, len(ids), min_classes=1)
        # Read back as DiskBagDataset reads the labels file: "01" beside "1" (one number), "NA" among numbers
        # (missing) are refused now, not by the reader of the finished folder; "NA" among names is a class.
        from .csv_checks import read_labels

        text = pd.DataFrame({"y": list(y)}).to_csv(index=False)
        back = read_labels(pd.read_csv(io.StringIO(text), dtype=str), io.StringIO(text), "y", "the labels")
        if back.isna().any():
            raise ValueError(f"label {list(y)[int(np.flatnonzero(back.isna())[0])]!r} would read back as a missing "
                             "label (pandas reads it so); use another name for that class.")
    extra = dict(instance_arrays or {})
    if extra and fmt == "npy":
        raise ValueError("instance_arrays need fmt='h5' or 'pt': a .npy file holds one array.")
    for name, arrays in extra.items():
        if name == key or len(arrays) != len(bags) or any(len(a) != len(b) for a, b in zip(arrays, bags)):
            raise ValueError(f"instance_arrays[{name!r}]: one array per bag, a row per instance, not named {key!r}.")

    def write(tmp, arrays: dict) -> None:  # arrays[key] the features, then the instance arrays
        if fmt == "npy":
            with open(tmp, "wb") as fh:  # np.save appends .npy to names without it: give it an open file
                np.save(fh, arrays[key])
        elif fmt == "pt":
            import torch

            tensors = {name: torch.from_numpy(a) for name, a in arrays.items()}
            torch.save(tensors if extra else tensors[key], tmp)
        else:
            import h5py

            with h5py.File(tmp, "w") as fh:
                for name, a in arrays.items():
                    fh.create_dataset(name, data=a)

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for j, (bag_id, bag) in enumerate(zip(ids, bags)):
        arrays = {key: np.ascontiguousarray(np.asarray(bag, dtype=dtype)),
                  **{name: np.ascontiguousarray(np.asarray(a[j])) for name, a in extra.items()}}
        _atomic_write(root / f"{bag_id}.{fmt}", lambda tmp: write(tmp, arrays))
    table = {bag_col: ids}
    if y is not None:
        table[label_col] = list(y)
    labels = root / labels_name
    _atomic_write(labels, lambda tmp: pd.DataFrame(table).to_csv(tmp, index=False))
    return labels
