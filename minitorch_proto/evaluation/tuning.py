"""Nested tuning of the prototype model: a fixed broad grid, successive halving, inner splits only.

Why this exists: with Table 1's settings the method ranks last on every benchmark,
while single probes suggest that other distances and much larger learning rates do far
better. Choosing those settings by looking at test folds would only move the optimism of
the published code somewhere else. Here every choice is made on inner splits of each
outer training fold, and the test fold is touched once, by the refitted model.

The search space, :data:`GRID`, was fixed before any outer result was looked at and is
deliberately broad (1,458 points). It is searched with successive halving (Jamieson &
Talwalkar 2016; the scheme of scikit-learn's ``HalvingRandomSearchCV``), the resource
being the number of epochs:

1. ``n_candidates`` points are drawn from the grid with a fixed seed
   (:class:`sklearn.model_selection.ParameterSampler`), the same draw for every outer
   fold, so the draw cannot depend on data;
2. rung r trains every surviving candidate on every inner split of the outer training
   bags for ``max_epochs / factor ** (R - 1 - r)`` epochs (rounded, at least 1; a rung rounded to
   its predecessor's count trains nothing more) and scores it on the inner validation
   bags every ``eval_every`` epochs (a survivor goes on from where its previous
   rung stopped: the same model as training it from scratch, without repeating the epochs
   already done; see ``search_many(warm_start=...)``); a candidate's score is its best
   checkpoint's mean inner AUC (early stopping on the inner validation split), and the
   best ``1 / factor`` go on;
3. the winner is refitted on the whole outer training fold for its chosen number of epochs, as an
   ensemble of ``n_seeds`` seeds whose probabilities are averaged, and scored once on the test fold.

Why not ``HalvingRandomSearchCV`` itself: it accepts an estimator whose ``X`` is a list of
bags (``tests/test_tuning.py`` checks it), but it fits each candidate and inner split one
after another, while :func:`~minitorch_proto.training.batched.train_batched` trains every
candidate of one architecture, every inner split and every outer fold of a data set in
one program. ``benchmarks/bench_tuning.py`` measures the difference, and with ``--phases``
where the time of the nested protocol goes.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import ParameterSampler
from sklearn.utils.validation import check_is_fitted

from ..bags import shared_pool
from ..model import PrototypeMILConfig
from ..training import TrainConfig
from ..training.batched import train_batched
from ..validation import SEED_MAX, check_codes, check_int
from .cv import stratified_folds
from .metrics import scores_from_proba

__all__ = [
    "GRID",
    "STRUCTURAL_KEYS",
    "SearchBudget",
    "Candidate",
    "grid_size",
    "sample_candidates",
    "halving_schedule",
    "search",
    "search_many",
    "fit_ensembles",
    "HalvingSearch",
]

#: The search space (fixed before any outer result was seen). Learning rates span three
#: decades around and above Table 1's (3e-5 .. 1e-4); distances: the paper's, the angle,
#: and the L1 distance; the initialisations and poolings the paper and its code use;
#: D from few to many prototypes.
GRID: dict[str, tuple] = {
    "distance": ("euclidean", "cosine", "manhattan"),
    "lr_prototypes": (1e-4, 1e-3, 1e-2),
    "lr_classifier": (1e-4, 1e-3, 1e-2),
    "init": ("normal", "instances", "kmeans++"),
    "pooling": (("min",), ("min", "mean"), ("min", "mean", "max")),
    "layer_norm": (True, False),
    "n_prototypes": (8, 24, 64),
}

#: Grid keys that change the model's shape or arithmetic: models differing in these cannot
#: share one batched program (learning rates can).
STRUCTURAL_KEYS = ("distance", "init", "pooling", "layer_norm", "n_prototypes")


def grid_size(grid: dict[str, Sequence] | None = None) -> int:
    """Number of points of ``grid`` (default :data:`GRID`)."""
    return int(np.prod([len(v) for v in (grid or GRID).values()]))


@dataclass(frozen=True)
class SearchBudget:
    """How much the nested search may spend (the same budget is reported beside its results).

    Attributes
    ----------
    n_candidates : int
        Points drawn from the grid for the first rung.
    factor : int
        Successive-halving factor: each rung keeps the best ``ceil(n / factor)`` and
        multiplies the epochs by ``factor``.
    max_epochs : int
        Epochs of the last rung (and the largest number of epochs a winner may get).
    eval_every : int
        Inner validation checkpoints (epochs); the chosen epoch count is one of them.
    inner_folds : int
        Stratified inner folds of each outer training fold.
    n_seeds : int
        Seeds of the refitted ensemble (k).
    score : {"auc", "accuracy"}
        Inner criterion (AUC by default: a 10-bag validation fold gives coarse accuracies).
    random_state : int
        Seeds the candidate draw.
    """

    n_candidates: int = 27
    factor: int = 3
    max_epochs: int = 50
    eval_every: int = 5
    inner_folds: int = 3
    n_seeds: int = 5
    score: str = "auc"
    random_state: int = 0

    def __post_init__(self) -> None:
        lowest = dict(n_candidates=1, factor=2, max_epochs=1, eval_every=1, inner_folds=2, n_seeds=1, random_state=0)
        # None or a RandomState, as scikit-learn takes them (make("prototype-best", random_state=None) passes it on).
        if self.random_state is None or isinstance(self.random_state, np.random.RandomState):
            del lowest["random_state"]
        for name, low in lowest.items():
            # Stored as the int it was checked as: 2.7 seeds would be fitted as 2 and described as 2.7.
            object.__setattr__(self, name, check_int(f"SearchBudget.{name}", getattr(self, name), low))
        if "random_state" in lowest and self.random_state > SEED_MAX:
            raise ValueError(f"SearchBudget.random_state must be <= {SEED_MAX}, got {self.random_state}.")
        if self.score not in ("auc", "accuracy"):
            raise ValueError(f"SearchBudget.score must be 'auc' or 'accuracy', got {self.score!r}.")

    def describe(self, grid: dict[str, Sequence] | None = None) -> str:
        """One line naming the whole budget, for tables and reports.

        Parameters
        ----------
        grid : dict of str to sequence, optional
            The space searched (None: :data:`GRID`). A grid smaller than ``n_candidates`` is
            drawn whole, and the rungs are sized from the points it has.
        """
        drawn = min(self.n_candidates, grid_size(grid))
        rungs = ", ".join(f"{n} x {e} ep" for n, e in halving_schedule(self, drawn))
        return (f"{drawn} of {grid_size(grid)} grid points, successive halving (factor {self.factor}: "
                f"{rungs}) on {self.inner_folds} inner folds, epochs chosen every {self.eval_every} on the inner "
                f"validation bags, refit as a {self.n_seeds}-seed ensemble")


@dataclass(frozen=True)
class Candidate:
    """One grid point; ``epochs`` is set once the search has chosen it."""

    distance: str
    lr_prototypes: float
    lr_classifier: float
    init: str
    pooling: tuple
    layer_norm: bool
    n_prototypes: int
    epochs: int | None = None

    def model_config(self) -> PrototypeMILConfig:
        """The model these settings describe (Table 1 regularisers)."""
        return PrototypeMILConfig(n_prototypes=int(self.n_prototypes), distance=self.distance,
                                  pooling=tuple(self.pooling), layer_norm=bool(self.layer_norm), init=self.init)

    def structure(self) -> tuple:
        return tuple(getattr(self, k) for k in STRUCTURAL_KEYS)

    def estimator_params(self) -> dict:
        """Keyword arguments of :class:`~minitorch_proto.estimator.PrototypeMILClassifier`."""
        d = asdict(self)
        d["pooling"] = tuple(d["pooling"])
        if d["epochs"] is None:
            del d["epochs"]
        return d

    def label(self) -> str:
        pool = "+".join(self.pooling)
        ln = "LN" if self.layer_norm else "no LN"
        ep = "" if self.epochs is None else f", {self.epochs} ep"
        return (f"{self.distance}, D={self.n_prototypes}, {pool}, {ln}, {self.init}, "
                f"lr {self.lr_prototypes:g}/{self.lr_classifier:g}{ep}")


def sample_candidates(n: int, random_state: int = 0, grid: dict[str, Sequence] | None = None) -> list[Candidate]:
    """``n`` distinct grid points drawn with a fixed seed (the whole grid when it is smaller)."""
    grid, n = grid or GRID, min(int(n), grid_size(grid))
    if n < 1:  # one line here, not an IndexError after the first rung
        raise ValueError(f"the grid has no point to draw: {[k for k, v in grid.items() if not len(v)]} hold no value.")
    # ParameterSampler sorts the keys; the draw depends only on (grid, n, random_state).
    points = ParameterSampler({k: list(v) for k, v in grid.items()}, n_iter=n, random_state=random_state)
    return [Candidate(**{k: (tuple(v) if k == "pooling" else v) for k, v in p.items()}) for p in points]


def halving_schedule(budget: SearchBudget, n_drawn: int | None = None) -> list[tuple[int, int]]:
    """(candidates, epochs) of each rung (default budget: 27 x 6, 9 x 17, 3 x 50); ``n_drawn``, the points
    a smaller grid has, sizes the rungs from those (halved from the first rung, not retrained whole)."""
    rungs = [budget.n_candidates if n_drawn is None else max(1, min(budget.n_candidates, int(n_drawn)))]
    while -(-rungs[-1] // budget.factor) > 1:  # the last rung is the one before a single survivor
        rungs.append(-(-rungs[-1] // budget.factor))
    R = len(rungs)
    epochs = [max(1, int(round(budget.max_epochs / budget.factor ** (R - 1 - r)))) for r in range(R)]
    return list(zip(rungs, epochs))


def _checkpoints(epochs: int, every: int) -> list[int]:
    pts = list(range(int(every), int(epochs) + 1, int(every)))
    return pts if pts and pts[-1] == epochs else pts + [int(epochs)]


@dataclass
class SearchResult:
    """What the search chose for one training set, with the evidence."""

    chosen: Candidate
    inner_score: float
    rungs: list[pd.DataFrame]
    seconds: float


def search_many(
    bags: Sequence[np.ndarray],
    y: np.ndarray,
    train_sets: Sequence[np.ndarray],
    seeds: Sequence[int],
    budget: SearchBudget | None = None,
    *,
    grid: dict[str, Sequence] | None = None,
    backend: str = "auto",
    device="cpu",
    models_per_batch: int = 600,
    warm_start: bool = True,
) -> list[SearchResult]:
    """Successive halving on inner splits of each of several training sets, trained together.

    Parameters
    ----------
    bags : sequence of ndarray (n_instances_i, n_features)
        All bags the training sets index into (raw, unstandardised).
    y : ndarray of int, shape (n_bags,)
        Labels encoded 0..C-1.
    train_sets : sequence of int arrays
        One per search (e.g. each outer fold's training bags). The search for set j reads
        no bag outside ``train_sets[j]``: its inner splits partition that set, the scalers
        are fitted on inner training bags, scores come from inner validation bags.
    seeds : sequence of int
        One per training set; seeds its inner splits and its models.
    budget : SearchBudget, optional
        None (default) gives ``SearchBudget()``.
    grid : dict of str to sequence, optional
        The space candidates are drawn from; None (default) gives :data:`GRID`.
    backend : {"auto", "compiled", "tensor"}, default="auto"
        Passed to :func:`~minitorch_proto.training.batched.train_batched`.
    device : "auto", "cpu", "cuda" or torch.device, default="cpu"
        Passed to :func:`~minitorch_proto.training.batched.train_batched`.
    models_per_batch : int, default=600
        Largest batched program (memory grows with it).
    warm_start : bool, default=True
        Train a surviving candidate on from where its previous rung stopped (compiled backend)
        instead of again from scratch. Training does not depend on the number of epochs still to
        come (constant learning rates, the bag order drawn epoch by epoch), so the models, their
        checkpoint scores and the choices are the same either way, bit for bit
        (``tests/test_tuning.py``); only the repeated epochs are saved (about a quarter of the
        search with the default budget). False, or the tensor backend: every rung from scratch.

    Returns
    -------
    list of SearchResult
        One per training set: the chosen candidate (with its epochs), its inner score and each rung's table.
    """
    budget = budget or SearchBudget()
    y, _ = check_codes(y)  # a cast would read 0.5 as 0 before the trainers could refuse it
    t0 = time.perf_counter()
    inner = []
    for t, seed in zip(train_sets, seeds):
        t = np.asarray(t, dtype=np.int64)
        smallest = int(np.bincount(y[t]).min())
        if smallest < int(budget.inner_folds):  # said in the search's words, not the outer CV's n_folds
            raise ValueError(f"the search's training bags have {smallest} bag(s) in their smaller class, fewer than "
                             f"SearchBudget(inner_folds={budget.inner_folds}) needs; lower inner_folds or use "
                             "fewer outer folds.")
        sub = stratified_folds(y[t], 1, budget.inner_folds, random_state=int(seed))
        inner.append([(t[f.train], t[f.test]) for f in sub])
    pool = sample_candidates(budget.n_candidates, budget.random_state, grid)
    alive = [list(range(len(pool))) for _ in train_sets]  # candidate indices still in, per search
    history: list[list[pd.DataFrame]] = [[] for _ in train_sets]
    best_epoch = [dict() for _ in train_sets]
    best_score = [dict() for _ in train_sets]
    schedule = halving_schedule(budget, len(pool))
    warm = warm_start and _compiled_engine(backend, device)
    carry: dict[tuple, tuple] = {}  # job -> (fit, index) where it stopped (warm start)
    probas: dict[tuple, dict[int, np.ndarray]] = {}  # job -> checkpoint epoch -> inner validation probabilities
    for rung, (_, epochs) in enumerate(schedule):
        checkpoints = _checkpoints(epochs, budget.eval_every)
        if rung and epochs == schedule[rung - 1][1]:
            # The survivors need no more epochs (a small max_epochs rounds two rungs alike): they carry on with
            # the fits and scores they have, on every backend, instead of a 0-epoch resume or a repeated rung.
            jobs, score = [], [{c: score[j][c] for c in alive[j]} for j in range(len(train_sets))]
        else:
            jobs = [(j, c, k) for j in range(len(train_sets)) for c in alive[j] for k in range(budget.inner_folds)]
            # score[j][c] = (n_checkpoints,) sum over inner folds
            score = [{c: np.zeros(len(checkpoints)) for c in alive[j]} for j in range(len(train_sets))]
        groups: dict[tuple, list] = {}
        for job in jobs:
            groups.setdefault(pool[job[1]].structure(), []).append(job)
        next_carry = {} if jobs else carry
        for key, members in groups.items():
            mconf = pool[members[0][1]].model_config()
            for s in range(0, len(members), models_per_batch):
                chunk = members[s : s + models_per_batch]
                resume = [carry[job] for job in chunk] if warm and rung > 0 else None
                fit = train_batched(
                    bags, y, [inner[j][k][0] for j, _, k in chunk],
                    # The same seed for every candidate on one inner split (common random numbers).
                    [int(seeds[j]) * 100 + k + 1 for j, _, k in chunk], mconf,
                    TrainConfig(epochs=int(epochs)), n_classes=int(y.max()) + 1,
                    lr_prototypes=[pool[c].lr_prototypes for _, c, _ in chunk],
                    lr_classifier=[pool[c].lr_classifier for _, c, _ in chunk],
                    eval_sets=[inner[j][k][1] for j, _, k in chunk], eval_every=int(budget.eval_every),
                    device=device, backend=backend, resume=resume,
                )
                for i, job in enumerate(chunk):
                    j, c, k = job
                    if warm:
                        next_carry[job] = (fit, i)
                    # Checkpoints before the warm start were scored in the earlier rung.
                    seen = probas.setdefault(job, {}) if warm else {}
                    seen.update({ep: p[i] for ep, p in fit.evaluations.items()})
                    val = inner[j][k][1]
                    for e, ep in enumerate(checkpoints):
                        acc, auc = scores_from_proba(y[val], seen[ep])
                        v = acc if budget.score == "accuracy" or np.isnan(auc) else auc
                        score[j][c][e] += v / budget.inner_folds
        carry = next_carry  # earlier rungs' fits can go
        for j in range(len(train_sets)):
            rows = []
            for c in alive[j]:
                e = int(np.argmax(score[j][c]))  # first best checkpoint: fewer epochs on ties
                best_epoch[j][c], best_score[j][c] = checkpoints[e], float(score[j][c][e])
                rows.append(dict(rung=rung + 1, epochs_trained=epochs, candidate=c, **pool[c].estimator_params(),
                                 best_epoch=checkpoints[e], inner_score=float(score[j][c][e])))
            history[j].append(pd.DataFrame(rows))
            # Stable order: score, then the earlier-drawn candidate (deterministic on ties).
            ranked = sorted(alive[j], key=lambda c: (-best_score[j][c], c))
            if rung + 1 < len(schedule):
                alive[j] = ranked[: schedule[rung + 1][0]]
            else:
                alive[j] = ranked[:1]
    seconds = (time.perf_counter() - t0) / max(1, len(train_sets))
    out = []
    for j in range(len(train_sets)):
        c = alive[j][0]
        chosen = Candidate(**{**pool[c].estimator_params(), "epochs": int(best_epoch[j][c])})
        out.append(SearchResult(chosen, best_score[j][c], history[j], seconds))
    return out


def _compiled_engine(backend: str, device) -> bool:
    """Whether :func:`train_batched` will use the compiled engine (the one that can continue a fit)."""
    from ..training import compiled
    from ..utils import resolve_device

    return backend == "compiled" or (backend == "auto" and compiled.AVAILABLE and resolve_device(device).type == "cpu")


def search(bags: Sequence[np.ndarray], y, budget: SearchBudget | None = None, *, seed: int = 0,
           **kwargs) -> SearchResult:
    """Successive halving on inner splits of all of ``bags``: :func:`search_many` with one training set.

    Parameters
    ----------
    bags : sequence of ndarray (n_instances_i, n_features)
    y : array-like of int, shape (n_bags,)
        Labels encoded 0..C-1.
    budget : SearchBudget, optional
        None (default) gives ``SearchBudget()``.
    seed : int, default=0
        Seeds the inner splits and the models.
    **kwargs
        ``grid``, ``backend``, ``device``, ``models_per_batch``, ``warm_start`` of :func:`search_many`.

    Returns
    -------
    SearchResult
    """
    return search_many(bags, y, [np.arange(len(bags))], [seed], budget, **kwargs)[0]


def fit_ensembles(
    bags: Sequence[np.ndarray],
    y: np.ndarray,
    train_sets: Sequence[np.ndarray],
    eval_sets: Sequence[np.ndarray],
    chosen: Sequence[Candidate],
    seeds: Sequence[int],
    n_seeds: int,
    *,
    backend: str = "auto",
    device="cpu",
) -> list[np.ndarray]:
    """Refit each chosen setting on its training set as ``n_seeds`` seeds; averaged probabilities on its eval set.

    Member ``s`` of ensemble ``j`` is seeded ``seeds[j] + s``, as
    ``PrototypeMILClassifier(n_seeds=n_seeds, random_state=seeds[j])`` seeds its members.
    Settings that share a structure and an epoch count train in one batched program.

    Parameters
    ----------
    bags : sequence of ndarray (n_instances_i, n_features)
        All bags the sets index into (raw, unstandardised).
    y : ndarray of int, shape (n_bags,)
        Labels encoded 0..C-1.
    train_sets, eval_sets : sequence of int arrays
        Per ensemble: the bags it trains on and the bags it scores.
    chosen : sequence of Candidate
        Per ensemble: its settings; ``epochs`` must be set (as :func:`search_many` sets it).
    seeds : sequence of int
        Per ensemble: the first member's seed.
    n_seeds : int
        Members per ensemble.
    backend : {"auto", "compiled", "tensor"}, default="auto"
    device : "auto", "cpu", "cuda" or torch.device, default="cpu"
        Both passed to :func:`~minitorch_proto.training.batched.train_batched`.

    Returns
    -------
    list of ndarray (len(eval_sets[j]), n_classes)
        Per ensemble: the mean of its members' class probabilities on its eval set.
    """
    y, _ = check_codes(y)  # a cast would read 0.5 as 0 before the trainers could refuse it
    groups: dict[tuple, list[int]] = {}
    for j, cand in enumerate(chosen):
        groups.setdefault((cand.structure(), cand.epochs), []).append(j)
    out: list[np.ndarray | None] = [None] * len(chosen)
    for (_, epochs), js in groups.items():
        models = [(j, s) for j in js for s in range(int(n_seeds))]
        fit = train_batched(
            bags, y, [train_sets[j] for j, _ in models], [int(seeds[j]) + s for j, s in models],
            chosen[js[0]].model_config(), TrainConfig(epochs=int(epochs)), n_classes=int(y.max()) + 1,
            lr_prototypes=[chosen[j].lr_prototypes for j, _ in models],
            lr_classifier=[chosen[j].lr_classifier for j, _ in models],
            eval_sets=[eval_sets[j] for j, _ in models], device=device, backend=backend,
        )
        last = fit.evaluations[int(epochs)]
        for i, (j, s) in enumerate(models):
            out[j] = last[i] / n_seeds if out[j] is None else out[j] + last[i] / n_seeds
    return out  # type: ignore[return-value]


class HalvingSearch(ClassifierMixin, BaseEstimator):
    """The nested search as an estimator: successive halving on inner splits of the bags given to ``fit``.

    ``fit(bags, y)`` runs :func:`search_many` on stratified inner splits of ``bags`` (seeded
    with ``random_state``; the candidates are drawn with ``budget.random_state``), then
    refits the winner on all of ``bags`` as a
    :class:`~minitorch_proto.estimator.PrototypeMILClassifier` with ``n_seeds=budget.n_seeds``
    members seeded ``random_state``, ``random_state + 1``, ... Cross-validated with
    :func:`~minitorch_proto.evaluation.cross_validate`, each outer fold's copy sees its
    training bags only, and :meth:`fit_many` runs the searches of every fold together.

    Parameters
    ----------
    budget : SearchBudget, optional
        Inner folds, rungs, candidates and ensemble size (default ``SearchBudget()``).
    grid : dict of lists, optional
        The candidates' settings to draw from (default: :func:`search_many`'s grid).
    random_state : int, RandomState, Generator or None, default=0
        Seeds the inner splits and the refitted members; None draws a fresh seed on each fit.
    backend : {"auto", "compiled", "tensor"}, default="auto"
        Training engine of the candidates and the refit.
    device : str, default="cpu"
        Where the candidates train.

    Attributes
    ----------
    best_params_ : dict, the chosen setting (with its epochs)
    best_score_ : float, its mean inner score (``budget.score``)
    search_ : SearchResult, with each rung's table
    best_estimator_ : the refitted PrototypeMILClassifier (an ensemble)
    classes_ : ndarray
    """

    def __init__(self, budget: SearchBudget | None = None, grid: dict[str, Sequence] | None = None,
                 random_state: int | np.random.RandomState | np.random.Generator | None = 0,
                 backend: str = "auto", device: str = "cpu") -> None:
        self.budget = budget
        self.grid = grid
        self.random_state = random_state
        self.backend = backend
        self.device = device

    def fit(self, bags, y) -> "HalvingSearch":
        """Search on inner splits of ``bags``, then refit the winner on all of them.

        Parameters
        ----------
        bags : sequence of array-like of shape (n_instances, n_features)
            One array per bag; bags may differ in size, not in features.
        y : array-like of shape (n_bags,)
            Bag labels (any sortable labels; ``classes_`` holds them sorted).

        Returns
        -------
        self : HalvingSearch
            Fitted. Nothing of an earlier fit survives; a fit that raises leaves the search unfitted.

        Raises
        ------
        ValueError
            If a bag is invalid, ``y`` holds one class, or its smallest class has fewer bags than
            ``budget.inner_folds``.
        """
        return self.fit_many([(bags, y)], estimators=[self])[0]

    def fit_many(self, train_sets, random_states=None, *, estimators=None, n_jobs: int = 1) -> list["HalvingSearch"]:
        """One search per ``(bags, y)``, all trained together; the same as fitting each alone."""
        from ..meta_estimators import with_random_state
        from ..validation import fresh_fit

        train_sets = list(train_sets)
        if estimators is None:
            if random_states is None or len(random_states) != len(train_sets):
                raise ValueError("fit_many needs one random state per training set.")
            estimators = [with_random_state(self, s) for s in random_states]
        with fresh_fit(estimators):  # a failed search leaves them unfitted, not half new, half old
            return self._search_and_refit(train_sets, estimators)

    def _search_and_refit(self, train_sets, estimators) -> list["HalvingSearch"]:
        from ..estimator import PrototypeMILClassifier
        from ..meta_estimators import copy_input_attributes
        from ..validation import base_seed, check_labels, check_shared_bags

        budget = self.budget or SearchBudget()
        if not isinstance(budget, SearchBudget):
            raise ValueError(f"budget must be a SearchBudget or None, got {type(budget).__name__}.")
        encoded, classes0, seen = [], None, {}
        for bags, y in train_sets:
            bags = check_shared_bags(bags, seen, dtype=None)  # folds share bags; float32 kept, as fit keeps it
            y_enc, classes = check_labels(y, len(bags))
            if classes0 is not None and not np.array_equal(classes, classes0):
                raise ValueError("training sets searched together must have the same classes.")
            classes0 = classes
            encoded.append((bags, y_enc))
        pool, labels, index_sets = shared_pool(encoded)
        seeds = [base_seed(e.random_state) for e in estimators]  # None: a fresh seed, as scikit-learn's
        found = search_many(pool, labels, index_sets, seeds, budget, grid=self.grid,
                            backend=self.backend, device=self.device)
        finals = [PrototypeMILClassifier(**r.chosen.estimator_params(), n_seeds=int(budget.n_seeds),
                                         random_state=s, backend=self.backend, device=self.device)
                  for r, s in zip(found, seeds)]
        PrototypeMILClassifier().fit_many(train_sets, estimators=finals)
        for e, r, f in zip(estimators, found, finals):
            e.search_, e.best_params_, e.best_score_ = r, r.chosen.estimator_params(), float(r.inner_score)
            e.best_estimator_, e.classes_ = f, f.classes_
            copy_input_attributes(e, f)
        return estimators

    def decision_function(self, bags) -> np.ndarray:
        """The refitted ensemble's decision function (two classes: the log-odds of ``classes_[1]``).

        Parameters
        ----------
        bags : sequence of array-like of shape (n_instances, n_features_in_)
            Bags with the training bags' features, passed to ``best_estimator_``.

        Returns
        -------
        ndarray of shape (n_bags,) for two classes, else (n_bags, n_classes)
        """
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.decision_function(bags)

    def predict_proba(self, bags) -> np.ndarray:
        """Class probabilities of the refitted ensemble.

        Parameters
        ----------
        bags : sequence of array-like of shape (n_instances, n_features_in_)
            Bags with the training bags' features, passed to ``best_estimator_``.

        Returns
        -------
        ndarray of shape (n_bags, n_classes)
            Columns in ``classes_`` order.
        """
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict_proba(bags)

    def predict(self, bags) -> np.ndarray:
        """The class of largest probability.

        Parameters
        ----------
        bags : sequence of array-like of shape (n_instances, n_features_in_)
            Bags with the training bags' features, passed to ``best_estimator_``.

        Returns
        -------
        ndarray of shape (n_bags,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(bags)  # first: unfitted, it raises NotFittedError, not a missing classes_
        return self.classes_[np.argmax(proba, axis=1)]

    def choices(self) -> dict:
        """The chosen setting and its inner score, one row of a choices table."""
        check_is_fitted(self, "best_estimator_")
        budget = self.budget or SearchBudget()
        row = {**self.best_params_, "inner_score": self.best_score_, "setting": self.search_.chosen.label(),
               "budget": budget.describe(self.grid)}
        row["pooling"] = "+".join(row["pooling"])
        return row
