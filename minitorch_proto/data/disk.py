"""Bags stored one file per bag, read lazily.

Whole-slide pathology pipelines write the pre-extracted instance features of each
slide to its own file: ``.h5`` with a ``features`` dataset, or a ``.pt``/``.npy``
array of shape (n_instances, n_features). :class:`DiskBagDataset` turns such a
folder plus a CSV of bag ids and labels into a sequence of bags that the
estimator, the cross-validation runner and the CLI accept like a list of arrays,
without holding the collection in memory: ``.npy`` files are memory-mapped,
``.pt`` files are loaded with ``mmap=True`` and ``.h5`` datasets are sliced, so a
bag (or a range of its rows, :meth:`DiskBagDataset.rows`) is read only when asked for.

The folder and its labels file are often someone else's, so they are read as
untrusted input: a bag id is a file name, never a path (no separators, no ``..``,
nothing that resolves outside the folder), a link that leads outside the folder
is refused unless ``follow_links=True``, ``.pt`` files are loaded with
``weights_only=True`` and refused when they would need code to load, and every
unreadable file is a one-line :class:`BagFileError` naming it.
"""
from __future__ import annotations

import errno
import os
import pickle
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

__all__ = ["BagFileError", "DiskBagDataset", "FEATURE_SUFFIXES", "write_bag_folder"]

FEATURE_SUFFIXES = (".npy", ".pt", ".h5", ".hdf5")
_NPY_MAGIC = b"\x93NUMPY"
# torch.save writes a zip archive; its legacy format (and any pickle of protocol 2 or later) starts with PROTO.
_PT_MAGICS = (b"PK\x03\x04", b"\x80")
_LINK_ADVICE = "refused unless you allow links out of the folder (--follow-links, follow_links=True)"
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class BagFileError(ValueError):
    """A bag folder, its labels file or one of its feature files cannot be used (one line, names the file)."""

    def __init__(self, message: str) -> None:
        # A stranger's file names may hold line breaks (a bag id is any text without a separator):
        # the message stays one line whatever they hold.
        super().__init__(_escape_breaks(message))


def _escape_breaks(text: str) -> str:
    return str(text).replace("\r", "\\r").replace("\n", "\\n")


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[0].split()) or type(exc).__name__
    # torch's advice to retry with weights_only=False is the one thing not to do with a stranger's file.
    return text.split(" Re-running `torch.load`")[0].split("(1) ")[0].rstrip(" .:")


def check_bag_id(bag_id: str, where: str) -> str:
    """``bag_id`` if it is a plain file name; a one-line :class:`BagFileError` otherwise."""
    text = str(bag_id)
    seps = {"/", "\\", os.sep} | ({os.altsep} if os.altsep else set())
    if text in ("", ".", "..") or any(c in text for c in seps) or "\x00" in text:
        raise BagFileError(f"{where}: bag id {text!r} is refused: bag ids are file names, not paths "
                           "(no '/', '\\', '..', NUL or empty ids).")
    return text


@dataclass(frozen=True)
class _BagFile:
    """Where one bag lives and the shape its header declares."""

    path: Path
    n_instances: int
    n_features: int


def _torch_load(path: Path):
    import torch

    try:
        # mmap keeps the storage on disk until rows are touched (zip-format files only).
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError:
        raise
    except RuntimeError:
        return torch.load(path, map_location="cpu", weights_only=True)


def _load_pt(path: Path, key: str):
    import torch

    with open(path, "rb") as fh:
        head = fh.read(4)
    if not head.startswith(_PT_MAGICS):
        # Text, HTML or random bytes: torch's own errors for these read like "101" or "invalid load key".
        what = "an empty file" if not head else "neither the zip archive torch.save writes nor a pickle"
        raise BagFileError(f"{path}: not a readable PyTorch tensor file ({what}).")
    try:
        obj = _torch_load(path)
    except pickle.UnpicklingError as exc:
        # weights_only=True refused it: a general pickle, which only the full loader (which runs code) reads.
        found = re.search(r"GLOBAL (\S+)", str(exc))
        detail = f"it calls {found.group(1)}" if found else "it pickles Python objects, not plain tensors"
        raise BagFileError(f"{path}: refused: loading it would run code ({detail}); save the features "
                           "with torch.save(tensor) or as .npy.") from None
    except Exception as exc:  # noqa: BLE001 - any failure of a stranger's file is a one-line input error
        raise BagFileError(f"{path}: not a readable PyTorch tensor file ({_first_line(exc)}).") from None
    if isinstance(obj, dict):
        if key not in obj:
            raise BagFileError(f"{path}: the saved dict has no {key!r} entry (keys: {sorted(map(str, obj))}).")
        obj = obj[key]
    if not isinstance(obj, torch.Tensor):
        raise BagFileError(f"{path}: expected a tensor or a dict with a {key!r} tensor, got {type(obj).__name__}.")
    return obj


