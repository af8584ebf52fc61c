"""Files, checksums and downloads: the one downloader and the one cache rule.

Every file the package fetches itself goes through :func:`download_file` into a folder
below :func:`default_cache_dir` (``$MINITORCH_PROTO_CACHE``, else the XDG cache),
written atomically and checked against a known checksum. Folders the user names
with ``data_dir`` or ``$MINITORCH_PROTO_DATA`` are only ever read. MNIST is the one
exception: torchvision fetches it (md5-checked, but written in place) into
``root/MNIST/raw``, and :func:`~minitorch_proto.data.mnist_bags.load_mnist_images` names a
damaged copy there rather than use it.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import os
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Iterator, Sequence

__all__ = [
    "CACHE_ENV_VAR",
    "DATA_ENV_VAR",
    "DEFAULT_DOWNLOAD_TIMEOUT",
    "DOWNLOAD_TIMEOUT_ENV_VAR",
    "ChecksumError",
    "DownloadError",
    "default_cache_dir",
    "download_deadline",
    "download_file",
    "sha256_of",
]


DATA_ENV_VAR = "MINITORCH_PROTO_DATA"
CACHE_ENV_VAR = "MINITORCH_PROTO_CACHE"
DOWNLOAD_TIMEOUT_ENV_VAR = "MINITORCH_PROTO_DOWNLOAD_TIMEOUT"
# Overall limit for one file, all mirrors included: the largest benchmark file is a
# few MB, so 15 minutes is generous on any link that is actually transferring.
DEFAULT_DOWNLOAD_TIMEOUT = 900.0
# A live download rewrites its .part file at least every `timeout` seconds (or fails),
# so one untouched this long belongs to an interrupted run.
_STALE_PART_SECONDS = 3600.0

_CHUNK = 1 << 20


class ChecksumError(ValueError):
    """A file's sha256 differs from the expected one."""


class DownloadError(RuntimeError):
    """Every URL given to :func:`download_file` failed.

    The message lists each mirror's error on its own line and where to put the file by hand;
    ``one_line`` says the same in one line, for tables and summaries.
    """

    def __init__(self, message: str, one_line: str | None = None) -> None:
        super().__init__(message)
        self.one_line = one_line or " ".join(message.split())


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
    # disable=None: no bar when standard error is no terminal (a log's lines would carry its carriage returns).
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, leave=False, disable=None)


def download_deadline(deadline: float | None = None, name: str = "deadline") -> float:
    """The overall download limit in seconds: ``deadline``, else the environment, else the default.

    Parameters
    ----------
    deadline : float, optional
        Seconds; ``None`` reads ``$MINITORCH_PROTO_DOWNLOAD_TIMEOUT``, falling back to
        :data:`DEFAULT_DOWNLOAD_TIMEOUT`.
    name : str
        The caller's name for ``deadline``, for the message.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the value (or the environment variable) is not a positive number.
    """
    source = name
    if deadline is None:
        env = os.environ.get(DOWNLOAD_TIMEOUT_ENV_VAR, "").strip()
        if not env:
            return DEFAULT_DOWNLOAD_TIMEOUT
        source = f"${DOWNLOAD_TIMEOUT_ENV_VAR}"
        try:
            deadline = float(env)
        except ValueError:
            raise ValueError(f"{source}={env!r} is not a number of seconds.") from None
    try:
        value = float(deadline)
    except (TypeError, ValueError):
        raise ValueError(f"{source} must be a number of seconds, got {deadline!r}.") from None
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{source} must be a positive number of seconds (the download deadline), got {deadline!r}.")
    return value


def _remove_stale_parts(dest: Path) -> None:
    """Delete ``.part`` files of ``dest`` left by interrupted runs (not ones still being written)."""
    now = time.time()
    for part in dest.parent.glob(f".{dest.name}.*.part"):
        try:
            if now - part.stat().st_mtime > _STALE_PART_SECONDS:
                part.unlink()
        except OSError:
            pass  # another process removed or finished it meanwhile


