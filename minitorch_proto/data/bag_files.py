"""One bag's feature file, opened as untrusted input: ``.npy``, ``.pt`` or ``.h5``.

The formats' own loaders trust their files: ``torch.load`` can run code, an HDF5 file can
read other files through links, and each fails on a bad file with its own many-line
error. Here each format is checked (magic bytes, ``weights_only=True``, no links out of
the folder unless asked) and every failure is a one-line :class:`BagFileError` naming
the file. :mod:`minitorch_proto.data.disk` builds the lazy dataset on these (``open_array``,
``as_numpy``, ``BagFile`` and the message helpers are its; ``__all__`` holds what users need).
"""
from __future__ import annotations

import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["BagFileError", "FEATURE_SUFFIXES", "check_bag_id"]

FEATURE_SUFFIXES = (".npy", ".pt", ".h5", ".hdf5")
_NPY_MAGIC = b"\x93NUMPY"
# torch.save writes a zip archive; its legacy format (and any pickle of protocol 2 or later) starts with PROTO.
_PT_MAGICS = (b"PK\x03\x04", b"\x80")
LINK_ADVICE = "refused unless you allow links out of the folder (--follow-links, follow_links=True)"


class BagFileError(ValueError):
    """A bag folder, its labels file or one of its feature files cannot be used (one line, names the file)."""

    def __init__(self, message: str) -> None:
        # A stranger's file names may hold line breaks (a bag id is any text without a separator):
        # the message stays one line whatever they hold.
        super().__init__(escape_breaks(message))


def escape_breaks(text: str) -> str:
    """``text`` with its line breaks written as ``\\r`` and ``\\n``, so a message naming it stays one line."""
    return str(text).replace("\r", "\\r").replace("\n", "\\n")


def first_line(exc: BaseException) -> str:
    """The first line of a library's error, for a one-line message (torch's unsafe advice cut off)."""
    text = " ".join(str(exc).split("\n")[0].split()) or type(exc).__name__
    # torch's advice to retry with weights_only=False is the one thing not to do with a stranger's file.
    return text.split(" Re-running `torch.load`")[0].split("(1) ")[0].rstrip(" .:")


#: How to read an array stored under another name (CLAM and TRIDENT write 'features' and 'coords').
KEY_ADVICE = ("name the one to read: --features-key for the features (key= in Python), --coords-key for the "
              "coordinates")


def check_bag_id(bag_id: str, where: str) -> str:
    """``bag_id`` if it is a plain file name; a one-line :class:`BagFileError` otherwise."""
    text = str(bag_id)
    seps = {"/", "\\", os.sep} | ({os.altsep} if os.altsep else set())
    if text in ("", ".", "..") or any(c in text for c in seps) or "\x00" in text:
        raise BagFileError(f"{where}: bag id {text!r} is refused: bag ids are file names, not paths "
                           "(no '/', '\\', '..', NUL or empty ids).")
    # The file is <id>.npy/.pt/.h5 (and, written, a hidden temporary beside it): most file systems stop at 255 bytes.
    if len(os.fsencode(text)) > MAX_BAG_ID_BYTES:
        raise BagFileError(f"{where}: bag id {text[:40]!r}... is {len(os.fsencode(text))} bytes long; a bag id names "
                           f"its file, and file names stop at 255 bytes: keep ids under {MAX_BAG_ID_BYTES + 1}.")
    return text


#: Longest bag id: its file name, with a suffix and a writer's temporary prefix, must stay under 255 bytes.
MAX_BAG_ID_BYTES = 200


@dataclass(frozen=True)
class BagFile:
    """Where one bag lives and the shape its header declares."""

    path: Path
    n_instances: int
    n_features: int


#: The last legacy-format .pt file read whole, by (path, mtime, size): its chunks are read one after another,
#: and reading the file again for every chunk made one pass over a bag cost (size / chunk_size) whole reads.
_LEGACY_PT: dict = {}


