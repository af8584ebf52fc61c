"""Train many independent prototype MIL models at once.

The paper's protocol (batch size 1, 100 epochs, 5 x 10-fold CV on five data sets)
is 250 small models; trained one after another, almost all of the time goes to
per-step framework overhead, not arithmetic. :func:`train_batched` fits M models
in one call, with two backends that give the same models:

``"compiled"`` (the default on the CPU)
    Each model's epoch is one compiled loop (:mod:`minitorch_proto.training.compiled`):
    forward, hand-written gradients and Adam with no per-step overhead; the
    models run in parallel over the cores. No padding: each step touches only
    its own bag's instances.
``"tensor"`` (CUDA, or where numba is missing)
    The M models advance together: at every tick each model takes one step on
    its own next minibatch through batched torch operations, so the framework
    overhead is paid once per tick instead of once per model. Bags of very
    different sizes (Musk2: 1 to 1,044 instances) are not all padded to the
    largest: the tick's bags are sorted by size and cut into at most three
    groups, each one batched matrix product.

Either way each model keeps exactly the semantics of :func:`~minitorch_proto.training.sequential.train_model`: its
own training bags in its own order (from its own seed), its own initialisation,
its own Adam state and learning rates, its own feature standardisation.
"""
from __future__ import annotations

import functools
import sys
import time
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np
import torch

from ..model import PrototypeMIL, PrototypeMILConfig, class_probabilities
from ..preprocessing import BagStandardizer
from ..validation import check_codes, check_int
from ..utils import progress_bar, resolve_device, torch_threads
from . import compiled
from .config import TrainConfig, epoch_batches
from .setup import BagPool, BatchedFit, ResumeState, Setup, numpy_dtype
from .tensor import _Stack, fit_tensor

__all__ = ["BatchedFit", "train_batched"]

#: Rows standardised at a time into the compiled engine's copy of the bags (its float64
#: temporaries stay near 3 x 65,536 x L x 8 bytes instead of three copies of the pool).
_SLICE_ROWS = 65_536


