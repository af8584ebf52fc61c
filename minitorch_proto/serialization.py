"""Model files that cannot run code, check their own integrity, and writes that never leave half a file.

The model file format (version 2) is a `safetensors <https://huggingface.co/docs/safetensors>`_
file: named tensors plus one JSON header stored in the safetensors metadata under
the key ``"minitorch_proto"``. safetensors holds only raw tensor bytes and strings,
so reading a file never executes anything in it (a pickle-based ``torch.save``
file can run arbitrary code when loaded).

The JSON header carries ``format``, ``version``, whatever the writer puts there
(configuration, class labels, feature names, training history...) and
``sha256``: a digest of every tensor's name, dtype, shape and bytes *and* of the
rest of the header. :func:`load_model_file` recomputes it, so a file damaged
by accident (a truncated copy, a flipped bit, a hand edit) fails with a one-line
:class:`ModelFileError` instead of giving quietly different predictions. The
digest detects damage; it does not prove who made the file: anyone can recompute
it (:func:`tensor_digest` is public). So the reader also validates the content
(the estimator's ``load``: header fields and types, tensors of the names and dtypes
its ``save`` writes, finite, with shapes that agree with the header, two or more
distinct classes kept as written, parameters that agree with the tensors). A file
from someone you do not trust is therefore loaded without running code and checked
for sense, but it can still hold a model that someone made to predict badly.

Files written by version 0.1 (``torch.save`` of a dict, "format 1") are read with
``torch.load(weights_only=True)`` and an explicit allow-list of the NumPy types
they hold; anything else in such a file is refused. They carry no checksum.

Files are written through :mod:`minitorch_proto.outputs` (whole or not at all); its path checks
and writers are re-exported here for earlier callers.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import struct
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from .outputs import (check_input_file, check_output_path, check_results_folder, staged_directory,  # noqa: F401
                      write_atomic)

if TYPE_CHECKING:  # torch is imported where it is used, so the CLI starts fast
    import torch

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "ModelFile",
    "ModelFileError",
    "check_input_file",
    "check_output_path",
    "load_model_file",
    "save_model_file",
    "staged_directory",
    "check_results_folder",
    "tensor_digest",
    "to_jsonable",
    "write_atomic",
]

FORMAT_NAME = "minitorch_proto.model"
FORMAT_VERSION = 2
_METADATA_KEY = "minitorch_proto"
# The legacy format-1 files were written by PrototypeMILClassifier.save of version 0.1.
_LEGACY_FORMAT = 1
# safetensors: 8-byte little-endian header length, then the JSON header. A header this
# large is not a model file of ours (it guards the json.loads below against huge reads).
_MAX_HEADER_BYTES = 100 * 1024 * 1024


class ModelFileError(ValueError):
    """A model file is missing, damaged, of an unknown format or unsafe to load."""


@dataclass
class ModelFile:
    """The content of a model file.

    Attributes
    ----------
    tensors : dict of str to torch.Tensor
        Every tensor, on the CPU.
    header : dict
        The JSON header, without ``sha256`` (already verified).
    legacy : bool
        True when read from a format-1 ``torch.save`` file (no checksum).
    """

    tensors: dict[str, torch.Tensor]
    header: dict = field(default_factory=dict)
    legacy: bool = False


# --------------------------------------------------------------------------- #
# Digest
# --------------------------------------------------------------------------- #
def _tensor_bytes(t: torch.Tensor) -> bytes:
    import torch

    t = t.detach().to("cpu").contiguous().reshape(-1)
    # A byte view works for every dtype, bfloat16 included (which NumPy lacks).
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _canonical_json(header: Mapping) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()


def tensor_digest(tensors: Mapping[str, torch.Tensor], header: Mapping | None = None) -> str:
    """Hex sha256 over the tensors (names, dtypes, shapes, bytes) and a JSON header.

    Parameters
    ----------
    tensors : mapping of str to torch.Tensor
    header : mapping, optional
        JSON-able values; a ``"sha256"`` key is ignored.

    Returns
    -------
    str
        64 hex digits; the order of ``tensors`` does not matter.
    """
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name]
        # Length-prefixed fields, so no two different layouts give the same byte stream.
        for part in (name.encode(), str(t.dtype).encode(), json.dumps(list(t.shape)).encode()):
            h.update(struct.pack("<Q", len(part)))
            h.update(part)
        data = _tensor_bytes(t)
        h.update(struct.pack("<Q", len(data)))
        h.update(data)
    rest = {k: v for k, v in (header or {}).items() if k != "sha256"}
    h.update(_canonical_json(rest))
    return h.hexdigest()


def to_jsonable(value):
    """``value`` with NumPy scalars/arrays and tuples turned into plain JSON types.

    Parameters
    ----------
    value : nested dicts, lists, tuples, NumPy values, str, int, float, bool or None

    Returns
    -------
    The same structure built from dict, list, str, int, float, bool and None.

    Raises
    ------
    TypeError
        For anything else (a random generator object, a function...), naming it.
    """
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"{type(value).__name__} cannot be written to a model file header.")


# --------------------------------------------------------------------------- #
# Save / load
# --------------------------------------------------------------------------- #
def _as_tensor(name: str, value) -> torch.Tensor:
    import torch

    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError(f"tensor {name!r} is an object array; only numeric arrays can be saved.")
        value = torch.from_numpy(np.ascontiguousarray(value))
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"tensor {name!r} is a {type(value).__name__}, not a torch.Tensor or NumPy array.")
    # clone: safetensors refuses tensors that share storage (tied weights, views).
    return value.detach().to("cpu").contiguous().clone()


def save_model_file(path: str | os.PathLike, tensors: Mapping[str, object], header: Mapping) -> Path:
    """Write tensors and a JSON header as one safetensors model file, atomically.

    Parameters
    ----------
    path : str or PathLike
        Destination; missing parent folders are created.
    tensors : mapping of str to torch.Tensor or numeric ndarray
        Any state dict (several models, ensembles, standardisation statistics...).
    header : mapping
        JSON-able values (configuration, class labels, feature names...). The keys
        ``format``, ``version`` and ``sha256`` are set here.

    Returns
    -------
    Path
        ``path``.
    """
    import safetensors.torch

    check_output_path(path, "file", "the model path")  # a folder there is a one-line error, not an OSError
    tens = {str(k): _as_tensor(str(k), v) for k, v in tensors.items()}
    head = {k: v for k, v in header.items() if k not in ("format", "version", "sha256")}
    head.update(format=FORMAT_NAME, version=FORMAT_VERSION)
    try:
        _canonical_json(head)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the model file header is not JSON-serialisable: {exc}") from exc
    head["sha256"] = tensor_digest(tens, head)
    data = safetensors.torch.save(tens, metadata={_METADATA_KEY: json.dumps(head, allow_nan=True)})
    return write_atomic(path, data)


def _damaged(path: Path, why: str) -> ModelFileError:
    return ModelFileError(f"{path} is damaged or not a minitorch_proto model file ({why}).")


def _read_header(path: Path, data: bytes, size: int) -> dict:
    """The model header from ``data`` (the file's first bytes: the length and the JSON header) of a ``size``-byte file."""
    if size < 8:
        raise _damaged(path, f"only {size} bytes")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(size - 8, _MAX_HEADER_BYTES):
        raise _damaged(path, "bad safetensors header length")
    try:
        outer = json.loads(data[8 : 8 + n].decode("utf-8"))
        meta = outer.get("__metadata__") or {}
        text = meta.get(_METADATA_KEY)
    except (UnicodeDecodeError, ValueError, AttributeError, RecursionError) as exc:
        # RecursionError: JSON nested thousands deep, which json gives up on instead of raising ValueError.
        raise _damaged(path, f"unreadable safetensors header: {type(exc).__name__}") from None
    if text is None:
        raise ModelFileError(
            f"{path} is a safetensors file but not a minitorch_proto model file (no {_METADATA_KEY!r} metadata)."
        )
    if not isinstance(text, str):
        # safetensors metadata values are strings; json.loads would raise TypeError on any other JSON value.
        kind = {dict: "an object", list: "an array", bool: "a boolean"}.get(type(text), "a number")
        raise _damaged(path, f"its {_METADATA_KEY!r} metadata is {kind}; it must be text, the model header as JSON")
    try:
        header = json.loads(text)
    except (ValueError, RecursionError):
        raise _damaged(path, "unreadable model header") from None
    if not isinstance(header, dict):
        raise ModelFileError(f"{path} is not a minitorch_proto model file (its header is a "
                             f"{type(header).__name__}, not an object).")
    if header.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path} is not a minitorch_proto model file (format {header.get('format')!r}).")
    return header