def _torch_load(path: Path):
    import torch

    try:
        # mmap keeps the storage on disk until rows are touched (zip-format files only).
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError:
        raise
    except RuntimeError:  # torch's legacy (non-zip) format cannot be mapped: read whole, kept for the next chunk
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key not in _LEGACY_PT:
            _LEGACY_PT.clear()
            _LEGACY_PT[key] = torch.load(path, map_location="cpu", weights_only=True)
        return _LEGACY_PT[key]


def _load_pt(path: Path, key: str, entry_only: bool = False):
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
        raise BagFileError(f"{path}: not a readable PyTorch tensor file ({first_line(exc)}).") from None
    if isinstance(obj, dict):
        if key not in obj:
            raise BagFileError(f"{path}: the saved dict has no {key!r} entry (keys: {sorted(map(str, obj))}); "
                               f"{KEY_ADVICE}.")
        obj = obj[key]
    elif entry_only:  # one saved tensor is the features: it is not the other array asked for
        raise BagFileError(f"{path}: holds one tensor (the features), no {key!r}; save a dict of tensors to keep "
                           "per-instance arrays beside the features.")
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
                raise BagFileError(f"{path}: {key!r} is an HDF5 link to another file; {LINK_ADVICE}.")
            node = group[name]
            group = node
    if not isinstance(node, h5py.Dataset):
        return None
    if not follow_links and (node.is_virtual or node.external):
        how = "a virtual dataset" if node.is_virtual else "stored in external raw files"
        raise BagFileError(f"{path}: {key!r} is {how}, which reads other files; {LINK_ADVICE}.")
    return node


def open_array(path: Path, key: str, follow_links: bool = False, entry_only: bool = False):
    """An array-like (supports ``.shape``, ``.dtype`` and row slicing) over the file's features.

    For ``.h5`` the caller must close the returned file handle (second value). ``entry_only``: a
    ``.pt`` file must hold a dict with ``key`` (a single tensor is the features, not ``key``).
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
            if "mmap length" in str(exc):  # numpy's words for a file shorter than its header says
                raise BagFileError(f"{path}: truncated: its header describes more values than the file holds "
                                   "(an interrupted copy?).") from None
            raise BagFileError(f"{path}: not a plain numeric .npy array ({first_line(exc)}).") from None
        except (OSError, EOFError) as exc:
            raise BagFileError(f"{path}: a damaged .npy file ({first_line(exc)}).") from None
    if suffix == ".pt":
        return _load_pt(path, key, entry_only), None
    import h5py

    try:
        handle = h5py.File(path, "r")
    except Exception as exc:  # noqa: BLE001 - h5py raises OSError and others for damaged files
        raise BagFileError(f"{path}: not a readable HDF5 file ({first_line(exc)}).") from None
    try:
        dataset = _h5_dataset(handle, path, key, follow_links)
    except BagFileError:
        handle.close()
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged object header surfaces here, not at open
        handle.close()
        raise BagFileError(f"{path}: not a readable HDF5 file ({first_line(exc)}).") from None
    if dataset is None:
        held = sorted(name for name in handle.keys())[:5] if hasattr(handle, "keys") else []
        handle.close()
        raise BagFileError(f"{path}: no {key!r} dataset in the HDF5 file (it holds {held}); {KEY_ADVICE}.")
    return dataset, handle


def as_numpy(rows) -> np.ndarray:
    """Rows read from any of the three formats as a NumPy array (bf16/fp16 tensors widened)."""
    if hasattr(rows, "detach"):
        import torch

        rows = rows.detach()
        if rows.dtype in (torch.bfloat16, torch.float16):
            rows = rows.float()
        return rows.numpy()
    return np.asarray(rows)


def kind_ok(dtype) -> bool:
    """Whether a file's dtype (NumPy's or torch's) holds real numbers: float, int, unsigned or bf16."""
    name = str(dtype).replace("torch.", "")
    try:
        return np.dtype(name).kind in "fiu"
    except TypeError:
        return name in ("bfloat16",)