def _limit_threads(fn):
    """Run ``fn`` under :func:`~minitorch_proto.utils.torch_threads` (``num_threads``)."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        # None means "the backend's best": one torch thread for the tensor backend;
        # the compiled backend sets its own (numba) threads.
        with torch_threads(kwargs.get("num_threads") or 1):
            return fn(*args, **kwargs)

    return wrapped


@_limit_threads
def train_batched(
    bags: Sequence[np.ndarray],
    y: np.ndarray,
    train_sets: Sequence[np.ndarray],
    seeds: Sequence[int],
    model_config: PrototypeMILConfig | None = None,
    train_config: TrainConfig | None = None,
    *,
    n_classes: int | None = None,
    standardization: str = "feature",
    lr_prototypes: Sequence[float] | None = None,
    lr_classifier: Sequence[float] | None = None,
    eval_sets: Sequence[np.ndarray] | None = None,
    eval_every: int | None = None,
    device: str | torch.device | None = "auto",
    dtype: torch.dtype = torch.float32,
    progress: bool = False,
    num_threads: int | None = None,
    table_limit_bytes: int = 1 << 30,
    on_epoch_end: Callable[[int, "BatchedFit"], None] | None = None,
    backend: str = "auto",
    autocast: str | None = None,
    resume: Sequence[tuple[BatchedFit, int]] | None = None,
) -> BatchedFit:
    """Fit M = len(train_sets) models at once.

    Parameters
    ----------
    bags : sequence of ndarray (n_instances_i, n_features)
        Every bag any model trains or is evaluated on (raw, unstandardised).
    y : ndarray of int, shape (n_bags,)
        Encoded labels 0..C-1.
    train_sets : sequence of int arrays
        Bag indices each model trains on.
    seeds : sequence of int
        One per model; the same seed as ``PrototypeMILClassifier(random_state=seed)``
        gives the same model.
    model_config, train_config : PrototypeMILConfig, TrainConfig, optional
        Shared by all models; None gives the defaults.
    n_classes : int, optional
        Number of classes C; None (default) takes ``y.max() + 1``.
    standardization : {"feature", "instance", "none"}, default="feature"
        Fitted on each model's own training bags.
    lr_prototypes, lr_classifier : sequence of float, optional
        Per-model learning rates (a grid), one value per model; default ``train_config``'s.
    eval_sets : sequence of int arrays, optional
        Bags to score for each model after training, and every ``eval_every``
        epochs if given (the published code's test-fold monitoring; use it only
        for clearly labelled reporting, never for selection).
    eval_every : int, optional
        With ``eval_sets``: also score them after every ``eval_every``-th epoch. The
        probabilities go to ``BatchedFit.evaluations``, keyed by epoch.
    device : "auto", "cpu", "cuda" or torch.device, default="auto"
    dtype : torch.dtype, default=torch.float32
        Of the arithmetic: torch.float32 or torch.float64 (for exact checks).
    progress : bool, default=False
        Show a progress bar over epochs.
    num_threads : int or None, default=None
        CPU threads for the duration of the call. None (default): every core for
        the compiled backend, which runs models in parallel; one for the tensor
        backend, whose ticks are many tiny operations for which thread hand-offs
        cost more than they save.
    table_limit_bytes : int, default=1 << 30
        Tensor backend: keep a standardised copy of the pool per model when it fits
        in this many bytes (default 1 GiB; faster), else standardise gathered rows
        on the fly.
    on_epoch_end : callable(epoch, fit), optional
        Called with epoch 0 before training (the initial parameters) and after
        every epoch; ``fit`` holds the current parameters.
    backend : {"auto", "compiled", "tensor"}, default="auto"
        ``"compiled"``: each model's steps run in one compiled loop
        (:mod:`minitorch_proto.training.compiled`, numba; CPU only), models in parallel over
        the cores. ``"tensor"``: the M models advance together as batched torch
        operations, one tick per step (CPU or CUDA). ``"auto"``: compiled on the
        CPU when numba is installed, tensor otherwise. Both give the sequential
        trainer's result.
    autocast : {None, "bf16"}, default=None
        Run the instance-prototype matrix products under bf16 autocast (tensor
        backend, float32, CPU or CUDA): faster on hardware with bf16 units, at the
        cost of about three significant digits in the distances. ``"auto"`` then
        picks the tensor backend.
    resume : sequence of (BatchedFit, int), optional
        Compiled backend: model ``m`` goes on from model ``i`` of an earlier fit (``resume[m] =
        (fit, i)``) instead of starting afresh: its parameters, Adam moments, step count and bag
        order continue, and training stops at ``train_config.epochs`` counted from the start, so
        the parameters are the ones an uninterrupted run would give (with a constant or epoch-indexed
        learning rate); the returned ``history`` holds the resumed epochs only (the earlier fit's
        rows are in its own history). The earlier models must have trained as many epochs each, with the same
        training set, seed, learning rates, configs and dtype (checked). Successive halving uses
        it: a surviving candidate is trained on, not again from scratch.

    Returns
    -------
    BatchedFit
        The M models' parameters, standardisers and per-epoch ``history``.

    Raises
    ------
    ValueError
        If ``y`` is not class codes 0..C-1, ``train_sets`` is empty, a training set is empty or
        holds one class, the numbers of seeds, labels or ``resume`` entries do not match, or
        ``backend``, ``autocast`` or ``resume`` cannot run as asked.
    """
    model_config = model_config or PrototypeMILConfig()
    train_config = train_config or TrainConfig()
    M = len(train_sets)
    if M == 0:
        raise ValueError("train_sets is empty: nothing to train.")
    if len(seeds) != M:
        raise ValueError(f"Got {M} train sets but {len(seeds)} seeds.")
    y, n_classes = check_codes(y, n_classes)
    if len(y) != len(bags):
        raise ValueError(f"Found {len(bags)} bags but {len(y)} labels.")
    train_sets = [np.asarray(t, dtype=np.int64) for t in train_sets]
    for m, t in enumerate(train_sets):
        if len(t) == 0:
            raise ValueError(f"Training set of model {m} is empty.")
        if len(np.unique(y[t])) < 2:
            raise ValueError(f"Training set of model {m} holds a single class.")
    if num_threads is not None:
        check_int("num_threads", num_threads)
    dev = resolve_device(device)
    if backend not in ("auto", "compiled", "tensor"):
        raise ValueError(f"backend must be 'auto', 'compiled' or 'tensor', got {backend!r}.")
    if autocast not in (None, "none", "bf16"):
        raise ValueError(f"autocast must be None or 'bf16', got {autocast!r}.")
    autocast_dtype = torch.bfloat16 if autocast == "bf16" else None
    if autocast_dtype is not None and backend == "compiled":
        raise ValueError("autocast='bf16' runs in the tensor engine; use backend='tensor' or 'auto'.")
    if backend == "compiled" and (dev.type != "cpu" or not compiled.AVAILABLE):
        raise ValueError("backend='compiled' needs device='cpu' and numba installed; use backend='tensor'.")
    if backend == "compiled" and model_config.distance not in compiled.DISTANCE_CODES:
        raise ValueError(f"the compiled engine has no kernel for distance {model_config.distance!r}; "
                         "use backend='tensor' or 'auto'.")
    if backend == "compiled" or (backend == "auto" and dev.type == "cpu" and compiled.AVAILABLE
                                 and autocast_dtype is None and model_config.distance in compiled.DISTANCE_CODES):
        run = _fit_compiled
    else:
        run = fit_tensor
    if resume is not None:
        if run is not _fit_compiled:
            raise ValueError("resume needs the compiled backend (device='cpu', numba installed, no autocast).")
        if len(resume) != M:
            raise ValueError(f"Got {M} train sets but {len(resume)} models to resume.")
    t_start = time.perf_counter()

    pool = BagPool(bags, dev)
    L = pool.n_features
    standardizers, modules, last = [], [], None
    for m in range(M):
        # Consecutive models on the same bags (an ensemble's seeds) share one standardiser and one
        # standardised copy for their starts: each is the size of the data.
        key = np.asarray(train_sets[m]).tobytes()
        if last is None or last[0] != key:
            last = None  # the previous set's copy goes before the next one is made
            train_bags = [bags[i] for i in train_sets[m]]
            std = BagStandardizer(standardization).fit(train_bags)
            # A resumed model's initial values are replaced: skip a data-driven initialisation.
            data_start = model_config.init != "normal" and resume is None
            last = (key, std, std.transform_stacked(train_bags) if data_start else None)
        _, std, init_instances = last
        standardizers.append(std)
        gen = torch.Generator().manual_seed(int(seeds[m]))
        start_config = model_config if resume is None else replace(model_config, init="normal")
        modules.append(PrototypeMIL(L, n_classes, start_config, generator=gen, init_instances=init_instances))

    last = init_instances = None
    if standardization == "instance":
        # Per-instance z-scoring needs no fitting: do it once on the pool.
        pool.instances = torch.as_tensor(
            np.concatenate([standardizers[0].transform_instances(b) for b in bags]), dtype=torch.float64, device=dev
        )
    means = torch.zeros(M, L, dtype=torch.float64, device=dev)
    scales = torch.ones(M, L, dtype=torch.float64, device=dev)
    if standardization == "feature":
        means = torch.as_tensor(np.stack([s.mean_ for s in standardizers]), device=dev)
        scales = torch.as_tensor(np.stack([s.scale_ for s in standardizers]), device=dev)

    setup = Setup(bags, y, train_sets, seeds, model_config, train_config, n_classes, standardization,
                   lr_prototypes, lr_classifier, eval_sets, eval_every, dev, dtype, progress, num_threads,
                   table_limit_bytes, on_epoch_end, pool, modules, means, scales, standardizers, autocast_dtype,
                   resume)
    fit = run(setup)
    fit.seconds = time.perf_counter() - t_start
    return fit


def _fit_compiled(s: Setup) -> BatchedFit:
    """Every model's epoch as one compiled loop (``minitorch_proto.training.compiled``), models in parallel."""
    with compiled.threads(s.num_threads):
        return _train_compiled(s)


