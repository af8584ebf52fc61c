"""Small runtime helpers with one home each: devices, CPU threads, progress bars, Ctrl-C, and the
order in which tuning ranks its candidates (the common budget's and the baselines' own tuning).

Everything here is below the model in the data flow: any module may import it,
and it imports nothing from the package.
"""
from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
from typing import Any, Iterable, Iterator

import numpy as np
import torch

__all__ = ["EstimatorFactory", "ctrl_c_deferred", "progress_bar", "rank_candidates", "resolve_device", "torch_threads"]


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Map ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"auto"``/None or a ``torch.device`` to a device.

    ``"auto"`` (and None) means CUDA when it is available, else the CPU.

    Raises
    ------
    ValueError
        An unknown device string, an unsupported device type, or CUDA asked for
        where this PyTorch build or machine has none.
    """
    if isinstance(device, torch.device):
        dev = device
    elif device is None or (isinstance(device, str) and device.lower() == "auto"):
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except RuntimeError as exc:
            raise ValueError(f"Unknown device {device!r}; use 'cpu', 'cuda' or 'auto'.") from exc
    else:
        raise ValueError(f"device must be a string or torch.device, got {type(device).__name__}.")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available in this PyTorch "
            "build/machine; use device='cpu' or device='auto'."
        )
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"Unsupported device type {dev.type!r}; use 'cpu', 'cuda' or 'auto'.")
    return dev


@contextlib.contextmanager
def torch_threads(n_threads: int | None) -> Iterator[None]:
    """Temporarily set torch's intra-op CPU threads (``None``: leave them unchanged).

    The models here take many tiny steps (one bag of a few instances each); with
    several OpenMP threads, synchronisation dominates and a step can be 10-30x
    slower than single-threaded, so callers parallelise over models or folds instead.
    """
    if n_threads is None:
        yield
        return
    n_threads = int(n_threads)
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1 or None, got {n_threads}.")
    old = torch.get_num_threads()
    if old == n_threads:
        yield
        return
    torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def progress_bar(iterable: Iterable, enabled: bool, desc: str, **kwargs) -> Iterable:
    """Wrap ``iterable`` in a tqdm bar when ``enabled`` (tqdm is imported only then)."""
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, leave=False, **kwargs)


class EstimatorFactory:
    """Picklable ``random_state -> estimator`` factory: a class plus fixed keyword arguments.

    Used wherever a fresh, unfitted estimator is needed per seed or fold (the
    baseline registry, the MIL unit-test table), so the same settings can be
    rebuilt in worker processes.
    """

    def __init__(self, cls: type, **kwargs: Any) -> None:
        self.cls = cls
        self.kwargs = kwargs

    def __call__(self, random_state: int | None = None) -> Any:
        return self.cls(random_state=random_state, **self.kwargs)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.cls.__name__}({args})"


@contextlib.contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) until the block ends, so that a few renames are not cut in half.

    A Ctrl-C during the block is remembered and acted on as soon as the block is left (as a
    ``KeyboardInterrupt`` under Python's usual handler). Python runs signal handlers in the main
    thread whichever thread the signal reached, so this holds with torch's worker threads about;
    outside the main thread, where no handler can be set, the block runs unprotected.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught and callable(previous):
            previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt here
        elif caught and previous == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGINT)


def rank_candidates(scores: np.ndarray, by_auc: np.ndarray, scoring: str) -> list[int]:
    """Candidates best first: by mean inner accuracy (ties: mean inner AUC, then grid order), or by
    mean inner AUC (ties: grid order). ``scores`` is (candidates, 2): accuracy, AUC.

    Values within 1e-9 of each other are equal: two candidates right on the same bags can differ in
    the last bit of a mean summed in another order (Fox, MILES: 0.61111111111111105 against ...116,
    both 110 of 180 bags), and the tie rule must decide, not rounding."""
    keys = [by_auc] if scoring == "auc" else [scores[:, 0], scores[:, 1]]
    keys = [np.nan_to_num(np.asarray(k, dtype=np.float64), nan=-np.inf) for k in keys]  # an unscored one last

    def better(g: int, h: int) -> int:  # within 1e-9 is a tie (rounding to digits can split one); then grid order
        for k in keys:
            if abs(k[g] - k[h]) > 1e-9 or (np.isinf(k[g]) != np.isinf(k[h])):
                return -1 if k[g] > k[h] else 1
        return g - h

    return sorted(range(len(keys[0])), key=functools.cmp_to_key(better))