def _file_mode() -> int:
    # mkstemp creates 0600; a finished download gets what the umask gives a new file.
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _fetch_one(url: str, dest: Path, sha256: str | None, timeout: float, progress: bool,
               end: float = math.inf, limit: float = math.inf) -> None:
    """Download ``url`` to ``dest`` atomically; on failure leave nothing behind.

    ``end`` is the :func:`time.monotonic` time by which the whole transfer must be
    over (``limit`` seconds after the download began, for the message).
    """
    def deadline_passed(n_read: int) -> TimeoutError:
        return TimeoutError(f"stopped after {n_read} bytes: the overall download deadline of {limit:g} s passed "
                            f"(raise it with deadline=, --download-timeout or ${DOWNLOAD_TIMEOUT_ENV_VAR})")

    def check_deadline(n_read: int) -> None:
        if time.monotonic() > end:
            raise deadline_passed(n_read)

    check_deadline(0)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        n_read = 0
        # The socket timeout bounds each wait; the deadline bounds the sum of them.
        wait = max(0.1, min(timeout, end - time.monotonic()))
        with os.fdopen(fd, "wb") as out, _deadline_named(wait < timeout, lambda: deadline_passed(n_read)), \
                urllib.request.urlopen(url, timeout=wait) as resp:
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            bar = _progress_bar(total, dest.name, progress)
            # read1 returns what has arrived instead of waiting for a full chunk, so a
            # server that trickles bytes cannot hold a single read past the deadline.
            read = getattr(resp, "read1", resp.read)
            try:
                for chunk in iter(lambda: read(_CHUNK), b""):
                    out.write(chunk)
                    h.update(chunk)
                    n_read += len(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
                    check_deadline(n_read)
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
        os.chmod(tmp, _file_mode())
        os.replace(tmp, dest)
    finally:
        # After a successful os.replace the temporary name no longer exists.
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _deadline_named(cut: bool, error: Callable[[], TimeoutError]) -> Iterator[None]:
    """A socket wait that the deadline had shortened (``cut``) and that ran out is the deadline's
    doing: say so (``error()``), not just "timed out"."""
    try:
        yield
    except (TimeoutError, urllib.error.URLError) as exc:
        reason = getattr(exc, "reason", exc)  # urlopen wraps a timeout while connecting in a URLError
        if cut and isinstance(reason, TimeoutError):
            raise error() from exc
        raise


def download_file(
    urls: Sequence[str] | str,
    dest: str | os.PathLike,
    sha256: str | None,
    *,
    timeout: float = 30,
    deadline: float | None = None,
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
        Socket timeout in seconds: the longest wait for the server at any moment.
    deadline : float, optional
        Overall limit in seconds for the whole call, all URLs included (a server
        sending one byte every few seconds never trips ``timeout``). Default:
        ``$MINITORCH_PROTO_DOWNLOAD_TIMEOUT``, else :data:`DEFAULT_DOWNLOAD_TIMEOUT`.
        It may be overrun by at most one ``timeout``.
    progress : bool
        Show a tqdm progress bar (when tqdm is installed).

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    DownloadError
        (a ``RuntimeError``) if every URL failed or the deadline passed. The
        message lists each URL with its error and says where to put the file by hand.
    ValueError
        If ``deadline`` (or the environment variable) is not a positive number.

    Notes
    -----
    ``.part`` files of ``dest`` that nobody has written to for an hour (left by
    a killed run) are removed first.
    """
    if isinstance(urls, (str, bytes, os.PathLike)):
        urls = [os.fsdecode(urls)]
    urls = list(urls)
    if not urls:
        raise ValueError("download_file needs at least one URL.")
    limit = download_deadline(deadline)
    end = time.monotonic() + limit
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_parts(dest)
    errors: list[str] = []
    for url in urls:
        if time.monotonic() > end and errors:
            errors.append(f"  {url}\n      -> not tried: the overall download deadline of {limit:g} s passed")
            continue
        try:
            _fetch_one(url, dest, sha256, timeout, progress, end, limit)
            return dest
        # Any failure of one mirror (URLError, HTTPError, timeout, unknown scheme,
        # IncompleteRead, ChecksumError) is recorded and the next one is tried.
        except Exception as exc:
            errors.append(f"  {url}\n      -> {type(exc).__name__}: {exc}")
    reasons = "; ".join(e.split("-> ", 1)[-1] for e in errors)
    raise DownloadError(
        f"Could not download {dest.name}; tried:\n"
        + "\n".join(errors)
        + f"\nTo install it by hand, download {dest.name} yourself and save it as\n"
        f"  {dest}\n"
        f"or put it in any folder and set the environment variable {DATA_ENV_VAR} "
        f"to that folder (or pass data_dir=...).",
        one_line=f"Could not download {dest.name} ({reasons}); save it as {dest} or set {DATA_ENV_VAR} to a folder "
                 "holding it (or pass data_dir=...).",
    )
