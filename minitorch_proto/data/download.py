"""Files, checksums and downloads: the one downloader and the one cache rule.

Every file the package fetches goes through :func:`download_file` into a folder
below :func:`default_cache_dir` (``$MINITORCH_PROTO_CACHE``, else the XDG cache),
written atomically and checked against a known checksum. Folders the user names
with ``data_dir`` or ``$MINITORCH_PROTO_DATA`` are only ever read.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from pathlib import Path
from typing import Sequence

__all__ = [
    "CACHE_ENV_VAR",
    "DATA_ENV_VAR",
    "ChecksumError",
    "DownloadError",
    "default_cache_dir",
    "download_file",
    "sha256_of",
]


DATA_ENV_VAR = "MINITORCH_PROTO_DATA"
CACHE_ENV_VAR = "MINITORCH_PROTO_CACHE"

_CHUNK = 1 << 20


class ChecksumError(ValueError):
    """A file's sha256 differs from the expected one."""


class DownloadError(RuntimeError):
    """Every URL given to :func:`download_file` failed."""


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
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, leave=False)


def _fetch_one(url: str, dest: Path, sha256: str | None, timeout: float, progress: bool) -> None:
    """Download ``url`` to ``dest`` atomically; on failure leave nothing behind."""
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        n_read = 0
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            bar = _progress_bar(total, dest.name, progress)
            try:
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(chunk)
                    h.update(chunk)
                    n_read += len(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
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
        os.replace(tmp, dest)
    finally:
        # After a successful os.replace the temporary name no longer exists.
        tmp.unlink(missing_ok=True)


def download_file(
    urls: Sequence[str] | str,
    dest: str | os.PathLike,
    sha256: str | None,
    *,
    timeout: float = 30,
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
        Socket timeout in seconds for each URL.
    progress : bool
        Show a tqdm progress bar (when tqdm is installed).

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    DownloadError
        (a ``RuntimeError``) if every URL failed. The message lists each URL
        with its error and says where to put the file by hand.
    """
    if isinstance(urls, (str, bytes, os.PathLike)):
        urls = [os.fsdecode(urls)]
    urls = list(urls)
    if not urls:
        raise ValueError("download_file needs at least one URL.")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    for url in urls:
        try:
            _fetch_one(url, dest, sha256, timeout, progress)
            return dest
        # Any failure of one mirror (URLError, HTTPError, timeout, unknown scheme,
        # IncompleteRead, ChecksumError) is recorded and the next one is tried.
        except Exception as exc:
            errors.append(f"  {url}\n      -> {type(exc).__name__}: {exc}")
    raise DownloadError(
        f"Could not download {dest.name}; tried:\n"
        + "\n".join(errors)
        + f"\nTo install it by hand, download {dest.name} yourself and save it as\n"
        f"  {dest}\n"
        f"or put it in any folder and set the environment variable {DATA_ENV_VAR} "
        f"to that folder (or pass data_dir=...)."
    )