def _train_compiled(s: Setup) -> BatchedFit:
    M, mc, tc = s.n_models, s.model_config, s.train_config
    np_dtype = numpy_dtype(s.dtype)
    # A standardised copy of the bags each model trains and is evaluated on, made once
    # (the pool already holds per-instance z-scores when that is the standardisation).
    sizes, offsets = s.pool.sizes.astype(np.int64), s.pool.offsets
    raw = s.pool.instances.cpu().numpy()
    used = []
    for m in range(M):
        sets = [s.train_sets[m]] + ([np.asarray(s.eval_sets[m], dtype=np.int64)] if s.eval_sets is not None else [])
        used.append(np.unique(np.concatenate(sets)))
    n_rows = np.array([sizes[u].sum() for u in used])
    means, scales = s.means.cpu().numpy(), s.scales.cpu().numpy()
    # Models with the same bags and the same standardisation (an ensemble's seeds) share one
    # copy: the kernels only read X.
    owners: dict[tuple[bytes, bytes, bytes], int] = {}
    owner = [owners.setdefault((u.tobytes(), means[m].tobytes(), scales[m].tobytes()), m) for m, u in enumerate(used)]
    X = np.empty((int(sum(n_rows[m] for m in set(owner))), raw.shape[1]), dtype=np_dtype)
    start = np.full((M, len(s.bags)), -1, dtype=np.int64)
    row = 0
    for m, bag_ids in enumerate(used):
        if owner[m] != m:
            start[m] = start[owner[m]]
            continue
        first = np.cumsum(sizes[bag_ids]) - sizes[bag_ids]
        start[m, bag_ids] = row + first
        rows = np.arange(n_rows[m]) + np.repeat(offsets[bag_ids] - first, sizes[bag_ids])
        # In slices: the gathered rows and their standardised values are float64 temporaries.
        for lo in range(0, n_rows[m], _SLICE_ROWS):
            part = rows[lo : lo + _SLICE_ROWS]
            X[row + lo : row + lo + len(part)] = (raw[part] - means[m]) / scales[m]
        row += n_rows[m]
    kmax = int(sizes[start.max(0) >= 0].max())

    def stacked(name):
        return np.ascontiguousarray(np.stack([getattr(mod, name).detach().numpy() for mod in s.modules]), np_dtype)

    state = compiled.EpochState(stacked("prototypes"), stacked("weight"), stacked("bias") if mc.bias else None,
                                tc.accumulate_gradients)
    P, W = torch.from_numpy(state.P), torch.from_numpy(state.W)  # views: they follow the kernel's updates
    b = torch.from_numpy(state.b) if mc.bias else None
    stack = _Stack(P, W, b, mc, s.pool, s.means, s.scales, s.dtype, table_limit_bytes=0)
    fit = BatchedFit(P, W, b, mc, s.standardizers, s.n_classes, history=[[] for _ in range(M)])
    lr_p, lr_w = s.learning_rates()
    rngs = [np.random.default_rng(int(seed)) for seed in s.seeds]
    first_epoch = 0 if s.resume is None else _resume(s, state, rngs, lr_p, lr_w)
    y = np.asarray(s.y, dtype=np.int64)
    s.start(fit)

    def predict_proba(slot_model, slot_bag):
        logits = compiled.predict_logits(state, X, start, sizes, slot_model, slot_bag, mc, kmax)
        return class_probabilities(logits)

    B = int(tc.batch_size)
    if s.progress and compiled.first_compile():  # else the bar sits at 0 % for half a minute, unexplained
        print("note: compiling the training kernels for this machine (first run only, about half a minute)",
              file=sys.stderr)
    for epoch in progress_bar(range(first_epoch, int(tc.epochs)), s.progress, f"epochs ({M} models)"):
        t0 = time.perf_counter()
        schedule = [epoch_batches(len(s.train_sets[m]), tc, rngs[m]) for m in range(M)]
        n_batches = np.array([len(sch) for sch in schedule], dtype=np.int64)
        plan = np.full((M, int(n_batches.max()), B), -1, dtype=np.int64)
        for m, sch in enumerate(schedule):
            # every minibatch is full except perhaps the last
            order = s.train_sets[m][np.concatenate(sch)]
            full = (len(order) // B) * B
            plan[m, : full // B] = order[:full].reshape(-1, B)
            if full < len(order):
                plan[m, full // B, : len(order) - full] = order[full:]
        sums = compiled.train_epoch(state, X, start, sizes, y, plan, n_batches, lr_p, lr_w, tc.lr_factor(epoch),
                                    mc, tc, kmax)
        s.end_of_epoch(fit, predict_proba, epoch, (sums / n_batches[:, None]).T, time.perf_counter() - t0)
    fit.state = ResumeState(state, rngs, int(tc.epochs), list(s.train_sets), [int(v) for v in s.seeds], lr_p, lr_w,
                            mc, tc, s.standardization, s.dtype)
    return s.finish(fit, stack, predict_proba)


def _resume(s: Setup, state: compiled.EpochState, rngs: list, lr_p: np.ndarray, lr_w: np.ndarray) -> int:
    """Copy each resumed model's parameters, Adam state and bag-order generator; return the epoch to start at."""
    done = {src.state.epochs if src.state is not None else None for src, _ in s.resume}
    if None in done:
        raise ValueError("resume: a fit made without the compiled backend cannot be continued.")
    if len(done) != 1:
        raise ValueError(f"resume: the models to continue trained different numbers of epochs ({sorted(done)}).")
    first = done.pop()
    if first >= int(s.train_config.epochs):
        raise ValueError(f"resume: the models already trained {first} epochs; train_config.epochs is "
                         f"{s.train_config.epochs}.")
    engine_fields = ("P", "W", "b")
    for m, (src, i) in enumerate(s.resume):
        r = src.state
        same = (np.array_equal(r.train_sets[i], s.train_sets[m]) and r.seeds[i] == int(s.seeds[m])
                and r.lr_prototypes[i] == lr_p[m] and r.lr_classifier[i] == lr_w[m] and r.model_config == s.model_config
                and replace(r.train_config, epochs=1) == replace(s.train_config, epochs=1)
                and r.standardization == s.standardization and r.dtype == s.dtype)
        if not same:
            raise ValueError(f"resume: model {m} differs from the model it continues (training set, seed, learning "
                             "rates, configs or dtype).")
        for name in engine_fields:
            getattr(state, name)[m] = getattr(r.engine, name)[i]
        for mine, theirs in zip(state.moments + state.accumulated, r.engine.moments + r.engine.accumulated):
            if mine.size:
                mine[m] = theirs[i]
        state.step[m] = r.engine.step[i]
        rngs[m] = np.random.default_rng()
        rngs[m].bit_generator.state = r.rngs[i].bit_generator.state
    return first
