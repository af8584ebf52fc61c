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
(the estimator's ``load``: header fields and types, finite tensors, shapes that
agree with the header, two or more distinct classes). A file from someone you do
not trust is therefore loaded without running code and checked for sense, but it
can still hold a model that someone made to predict badly.

Files written by version 0.1 (``torch.save`` of a dict, "format 1") are read with
``torch.load(weights_only=True)`` and an explicit allow-list of the NumPy types
they hold; anything else in such a file is refused. They carry no checksum.

The second half of the module writes output files safely: :func:`check_output_path`
(validate an ``--out`` path before any work), :func:`write_atomic` (temporary file
+ :func:`os.replace`, with the permissions the umask gives a new file) and
:func:`staged_directory` (several files published together).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import struct
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

import numpy as np

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
#: The file :func:`staged_directory` leaves in a results folder, naming the files of the last run.
RUN_MANIFEST = ".minitorch_proto_run"


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


def check_input_file(path: str | os.PathLike, what: str = "file") -> Path:
    """Check that ``path`` names an existing, non-empty, readable regular file.

    Parameters
    ----------
    path : str or PathLike
    what : str
        What the file is, for the message (e.g. ``"--model"``).

    Returns
    -------
    Path

    Raises
    ------
    FileNotFoundError
        If nothing is at ``path``.
    ValueError
        If it is a folder, empty or unreadable.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what} {p}: no such file.")
    if p.is_dir():
        raise ValueError(f"{what} {p} is a folder; give a file.")
    if not p.is_file():
        raise ValueError(f"{what} {p} is not a regular file.")
    if p.stat().st_size == 0:
        raise ValueError(f"{what} {p} is empty.")
    if not os.access(p, os.R_OK):
        raise ValueError(f"{what} {p} is not readable (permission denied).")
    return p


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
    if not looks_safetensors and (head[:4] == b"PK\x03\x04" or head[:1] == b"\x80"):
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


# --------------------------------------------------------------------------- #
# Writing files safely
# --------------------------------------------------------------------------- #
def _umask() -> int:
    # os.umask can only be read by setting it; it is restored at once.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _new_file_mode() -> int:
    """Permissions a newly created file would get (0o666 minus the umask)."""
    return 0o666 & ~_umask()


def _nearest_existing(path: Path) -> Path:
    for parent in [path, *path.parents]:
        if parent.exists():
            return parent
    return Path(".")


def check_output_path(path: str | os.PathLike, kind: str = "file", what: str = "--out") -> Path:
    """Check, before any work, that results can be written to ``path``.

    Parameters
    ----------
    path : str or PathLike
    kind : {"file", "dir"}
        Whether ``path`` will be a file or a folder of files.
    what : str
        Name of the option, for the message.

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        With one line naming the problem: the path is a folder where a file is
        expected (or a file where a folder is), lies under a file, or its folder
        is not writable. Missing folders are fine (they are created on writing)
        as long as the nearest existing one is writable.
    """
    if kind not in ("file", "dir"):
        raise ValueError(f"kind must be 'file' or 'dir', got {kind!r}.")
    p = Path(path).expanduser()
    if str(path) == "":
        raise ValueError(f"{what} is empty; give a path.")
    if kind == "file" and str(path).endswith(("/", os.sep)):  # Path() drops the slash that says "a folder"
        raise ValueError(f"{what} {path} ends with a separator, which names a folder; give a file path.")
    if kind == "file" and p.is_dir():
        raise ValueError(f"{what} {p} is a folder; give a file path.")
    if kind == "dir" and p.exists() and not p.is_dir():
        raise ValueError(f"{what} {p} is a file; give a folder.")
    if kind == "file" and p.exists() and not p.is_file():
        raise ValueError(f"{what} {p} exists and is not a regular file.")
    start = p if (kind == "dir" and p.is_dir()) else p.parent
    base = _nearest_existing(start)
    if not base.is_dir():
        raise ValueError(f"{what} {p} cannot be created: {base} is a file, not a folder.")
    # Try to create a file: os.access is wrong for root, read-only mounts and ACLs.
    try:
        with tempfile.TemporaryFile(dir=base, prefix=".minitorch_proto_probe"):
            pass
    except OSError as exc:
        raise ValueError(f"{what} {p} cannot be written: folder {base} is not writable ({exc.strerror}).") from None
    return p


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` through a temporary file and :func:`os.replace`.

    Readers see the old file or the complete new one, never a part; after a crash
    at most a hidden ``.part`` file is left beside ``path``. The file gets the
    permissions the umask gives any new file (``tempfile`` alone would give 0600).

    Parameters
    ----------
    path : str or PathLike
        Destination; missing parent folders are created.
    data : bytes or str
        str is written as UTF-8.

    Returns
    -------
    Path
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The name's first 40 characters: a long but legal target name would give a too long temporary one.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _new_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _manifest(folder: Path) -> tuple[str | None, set[str]] | None:
    """(command, files) of the run a results folder holds; None when it holds no manifest."""
    path = folder / RUN_MANIFEST
    if not path.is_file():
        return None
    lines = path.read_text().splitlines()
    command = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("# command:")), None)
    return command, {ln for ln in lines if ln and not ln.startswith("#")}


def check_results_folder(out: str | os.PathLike, command: str, names: Sequence[str], what: str = "--out") -> None:
    """Refuse, before any work, a results folder holding another command's run or files no run recorded.

    A run replaces its own earlier run's files together (:func:`staged_directory`); it must not
    replace a ``reproduce`` run with a ``compare`` one, or a user's own ``results.csv``.
    """
    folder = Path(out).expanduser()
    if not folder.is_dir():
        return
    held = _manifest(folder)
    if held is None:
        clash = sorted(n for n in names if (folder / n).exists())
        if clash:
            raise ValueError(f"{what} {folder} already holds {', '.join(clash)}, which no minitorch_proto run "
                             "recorded; choose another folder, or move those files away.")
    elif held[0] is not None and held[0] != command:
        raise ValueError(f"{what} {folder} holds a '{held[0]}' run; this {command} run would replace it: choose "
                         "another folder, or delete that one first.")


@contextlib.contextmanager
def staged_directory(out: str | os.PathLike, command: str | None = None) -> Iterator[Path]:
    """Write several result files together: all of them reach ``out``, or none.

    Yields a temporary folder beside ``out``; write the files there. On a normal
    exit they are moved into ``out`` (created if missing); on an exception the
    temporary folder is removed and ``out`` is untouched. When ``out`` does not
    exist yet, the whole folder appears in one rename. A manifest
    (:data:`RUN_MANIFEST`) lists the files of the run, so the next run into the same
    folder removes those of the previous run it does not write again (no stale
    ``tuning_choices.csv`` beside new results); files it did not write are kept.

    Parameters
    ----------
    out : str or PathLike
    command : str, optional
        Recorded in the manifest, for :func:`check_results_folder`.

    Yields
    ------
    Path
        The staging folder.
    """
    from .utils import ctrl_c_deferred  # utils imports torch, which this module leaves to its callers

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name[:40]}.", suffix=".part"))
    try:
        yield stage
        mode = _new_file_mode()
        for f in stage.rglob("*"):
            if f.is_file():
                os.chmod(f, mode)
        written = sorted(str(f.relative_to(stage)) for f in stage.rglob("*") if f.is_file())
        (stage / RUN_MANIFEST).write_text((f"# command: {command}\n" if command else "") + "\n".join(written) + "\n")
        os.chmod(stage / RUN_MANIFEST, mode)
        if not out.exists():
            os.chmod(stage, 0o777 & ~_umask())  # mkdtemp made it 0700
            os.rename(stage, out)
            return
        held = _manifest(out)
        stale = held[1] - set(written) if held else set()
        # Every file is complete before the first one is published: the renames below are all that
        # separates the old set from the new one, and Ctrl-C waits for them (never half of each).
        with ctrl_c_deferred():
            for f in sorted(stage.rglob("*")):
                target = out / f.relative_to(stage)
                if f.is_dir():
                    target.mkdir(exist_ok=True)
                else:
                    os.replace(f, target)
            for name in stale:
                old = (out / name).resolve()
                if old.is_file() and old.is_relative_to(out.resolve()):
                    old.unlink()
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