def _torch_saved(head: bytes) -> bool:
    """Whether a file's first bytes are torch.save's: a zip archive (PK..) or, serialised the old way, a pickle."""
    return head[:4] == b"PK\x03\x04" or head[:1] == b"\x80"


def is_model_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a model file, judged by its header alone (the tensors are neither read nor verified).

    For a command about to replace a file: a safetensors model file whose tensors are damaged is still
    one, while a spreadsheet (a zip), a JSON file or another torch file (a bag's features) is not. A file of
    the 0.1 format (``torch.save``, a zip or a raw pickle) is read with ``weights_only=True`` to tell.
    """
    p = Path(path)
    size = p.stat().st_size
    with open(p, "rb") as fh:
        head = fh.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
        if 0 < n <= min(size - 8, _MAX_HEADER_BYTES):
            with contextlib.suppress(ModelFileError):
                return bool(_read_header(p, head + fh.read(n), size))
    if not _torch_saved(head):
        return False
    try:
        with warnings.catch_warnings():  # "save it again" is no advice for a file about to be replaced
            warnings.simplefilter("ignore")
            _load_legacy(p)
    except ModelFileError:
        return False
    return True


def load_model_file(path: str | os.PathLike) -> ModelFile:
    """Read and verify a model file written by :func:`save_model_file` (or a legacy one).

    Parameters
    ----------
    path : str or PathLike

    Returns
    -------
    ModelFile

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    ModelFileError
        (a ``ValueError``) with a one-line message if the path is a folder or an
        empty file, the file is damaged (the checksum differs), of another format,
        written by a newer version, or a legacy file holding anything besides
        tensors, arrays and plain values (which would need code to run).
    """
    try:
        p = check_input_file(path, "model file")
    except ValueError as exc:
        raise ModelFileError(str(exc)) from None
    # safetensors starts with its JSON header's length, then "{"; torch.save writes a zip
    # archive (PK..) or, with the old serialisation, a raw pickle (0x80). The safetensors
    # test comes first: its length's low byte may itself be 0x80. Only the header is read
    # before it is checked: a slide or a feature file passed as --model by mistake is not
    # read whole to be refused.
    size = p.stat().st_size
    with open(p, "rb") as fh:
        head = fh.read(9)
        n = struct.unpack("<Q", head[:8])[0] if len(head) >= 8 else 0
        looks_safetensors = len(head) > 8 and head[8:9] == b"{" and n <= size - 8
        if looks_safetensors and n <= _MAX_HEADER_BYTES:
            head += fh.read(n - 1)
    if not looks_safetensors and _torch_saved(head):
        return _load_legacy(p)
    header = _read_header(p, head, size)
    version = header.get("version")
    if type(version) is not int or not 1 <= version <= FORMAT_VERSION:  # bool is an int to isinstance
        raise ModelFileError(
            f"{p} has model-file version {version!r}; this minitorch_proto reads versions 1 to "
            f"{FORMAT_VERSION}{': upgrade the package' if type(version) is int and version > 1 else ''}."
        )
    import safetensors.torch

    data = p.read_bytes()
    try:
        tensors = safetensors.torch.load(data)
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
        raise _damaged(p, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    expected = header.pop("sha256", None)
    if not isinstance(expected, str) or tensor_digest(tensors, header) != expected:
        raise ModelFileError(
            f"{p} failed its integrity check: the sha256 of its tensors and header differs from the one "
            "recorded when it was saved (the file is damaged or was modified)."
        )
    return ModelFile(tensors=tensors, header=header)


def _numpy_safe_globals() -> list:
    """The NumPy callables and types a pickled float/int array needs, and nothing else."""
    from numpy import dtypes

    try:
        from numpy._core.multiarray import _reconstruct, scalar
    except ImportError:  # NumPy < 2
        from numpy.core.multiarray import _reconstruct, scalar
    kinds = [getattr(dtypes, n) for n in ("Float64DType", "Float32DType", "Int64DType", "Int32DType",
                                           "BoolDType", "StrDType") if hasattr(dtypes, n)]
    return [_reconstruct, scalar, np.ndarray, np.dtype, *kinds]


def _load_legacy(path: Path) -> ModelFile:
    import torch

    try:
        with torch.serialization.safe_globals(_numpy_safe_globals()):
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - UnpicklingError, RuntimeError, zip errors...
        # torch's own message is many lines and offers weights_only=False, which must never be used here.
        unsafe = re.search(r"GLOBAL ([\w.]+)", str(exc))
        if unsafe is None:  # a zip that is not torch's (an .npz), or a file cut short: not a safety matter
            raise _damaged(path, f"not a readable torch file: {type(exc).__name__}") from None
        raise ModelFileError(
            f"{path} is a torch pickle file that cannot be loaded safely (it refers to {unsafe.group(1)}); it was "
            "refused without running anything in it: train the model again to get a safe file."
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != _LEGACY_FORMAT:
        raise ModelFileError(f"{path} is a torch file but not a minitorch_proto model file.")
    try:
        params = json.loads(payload["params"])
        std = payload["standardizer"]
        tensors = {f"model/{k}": v for k, v in payload["state_dict"].items()}
        for key in ("mean", "scale"):
            if std.get(key) is not None:
                tensors[f"standardizer/{key}"] = torch.from_numpy(np.asarray(std[key], dtype=np.float64))
        header = {
            "estimator": "PrototypeMILClassifier",
            "params": params,
            "classes": list(payload["classes"]),
            "n_features_in": int(payload["n_features"]),
            "feature_names_in": None,
            "standardizer": {"mode": std["mode"]},
            "history": payload.get("history", []),
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _damaged(path, f"legacy checkpoint lacks {exc}") from None
    warnings.warn(
        f"{path} uses the old model-file format (no checksum); save it again to get a verified file.",
        UserWarning,
        stacklevel=3,
    )
    return ModelFile(tensors=tensors, header=header, legacy=True)