def _h5_dataset(handle, path: Path, key: str, follow_links: bool):
    """The dataset ``key`` of an open HDF5 file, or None; links to other files refused.

    An HDF5 file can reach other files three ways: external links, external raw
    storage and virtual datasets. Any of them would let a shared ``.h5`` read a file
    outside the bag folder, so each is refused unless ``follow_links``. The path is
    walked one link at a time because h5py's ``key in group`` already opens the file
    an external link names.
    """
    import h5py

    if follow_links:
        node = handle.get(key)
    else:
        group, parts, node, hops = handle, [p for p in key.split("/") if p not in ("", ".")], None, 0
        if key.startswith("/"):
            group = handle["/"]
        while parts:
            name = parts.pop(0)
            if not isinstance(group, h5py.Group) or not group.id.links.exists(name.encode()):
                return None
            kind = group.id.links.get_info(name.encode()).type
            if kind == h5py.h5l.TYPE_SOFT:
                hops += 1
                if hops > 32:
                    raise BagFileError(f"{path}: a loop of HDF5 soft links at {key!r}.")
                target = group.id.links.get_val(name.encode()).decode(errors="replace")
                group = handle["/"] if target.startswith("/") else group
                parts = [p for p in target.split("/") if p not in ("", ".")] + parts
                continue
            if kind != h5py.h5l.TYPE_HARD:
                raise BagFileError(f"{path}: {key!r} is an HDF5 link to another file; {_LINK_ADVICE}.")
            node = group[name]
            group = node
    if not isinstance(node, h5py.Dataset):
        return None
    if not follow_links and (node.is_virtual or node.external):
        how = "a virtual dataset" if node.is_virtual else "stored in external raw files"
        raise BagFileError(f"{path}: {key!r} is {how}, which reads other files; {_LINK_ADVICE}.")
    return node


def _open_array(path: Path, key: str, follow_links: bool = False):
    """An array-like (supports ``.shape``, ``.dtype`` and row slicing) over the file's features.

    For ``.h5`` the caller must close the returned file handle (second value).
    """
    suffix = path.suffix.lower()
    if suffix == ".npy":
        with open(path, "rb") as fh:
            head = fh.read(len(_NPY_MAGIC))
        if head != _NPY_MAGIC:
            raise BagFileError(f"{path}: not a NumPy .npy file ({'empty' if not head else 'no .npy header'}).")
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False), None
        except ValueError as exc:
            # With mmap_mode numpy names object arrays "Python objects in dtype", without it "pickled data".
            if "pickled" in str(exc) or "Python objects" in str(exc):
                raise BagFileError(f"{path}: refused: it holds Python objects, and loading them would run "
                                   "code; save a numeric array.") from None
            raise BagFileError(f"{path}: not a plain numeric .npy array ({_first_line(exc)}).") from None
        except (OSError, EOFError) as exc:
            raise BagFileError(f"{path}: a damaged .npy file ({_first_line(exc)}).") from None
    if suffix == ".pt":
        return _load_pt(path, key), None
    import h5py

    try:
        handle = h5py.File(path, "r")
    except Exception as exc:  # noqa: BLE001 - h5py raises OSError and others for damaged files
        raise BagFileError(f"{path}: not a readable HDF5 file ({_first_line(exc)}).") from None
    try:
        dataset = _h5_dataset(handle, path, key, follow_links)
    except BagFileError:
        handle.close()
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged object header surfaces here, not at open
        handle.close()
        raise BagFileError(f"{path}: not a readable HDF5 file ({_first_line(exc)}).") from None
    if dataset is None:
        handle.close()
        raise BagFileError(f"{path}: no {key!r} dataset in the HDF5 file.")
    return dataset, handle


