"""Fuzzing the bag-folder reader: whatever a stranger's folder holds, it loads or fails in one line (issue 29).

Random bag ids (separators, ``..``, absolute paths, unicode, empty), random file contents
(valid arrays in the three formats, truncated, text, empty, object and complex arrays,
pickles that would run code, 3-D arrays, missing files, links out of the folder, ``.h5``
files that reach other files) and random labels. Every case must
either load, with every bag readable, or raise the package's error for bad input
(:class:`BagFileError`, or ``FileNotFoundError`` for a missing file) whose message is one
line; and no file outside the folder may be opened, which an audit hook watching every
``open`` of this process checks, with a canary file beside the folder. HDF5 opens files
from C, out of the audit hook's sight, so the canaries beside the folder hold a value
(777) that no bag may come back with.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from minitorch_proto import cli
from minitorch_proto.data.disk import BagFileError, DiskBagDataset

_OPENED: list[str] = []
_WATCHING = [False]
CANARY_VALUE = 777.0


def _hook(event, args):
    # An audit hook cannot be removed; it records only while a test switches it on.
    if _WATCHING[0] and event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_hook)


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo fuzz-pickle-ran",))


KINDS = ["npy", "pt", "h5", "npy_truncated", "npy_text", "npy_empty", "npy_object", "npy_complex", "npy_3d",
         "pt_pickle", "pt_text", "pt_truncated", "h5_bad", "missing", "link_out", "dir",
         "h5_extlink", "h5_external", "h5_virtual"]
ODD_IDS = ["../secret", "..", ".", "a/b", "x\\y", "", " ", "é", "slide 01", "0001", "/tmp/secret", "🙂"]


def _write(root: Path, bag_id: str, kind: str, rng: np.random.Generator, canary: Path) -> None:
    arr = rng.normal(size=(int(rng.integers(1, 4)), 3)).astype(np.float32)
    target = root / f"{bag_id}.{kind.split('_')[0] if kind not in ('missing', 'link_out', 'dir') else 'npy'}"
    if kind == "npy":
        np.save(target, arr)
    elif kind == "pt":
        torch.save(torch.as_tensor(arr), target)
    elif kind == "h5":
        import h5py

        with h5py.File(target, "w") as fh:
            fh["features"] = arr
    elif kind == "npy_truncated":
        np.save(target, arr)
        target.write_bytes(target.read_bytes()[: int(rng.integers(1, 60))])
    elif kind == "npy_text":
        target.write_text("1,2,3\n4,5,6\n")
    elif kind == "npy_empty":
        target.write_bytes(b"")
    elif kind == "npy_object":
        with open(target, "wb") as fh:
            np.save(fh, np.array([{"k": 1}, None], dtype=object), allow_pickle=True)
    elif kind == "npy_complex":
        np.save(target, arr.astype(np.complex64))
    elif kind == "npy_3d":
        np.save(target, arr[None])
    elif kind == "pt_pickle":
        torch.save({"features": torch.zeros(2, 3), "x": _Evil()}, target)
    elif kind == "pt_text":
        target.write_text("not a tensor")
    elif kind == "pt_truncated":
        torch.save(torch.as_tensor(arr), target)
        target.write_bytes(target.read_bytes()[:40])
    elif kind == "h5_bad":
        target.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\x00" * 20)
    elif kind in ("h5_extlink", "h5_external", "h5_virtual"):
        import h5py

        with h5py.File(target, "w") as fh:
            if kind == "h5_extlink":
                fh["features"] = h5py.ExternalLink(str(canary.with_suffix(".h5")), "features")
            elif kind == "h5_external":
                fh.create_dataset("features", shape=(2, 3), dtype="<f8",
                                  external=[(str(canary.with_suffix(".raw")), 0, 48)])
            else:
                layout = h5py.VirtualLayout(shape=(2, 3), dtype="f8")
                layout[:] = h5py.VirtualSource(str(canary.with_suffix(".h5")), "features", shape=(2, 3))
                fh.create_virtual_dataset("features", layout)
    elif kind == "link_out":
        os.symlink(canary, target)
    elif kind == "dir":
        target.mkdir()


def _write_canaries(canary: Path) -> None:
    """Files beside the folder, in each format, holding a value no bag of the folder holds."""
    import h5py

    np.save(canary, np.full((2, 3), CANARY_VALUE))
    with h5py.File(canary.with_suffix(".h5"), "w") as fh:
        fh["features"] = np.full((2, 3), CANARY_VALUE)
    canary.with_suffix(".raw").write_bytes(np.full(6, CANARY_VALUE, dtype="<f8").tobytes())


def _safe_name(bag_id: str) -> bool:
    return bag_id not in ("", ".", "..") and not any(c in bag_id for c in "/\\\x00")


def _clean(ids, kinds, labels) -> bool:
    """Nothing a reader should refuse: distinct plain ids, valid arrays, labels 0/1 or yes/no."""
    used = labels[: len(ids)]
    return (len(set(ids)) == len(ids) and all(i.isascii() and i.isalnum() for i in ids)
            and all(k in ("npy", "pt", "h5") for k in kinds[: len(ids)])
            and (all(v in (0, 1) and not isinstance(v, str) for v in used) or all(v in ("yes", "no") for v in used)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ids=st.lists(st.one_of(st.sampled_from(ODD_IDS), st.text(min_size=0, max_size=6),
                           st.from_regex(r"b[0-9]{1,3}", fullmatch=True)), min_size=1, max_size=5),
    kinds=st.lists(st.sampled_from(KINDS), min_size=5, max_size=5),
    labels=st.lists(st.one_of(st.integers(-1, 2), st.sampled_from(["yes", "no", "", "1.0"])), min_size=5,
                    max_size=5),
    seed=st.integers(0, 2**16),
)
@example(ids=["b1", "b22", "0001"], kinds=["npy", "pt", "h5", "dir", "dir"], labels=[0, 1, 1, 0, 0], seed=0)  # clean
def test_a_strangers_folder_loads_or_fails_in_one_line(ids, kinds, labels, seed):
    base = Path(tempfile.mkdtemp(prefix="fuzzbags"))
    try:
        root, canary = base / "bags", base / "secret.npy"
        root.mkdir()
        _write_canaries(canary)
        rng = np.random.default_rng(seed)
        for bag_id, kind in zip(ids, kinds):
            if _safe_name(bag_id) and not (root / bag_id).exists():
                try:
                    _write(root, bag_id, kind, rng, canary)
                except OSError:
                    pass  # a name this file system refuses (e.g. too long): the reader must still cope
        with open(root / "labels.csv", "w", encoding="utf-8") as fh:
            fh.write("bag,label\n" + "".join(f'"{b}",{lab}\n' for b, lab in zip(ids, labels)))
        _OPENED.clear()
        _WATCHING[0] = True
        try:
            ds = DiskBagDataset(root, root / "labels.csv")
            for i in range(len(ds)):
                assert np.isfinite(ds[i]).all() and not (np.asarray(ds[i]) == CANARY_VALUE).any()
            event("loaded")
        except (BagFileError, FileNotFoundError) as exc:
            event(f"refused: {type(exc).__name__}")
            assert "\n" not in str(exc) and str(exc).strip()
            # A reader that refuses everything would pass the lines above: a folder with nothing wrong loads.
            assert not _clean(ids, kinds, labels), f"a clean folder was refused: {exc}"
            assert "weights_only=False" not in str(exc)
        finally:
            _WATCHING[0] = False
        outside = [p for p in _OPENED if Path(p).is_absolute() and str(base) in p
                   and not Path(os.path.realpath(p)).is_relative_to(root.resolve())]
        assert not outside, f"opened outside the folder: {outside}"
        assert str(canary) not in _OPENED
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("kind", ["npy_text", "pt_pickle", "npy_3d", "link_out", "h5_bad", "h5_extlink",
                                  "h5_external", "dir", "pt_text"])
def test_the_cli_exits_2_on_bad_folders(kind, tmp_path, capsys):
    root, canary = tmp_path / "bags", tmp_path / "secret.npy"
    root.mkdir()
    _write_canaries(canary)
    rng = np.random.default_rng(0)
    for i in range(4):
        _write(root, f"b{i}", "npy", rng, canary)
    _write(root, "b4", kind, rng, canary)
    (root / "labels.csv").write_text("bag,label\n" + "".join(f"b{i},{i % 2}\n" for i in range(5)))
    code = cli.main(["train", "--bags-dir", str(root), "--epochs", "1", "--out", str(tmp_path / "m.safetensors")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: ") and "b4." in err
    assert not (tmp_path / "m.safetensors").exists()
