"""Writing results so that no reader sees half of them, and checking paths before any work.

:func:`check_input_file` and :func:`check_output_path` refuse a path that cannot be used, in one
line, before anything is computed; :func:`write_atomic` writes one file through a temporary file
and :func:`os.replace` (with the permissions of the file it replaces, or those the umask gives a new
file); :func:`write_together` writes several files that belong together, all or none;
:func:`staged_directory` publishes a results folder whole, with a manifest (:data:`RUN_MANIFEST`)
naming the run's files and the command that made them, which :func:`check_results_folder` reads
before the next run.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterator, Mapping, Sequence

__all__ = ["RUN_MANIFEST", "check_input_file", "check_output_path", "check_results_folder", "staged_directory",
           "write_atomic", "write_together"]

#: The file :func:`staged_directory` leaves in a results folder, naming the files of the last run.
RUN_MANIFEST = ".minitorch_proto_run"


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
    with _usable_path(what, p):
        return _check_input_file(p, what)


@contextlib.contextmanager
def _usable_path(what: str, p) -> Iterator[None]:
    """A path test's own OSError (a name too long, a folder on the way that cannot be searched) as a usage error
    naming the option: ``Path.exists`` lets those through, and they had ended the command with status 1."""
    try:
        yield
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise
    except OSError as exc:
        raise ValueError(f"{what} {p} cannot be used: {exc.strerror or exc}.") from None


def _check_input_file(p: Path, what: str) -> Path:
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


def _kept_mode(path: Path) -> int:
    """The permissions a file written to ``path`` gets: those of the file it replaces, else a new file's.

    As a shell's ``>`` would: a model someone made private (``chmod 600``) stays private when saved again.

    Parameters
    ----------
    path : Path
        The target (a symbolic link already followed).

    Returns
    -------
    int
        Permission bits for :func:`os.chmod`.
    """
    try:
        st = os.stat(path)
    except OSError:  # nothing there yet (or nothing readable): a new file
        return _new_file_mode()
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else _new_file_mode()


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
    with _usable_path(what, p):
        return _check_output_path(p, path, kind, what)


def _check_output_path(p: Path, path, kind: str, what: str) -> Path:
    if kind == "file" and p.is_symlink():  # the file the link names is written, as a shell's > would
        p = _through_link(p)
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
    at most a hidden ``.part`` file is left beside ``path``. The file keeps the
    permission bits of the file it replaces; a new file gets those the umask gives
    any new file (``tempfile`` alone would give 0600). Being a new file, it does not
    keep the old one's owner or hard links.

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
    return write_together({path: data})[0]


def _through_link(path: Path) -> Path:
    """The file a symbolic link names: renaming a new file onto the link would replace the link
    (``--out link.csv`` had left its target as it was, and ``--out /dev/stdout`` replaced the
    system's link to standard output)."""
    return Path(os.path.realpath(path))


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; returns those created, deepest first."""
    made = []
    while not folder.exists():
        made.append(folder)
        folder = folder.parent
    for f in reversed(made):
        f.mkdir(exist_ok=True)
    return made


def _remove_empty(folders: Sequence[Path]) -> None:
    """Undo :func:`_make_parents` after a failure: the folders it made, if still empty."""
    for f in sorted(set(folders), key=lambda f: len(f.parts), reverse=True):  # deepest first, every chain
        try:
            f.rmdir()
        except OSError:  # not empty (or gone): a folder above it stays too, by the same test
            continue


def write_together(files: Mapping[str | os.PathLike, bytes | str]) -> list[Path]:
    """:func:`write_atomic` for several files that belong together: all are written to temporary
    files first, then renamed in one step Ctrl-C cannot split, so a failure leaves none of them
    (nor the folders it created for them). A path that is a symbolic link writes the file it names; each
    file keeps the permission bits of the file it replaces (a new one gets the umask's)."""
    temps: list[tuple[str, Path]] = []
    made: list[Path] = []
    try:
        for path, data in files.items():
            path = Path(path)
            path = _through_link(path) if path.is_symlink() else path
            made += _make_parents(path.parent)
            # The name's first 40 characters: a long but legal target name would give a too long temporary one.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".part")
            temps.append((tmp, path))
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data.encode("utf-8") if isinstance(data, str) else data)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as exc:  # a full disk names no file by itself
                raise OSError(exc.errno, f"could not write {path}: {exc.strerror}") from None
            os.chmod(tmp, _kept_mode(path))
        if len(temps) > 1:
            from .utils import ctrl_c_deferred  # utils imports torch, which this module leaves to its callers
        with ctrl_c_deferred() if len(temps) > 1 else contextlib.nullcontext():  # one rename is atomic alone
            _replace_all(temps)
    except BaseException:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        _remove_empty(made)
        raise
    return [path for _, path in temps]


def _replace_all(temps: list[tuple[str, Path]]) -> None:
    """Rename each temporary file onto its target; if one rename fails, undo the others (old files back)."""
    done: list[tuple[Path, Path | None, bool]] = []  # (target, its old file moved aside, whether it existed)
    try:
        for k, (tmp, path) in enumerate(temps):
            existed, backup = path.exists(), None
            if path.is_file() and len(temps) > 1:  # one rename alone replaces or fails whole: nothing to undo
                backup = path.with_name(f".{path.name[:40]}.{os.getpid()}.{k}.old")  # k: long names share a prefix
                os.replace(path, backup)
            done.append((path, backup, existed))
            os.replace(tmp, path)
    except BaseException:
        for path, backup, existed in reversed(done):
            if backup is not None and backup.exists():
                os.replace(backup, path)
            elif not existed and path.is_file():  # a new file of this call (nothing stood there before)
                path.unlink()
        raise
    for _, backup, _ in done:
        if backup is not None:
            backup.unlink(missing_ok=True)


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
    made = _make_parents(out.parent)
    stage = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name[:40]}.", suffix=".part"))
    published = False
    try:
        yield stage
        mode = _new_file_mode()
        for f in stage.rglob("*"):
            if f.is_file():  # as write_together: a file replaced in out keeps its permissions
                os.chmod(f, _kept_mode(out / f.relative_to(stage)))
        written = sorted(str(f.relative_to(stage)) for f in stage.rglob("*") if f.is_file())
        (stage / RUN_MANIFEST).write_text((f"# command: {command}\n" if command else "") + "\n".join(written) + "\n")
        os.chmod(stage / RUN_MANIFEST, mode)
        if not out.exists():
            os.chmod(stage, 0o777 & ~_umask())  # mkdtemp made it 0700
            os.rename(stage, out)
            published = True
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
        published = True
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
        if not published:  # nothing reached out: neither do the folders made for it
            _remove_empty(made)