def _as_numpy(rows) -> np.ndarray:
    """Rows read from any of the three formats as a NumPy array (bf16/fp16 tensors widened)."""
    if hasattr(rows, "detach"):
        import torch

        rows = rows.detach()
        if rows.dtype in (torch.bfloat16, torch.float16):
            rows = rows.float()
        return rows.numpy()
    return np.asarray(rows)


def _kind_ok(dtype) -> bool:
    name = str(dtype).replace("torch.", "")
    try:
        return np.dtype(name).kind in "fiu"
    except TypeError:
        return name in ("bfloat16",)


class DiskBagDataset(Sequence):
    """A folder of per-bag feature files plus a CSV of bag ids and labels.

    Parameters
    ----------
    root : path
        Folder holding ``<bag id>.npy``, ``<bag id>.pt`` or ``<bag id>.h5`` files,
        each of shape (n_instances, n_features) (a 1-D array is one instance).
    labels : path
        CSV with one row per bag: a bag-id column and, for training, a label column.
        Only the bags it lists are used, in its order.
    bag_col, label_col : str
        Column names in ``labels`` (the CLI's ``--bag-col``/``--label-col``).
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
    are read. ``dataset[i]`` returns bag ``i`` as an array (a read-only memory map
    for ``.npy``); ``dataset[a:b]`` or ``dataset[[i, j]]`` a subset dataset.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        labels: str | os.PathLike,
        *,
        bag_col: str = "bag",
        label_col: str = "label",
        key: str = "features",
        check_finite: bool = True,
        name: str | None = None,
        follow_links: bool = False,
    ) -> None:
        import pandas as pd

        root, labels = Path(root), Path(labels)
        self.follow_links = bool(follow_links)
        if not root.is_dir():
            raise FileNotFoundError(f"Bag folder {root} does not exist or is not a folder.")
        if not labels.is_file():
            raise FileNotFoundError(f"Labels file {labels} does not exist.")
        if (labels.is_symlink() and not self.follow_links and labels.parent.resolve() == root.resolve()
                and not labels.resolve().is_relative_to(root.resolve())):
            # The folder's own labels file is the stranger's too; one named on purpose elsewhere is the user's.
            raise BagFileError(f"{labels} leads outside {root} (to {labels.resolve()}); {_LINK_ADVICE}.")
        try:
            table = pd.read_csv(labels, dtype={bag_col: str})
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise BagFileError(f"{labels}: not a readable CSV ({_first_line(exc)}).") from None
        if bag_col not in table.columns:
            raise BagFileError(f"{labels}: no bag-id column {bag_col!r} (columns: {list(table.columns)}).")
        if len(table) == 0:
            raise BagFileError(f"{labels}: lists no bags.")
        ids = table[bag_col]
        if ids.isna().any():
            raise BagFileError(f"{labels}: row {int(np.flatnonzero(ids.isna())[0]) + 2} has no bag id.")
        for bag_id in ids:
            check_bag_id(bag_id, str(labels))
        dup = ids[ids.duplicated()]
        if len(dup):
            raise BagFileError(f"{labels}: bag id {dup.iloc[0]!r} is listed twice.")
        y = None
        if label_col in table.columns:
            lab = table[label_col]
            if lab.isna().any():
                bad = int(np.flatnonzero(lab.isna())[0])
                raise BagFileError(f"{labels}: bag {ids.iloc[bad]!r} (row {bad + 2}) has no label.")
            y = lab.to_numpy()
        self.root, self.labels_path, self.key = root, labels, key
        self.check_finite = bool(check_finite)
        self.name = name or root.name
        self.columns = [str(c) for c in table.columns]
        self.bag_ids = ids.astype(str).to_numpy()
        self.y = y
        self._files = [self._inspect(str(b)) for b in self.bag_ids]
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
                raise BagFileError(f"{path} leads outside {self.root} (to {real}); {_LINK_ADVICE}.")
            if not real.is_file():
                # A folder, FIFO or device under a feature file's name: opening a FIFO would hang.
                what = "a folder" if real.is_dir() else "a special file (FIFO, device or socket)"
                raise BagFileError(f"{path}: {what}, not a feature file.")
            found.append(path)
        return found

    def _inspect(self, bag_id: str) -> _BagFile:
        found = self._candidates(bag_id)
        if not found:
            tried = ", ".join(repr(f"{bag_id}{s}") for s in FEATURE_SUFFIXES)
            raise FileNotFoundError(_escape_breaks(
                f"No feature file for bag {bag_id!r} in {self.root} (looked for {tried})."))
        if len(found) > 1:
            raise BagFileError(f"Bag {bag_id!r} has several feature files ({', '.join(p.name for p in found)}): keep one.")
        path = found[0]
        try:
            arr, handle = _open_array(path, self.key, self.follow_links)
        except BagFileError:
            raise
        except (OSError, EOFError) as exc:
            raise BagFileError(f"{path}: could not be read ({_first_line(exc)}).") from None
        try:
            shape, dtype = tuple(arr.shape), arr.dtype
        finally:
            if handle is not None:
                handle.close()
        if not _kind_ok(dtype):
            raise BagFileError(f"{path}: features must be numeric, got dtype {dtype}.")
        if len(shape) == 1:
            shape = (1, shape[0])
        if len(shape) != 2:
            raise BagFileError(f"{path}: features must be 2-D (instances x features); got shape {shape}.")
        if shape[0] == 0:
            raise BagFileError(f"{path}: the bag is empty; every bag needs at least one instance.")
        if shape[1] == 0:
            raise BagFileError(f"{path}: the bag has no features.")
        return _BagFile(path, int(shape[0]), int(shape[1]))

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
        """The bags at ``indices`` (positions, or a boolean mask) as a dataset of the same files."""
        idx = np.asarray(indices)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
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
        """
        f = self._files[i]
        try:
            arr, handle = _open_array(f.path, self.key, self.follow_links)
            try:
                if len(arr.shape) == 1:
                    out = _as_numpy(arr[:]).reshape(1, -1)[start:stop]
                else:
                    out = _as_numpy(arr[start:stop])
                out = out if out.flags.owndata else out.copy()  # not a view of the mapped file
            finally:
                if handle is not None:
                    handle.close()
        except BagFileError:
            raise
        except (OSError, EOFError, ValueError, RuntimeError) as exc:
            # The file changed or was truncated after the folder was opened.
            raise BagFileError(f"{f.path}: could not be read ({_first_line(exc)}).") from None
        if self.check_finite and out.dtype.kind == "f" and not np.isfinite(out).all():
            bad = np.argwhere(~np.isfinite(out))[0]
            raise BagFileError(
                f"{f.path} contains NaN or infinite values (first at instance {int(bad[0]) + start}, "
                f"feature {int(bad[1])})."
            )
        if self.check_finite and out.dtype.kind == "f" and np.abs(out).max(initial=0.0) > _FLOAT32_MAX:
            bad = np.argwhere(np.abs(out) > _FLOAT32_MAX)[0]
            raise BagFileError(f"{f.path} holds a value beyond float32's range (instance {int(bad[0]) + start}, "
                               f"feature {int(bad[1])}); rescale the features.")
        return out

    def instance_array(self, i: int, key: str) -> np.ndarray:
        """Another per-instance array of bag ``i``'s file: an HDF5 dataset or an entry of a saved dict.

        Slide-processing tools store more than the features per bag, CLAM and TRIDENT the
        ``"coords"`` of every patch on the slide; this reads one such array, which must have one
        row per instance (``minitorch-proto explain --coords-key``). ``.npy`` files hold one array only.
        """
        f = self._files[i]
        if f.path.suffix.lower() == ".npy":
            raise BagFileError(f"{f.path}: a .npy file holds the features only, no {key!r}; save the bags as .h5 "
                               "or as .pt dicts to keep per-instance arrays beside them.")
        arr, handle = _open_array(f.path, key, self.follow_links)
        try:
            out = np.atleast_1d(_as_numpy(arr[:]))
            out = out if out.flags.owndata else out.copy()
        finally:
            if handle is not None:
                handle.close()
        if len(out) != f.n_instances:
            raise BagFileError(f"{f.path}: {key!r} has {len(out)} rows but the bag has {f.n_instances} instances.")
        return out

    def chunks(self, i: int, chunk_size: int) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, rows)`` pieces of bag ``i``, ``chunk_size`` instances at a time."""
        n = self._files[i].n_instances
        for start in range(0, n, int(chunk_size)):
            yield start, self.rows(i, start, min(start + int(chunk_size), n))

    # ------------------------------------------------------------- metadata
    @property
    def sizes(self) -> np.ndarray:
        """Instances per bag, from the file headers (no bag is read)."""
        return np.array([f.n_instances for f in self._files], dtype=np.int64)

    @property
    def n_features(self) -> int:
        return self._files[0].n_features if self._files else 0

    @property
    def paths(self) -> list[Path]:
        return [f.path for f in self._files]

    # The CLI and report helpers treat a data set as an object with .bags, .n_bags and .source.
    @property
    def bags(self) -> "DiskBagDataset":
        return self

    @property
    def n_bags(self) -> int:
        return len(self)

    @property
    def source(self) -> str:
        return str(self.root)

    def summary(self) -> dict:
        """Counts in the shape of ``BagDataset.summary`` (bags, instances, features, sizes)."""
        s = self.sizes
        out = {"name": self.name, "bags": len(self), "instances": int(s.sum()), "features": self.n_features,
               "min_bag": int(s.min()), "median_bag": float(np.median(s)), "max_bag": int(s.max())}
        if self.y is not None:
            values, counts = np.unique(self.y, return_counts=True)
            out["classes"] = {str(v): int(c) for v, c in zip(values, counts)}
        return out

    def to_memory(self, dtype=np.float64) -> list[np.ndarray]:
        """Every bag as an in-memory array (only for collections that fit in memory)."""
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
    dtype=np.float32,
    instance_arrays: dict[str, Sequence[np.ndarray]] | None = None,
) -> Path:
    """Write bags one file per bag plus a labels CSV; return the CSV's path.

    Each file is written under a temporary name and renamed, and the CSV is written
    last, so an interrupted call never leaves a labels file pointing at half-written bags.

    Parameters
    ----------
    fmt : {"npy", "pt", "h5"}
        File type (``.pt`` holds a tensor; ``.h5`` a ``key`` dataset).
    dtype : numpy dtype
        Stored dtype (float32, as slide-processing tools write).
    instance_arrays : dict of str to sequences of ndarray, optional
        Per-instance arrays to store beside the features, one per bag with one row per instance,
        e.g. ``{"coords": ...}`` (``.h5`` datasets; a ``.pt`` file then holds a dict).
    """
    import pandas as pd

    if fmt not in ("npy", "pt", "h5"):
        raise ValueError(f"fmt must be 'npy', 'pt' or 'h5', got {fmt!r}.")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    ids = [str(b) for b in (bag_ids if bag_ids is not None else range(len(bags)))]
    if len(ids) != len(bags):
        raise ValueError(f"Got {len(bags)} bags but {len(ids)} bag ids.")
    for bag_id in ids:
        check_bag_id(bag_id, "bag_ids")
    extra = dict(instance_arrays or {})
    if extra and fmt == "npy":
        raise ValueError("instance_arrays need fmt='h5' or 'pt': a .npy file holds one array.")
    for name, arrays in extra.items():
        if name == key or len(arrays) != len(bags) or any(len(a) != len(b) for a, b in zip(arrays, bags)):
            raise ValueError(f"instance_arrays[{name!r}]: one array per bag, a row per instance, not named {key!r}.")
    for j, (bag_id, bag) in enumerate(zip(ids, bags)):
        arr = np.ascontiguousarray(np.asarray(bag, dtype=dtype))
        more = {name: np.ascontiguousarray(np.asarray(arrays[j])) for name, arrays in extra.items()}
        path = root / f"{bag_id}.{fmt}"
        if fmt == "npy":
            # np.save appends .npy to names without it: give it an open file instead.
            def write(tmp, arr=arr):
                with open(tmp, "wb") as fh:
                    np.save(fh, arr)
        elif fmt == "pt":
            import torch

            def write(tmp, arr=arr, more=more):
                tensors = {name: torch.from_numpy(a) for name, a in {key: arr, **more}.items()}
                torch.save(tensors if more else tensors[key], tmp)
        else:
            import h5py

            def write(tmp, arr=arr, more=more):
                with h5py.File(tmp, "w") as fh:
                    for name, a in {key: arr, **more}.items():
                        fh.create_dataset(name, data=a)
        _atomic_write(path, write)
    table = {bag_col: ids}
    if y is not None:
        if len(y) != len(ids):
            raise ValueError(f"Got {len(ids)} bags but {len(y)} labels.")
        table[label_col] = list(y)
    labels = root / labels_name
    _atomic_write(labels, lambda tmp: pd.DataFrame(table).to_csv(tmp, index=False))
    return labels
