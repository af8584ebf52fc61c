"""After the prototypes are trained: push them onto real instances, refit the head as a convex problem.

Two steps that turn learned prototypes into evidence a reader can open, and a
classifier whose regularisation is chosen rather than guessed:

* :func:`push_prototypes` replaces each prototype by its nearest training
  instance (in the model's input space, the standardised features), so every
  prototype *is* a patch, an image or a tile of a training bag, and says which one.
  ProtoPNet and ProtoMIL project prototypes the same way.
* :func:`fit_convex_head` refits the linear classifier on the frozen distance
  features of the training bags as an L1 or L2 logistic regression whose strength
  is chosen by stratified inner folds of those bags only (scikit-learn's
  ``LogisticRegressionCV``). With the prototypes fixed this is a convex problem:
  no learning rate, no epochs, one optimal objective value per strength (the weights
  themselves are not unique when columns repeat, see below). The features are
  standardised inside the fit and the scaling folded back into the weights, so the
  result is an ordinary ``weight``/``bias`` pair of the model's head.

What the recommended model (:data:`RECOMMENDED`) is in practice, measured by an audit:

* Its one epoch of training hardly moves the prototypes: on Fox every pushed prototype lands
  back on its own k-means++ start instance, and freezing the prototypes changed no held-out
  probability on Fox or Musk2. It is k-means++ instance selection, MILES-like features of those
  instances and a convex head; the labels enter through the head alone.
* The head's inner folds split the *training bags*, but the prototypes were drawn from and pushed
  onto all of them, and the features are standardised over all of them before the split (label-
  free, transductive within the training fold). So every training bag holds some prototype's
  source instance (its largest similarity is exactly 1; a test bag's is not), and the inner
  scores that choose the strength, the feature set and the threshold read a distribution test
  bags do not have. On nine folds of Musk1 and Fox, scaling inside each inner fold instead
  changed the chosen (set, strength) in 7 and the best inner accuracy by -.016 to +.028; it was
  not consistently optimistic. Kept as is: the frozen tables measured this form.
* With more prototypes than distinct training instances (Musk1 has 476) the draw repeats
  instances, and the two members share most of theirs (all 476 on Musk1, 82% on Fox): on small
  sets the ensemble's diversity is mostly its inner folds'. Member j is seeded ``random_state + j``,
  so ensembles at neighbouring ``random_state`` share a member.
* ``class_weight`` weighs the loss and not the standardisation or a dict's inner accuracy, so it is
  close to, not equal to, duplicating bags.
* **The two-class head penalises its intercept.** liblinear (the solver for two classes) fits the
  bias as the weight of a constant feature of value 1 (scikit-learn's ``intercept_scaling=1``), so
  the penalty reaches it: ``b**2 / 2`` under L2, ``|b|`` under L1, in the standardised units. At
  strong penalties this pulls the probabilities towards 0.5 rather than towards the class
  frequencies (an audit: an L1 head at C = 0.01 on 33 against 87 bags ended with bias 0 and every
  probability near 0.5; L2 at C = 0.01 gave a mean probability of .55 where the classes give .725).
  With three or more classes (lbfgs, saga) the intercept is free, so the objective differs with
  the number of classes. MILES's head has the same property (:mod:`~minitorch_proto.baselines.miles`).
  Kept: the frozen tables measured this form; on Musk1 (1 x 10) a nearly free bias changed the chosen
  strength in most folds and accuracy .889 -> .900, AUC .960 -> .940, noise-sized either way.
* **Repeated columns share their weight arbitrarily.** With more prototypes than distinct instances
  (above) some columns are identical; under L1 only their sum is determined, and how it splits
  between them depends on the solver's seed. Read a duplicated prototype's weight together with its
  twins' (``prototype_sources_`` names the same instance).
* A feature whose spread over the training bags is below 1e-12 is treated as constant and gets
  weight 0, whatever its units: a similarity ``exp(-d**2 / sigma**2)`` of a far prototype can be
  that small everywhere and is then dropped.
* For more than two classes an L1 head needs scikit-learn's saga solver, which is slow at these
  widths (a 60-bag head of 4,096 features ran over 85 s where two classes take 0.6 s); a warning
  says so, and ``head_penalty="l2"`` (lbfgs) or fewer prototypes is quicker.
"""
from __future__ import annotations

import numbers
import warnings
from collections import deque
from typing import Callable, NamedTuple, Sequence

import numpy as np
import torch

from .distances import median_pairwise_distance
from .utils import torch_threads
from .validation import check_bool, derived_seed

__all__ = ["push_prototypes", "nearest_instances", "fit_convex_head", "ConvexHead", "HeadWorkers", "refit_members",
           "check_head_options", "check_head_repeats", "check_head_scoring", "check_head_threshold", "best_cut",
           "HEAD_CS", "HEAD_FEATURES", "RECOMMENDED"]

#: The recommended model's settings (``PrototypeMILClassifier.recommended``): the candidate of
#: ``benchmarks/recommended_lodo.py`` with the best mean AUC over the five benchmarks and MNIST-bags, a
#: development set scored on tuning seeds only ("round 5, one epoch, 2-seed ensemble": two members, each with
#: 1,024 k-means++ instance prototypes of its own draw, cosine distance, layer norm on, one epoch of training
#: (20 were worth nothing measurable: the push puts the prototypes back on their k-means++ instances), and an L1
#: head that may also read MILES's similarity of each pushed prototype, its strength and whether it reads every
#: feature or the similarity block alone chosen by accuracy on its own inner folds; the members' probabilities
#: are averaged). It comes from the script's sixth round of candidates, written after the first five rounds, the
#: ablation, the paired variants and probes of the similarity block and of the head's inner scoring had been seen.
#: Round 7 (the same recipe as 4 members of 512 prototypes) lost the choice on all six sets by .0003 of mean AUC;
#: leave-one-data-set-out picks it for Musk1, Musk2 and Elephant, and this recipe for Fox and Tiger. Frozen
#: results: the book's tables ``recommended_candidates`` and ``recommended_candidates_mnist``; what each
#: ingredient of the round-2 recipe is worth: ``recommended_ablation``.
RECOMMENDED = dict(
    distance="cosine",
    n_prototypes=1024,
    pooling=("min", "mean", "max"),
    init="kmeans++",
    lambda_p=0.0,
    lambda_d=1e-2,
    lr_prototypes=1e-3,
    lr_classifier=1e-2,
    epochs=1,
    batch_size=4,
    n_seeds=2,
    push=True,
    head="logistic",
    head_penalty="l1",
    head_similarity=True,
    head_scoring="accuracy",
    head_features="inner",
)

#: What the convex head may read: every feature; the similarity block alone (MILES's embedding of the
#: prototypes); or whichever of the two scores better on the head's inner folds.
HEAD_FEATURES = ("all", "similarity", "inner")
#: The column sets each choice compares on the inner folds ("inner" compares both).
_HEAD_SETS = {"all": ("all",), "similarity": ("similarity",), "inner": ("all", "similarity")}

#: Inverse regularisation strengths tried on the inner folds (log-spaced, fixed before any data were seen).
HEAD_CS = tuple(np.logspace(-3, 2, 11).tolist())


def push_prototypes(prototypes: np.ndarray, bags: Sequence[np.ndarray],
                    metric: str = "euclidean") -> tuple[np.ndarray, np.ndarray]:
    """Each prototype replaced by its nearest instance among ``bags``, nearest in the model's own distance.

    Parameters
    ----------
    prototypes : ndarray (D, L)
    bags : the training bags, in the prototypes' space (standardised as the model sees them)
    metric : the model's distance (any name of :func:`~minitorch_proto.distances.pairwise_distance`).
        Pushing by the distance the model scores with keeps each prototype's pooled
        distances as close as possible to the trained ones (for cosine, the instance of
        the nearest direction, not of the nearest point).

    Returns
    -------
    pushed : ndarray (D, L), rows copied from the bags
    sources : int ndarray (D, 2), (bag index, instance index) of each pushed prototype
    """
    return nearest_instances(prototypes, ((b, 0, bag) for b, bag in enumerate(bags)), metric)[:2]


def nearest_instances(prototypes: np.ndarray, pieces,
                      metric: str = "euclidean") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`push_prototypes` over ``pieces``, ``(bag, first_row, rows)`` triples that cover the bags in order.

    A bag may come in several pieces (read from disk a chunk at a time): the instance index
    is ``first_row`` plus the row within the piece, and the first of tied instances wins, as
    it does over whole bags. Returns the pushed prototypes, their sources and each one's
    distance to its instance (so shares of the bags scanned apart can be combined).
    """
    from .distances import pairwise_distance

    P = np.asarray(prototypes, dtype=np.float64)
    best = np.full(len(P), np.inf)
    sources = np.zeros((len(P), 2), dtype=np.int64)
    pushed = np.array(P, copy=True)
    P_t = torch.as_tensor(P)
    cols = np.arange(len(P))
    for b, first, rows in pieces:
        X = np.asarray(rows, dtype=np.float64)
        # Rounding can only change which of two near-tied instances wins; the copied row is
        # the instance itself, so the pushed prototype is exact either way.
        d = pairwise_distance(torch.as_tensor(X), P_t, metric).numpy()
        k = d.argmin(0)
        closer = d[k, cols] < best
        best = np.where(closer, d[k, cols], best)
        sources[closer] = np.column_stack([np.full(closer.sum(), b), first + k[closer]])
        pushed[closer] = X[k[closer]]
    return pushed, sources, best


class ConvexHead(NamedTuple):
    """A fitted convex head: ``weight`` (O, F), ``bias`` (O,), the chosen strength ``C`` and the
    position ``columns`` of the chosen column set in ``column_sets`` (0 when there is one)."""

    weight: np.ndarray
    bias: np.ndarray
    C: float
    columns: int


def fit_convex_head(
    features: np.ndarray,
    y_enc: np.ndarray,
    n_classes: int,
    *,
    penalty: str = "l2",
    Cs: Sequence[float] = HEAD_CS,
    inner_folds: int = 3,
    class_weight: str | dict | None = None,
    random_state: int = 0,
    threshold: str = "fixed",
    scoring: str = "log_loss",
    column_sets: Sequence[np.ndarray] | None = None,
    repeats: int = 1,
) -> ConvexHead:
    """Logistic-regression head on frozen features, its strength chosen on inner folds.

    Parameters
    ----------
    features : ndarray (n_bags, F)
        The model's features of the training bags.
    y_enc : ndarray of int, shape (n_bags,)
        Labels 0 .. n_classes - 1.
    n_classes : int
        Number of classes; two gives one output (a sigmoid head).
    penalty : {"l2", "l1"}, default="l2"
    Cs : sequence of float, default=HEAD_CS
        Inverse strengths tried; the one of best mean inner score wins (the smallest on ties).
    inner_folds : int, default=3
        Stratified inner folds of the training bags (fewer when a class is smaller).
    class_weight : None, "balanced" or dict {encoded class: weight}, default=None
        As in scikit-learn.
    random_state : int, default=0
        Seeds the inner folds (repeat ``r`` uses ``random_state + r``) and the solver (any integer;
        it is taken into numpy's seed range as :func:`~minitorch_proto.validation.derived_seed` does).
    threshold : {"fixed", "inner"}, default="fixed"
        "fixed": the positive class wins above probability 0.5. "inner" (two classes only):
        the cut of the decision value with the best accuracy (balanced accuracy with
        ``class_weight="balanced"``) over the out-of-fold decision values of the same inner
        folds at the chosen strength (:func:`best_cut`), folded into the bias, so the
        probabilities shift and the ranking (AUC) stays as it is.
    scoring : {"log_loss", "accuracy"}, default="log_loss"
        The inner score that chooses the strength (and the column set): mean log-loss, or
        accuracy (balanced accuracy with ``class_weight="balanced"``) of the inner folds' held-out bags.
    column_sets : sequence of integer index arrays, optional
        Column subsets of ``features`` to choose among on the same inner folds (with the
        strength): the set whose best strength scores best wins, the first on ties; the
        other columns get weight 0. ``None``: every column.
    repeats : int, default=1
        How many times the inner folds are drawn (repeat ``r`` shuffles with ``random_state + r``):
        strength, column set and cut are chosen on the mean over every repeat's held-out folds,
        so one lucky partition of few bags weighs less in the choice. ``1``: one partition.

    Returns
    -------
    ConvexHead
        ``weight`` (O, F) with O = 1 for two classes (the model's sigmoid head), else n_classes;
        ``bias`` (O,); the chosen ``C``; ``columns``, the chosen set's position in ``column_sets``.

    Raises
    ------
    ValueError
        On an unknown ``penalty``, ``threshold`` or ``scoring``, ``threshold="inner"`` with more than two
        classes, ``repeats`` not a positive integer, an empty column set, or a class with fewer than 2 bags.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    if penalty not in ("l1", "l2"):
        raise ValueError(f"head penalty must be 'l1' or 'l2', got {penalty!r}.")
    check_head_threshold(threshold, n_classes)
    check_head_scoring(scoring)
    check_head_repeats(repeats)
    X = np.asarray(features, dtype=np.float64)
    y = np.asarray(y_enc, dtype=np.int64)
    sets = [np.arange(X.shape[1])] if column_sets is None else [np.asarray(c, dtype=np.int64) for c in column_sets]
    if not sets or any(c.ndim != 1 or c.size == 0 for c in sets):
        raise ValueError("column_sets must hold at least one non-empty array of column indices.")
    mean, scale = X.mean(0), X.std(0)
    scale = np.where(scale > 1e-12, scale, 1.0)  # a constant feature carries nothing; keep it finite
    Z = (X - mean) / scale
    k = int(min(inner_folds, np.bincount(y, minlength=n_classes).min()))
    if k < 2:
        raise ValueError("the convex head needs at least 2 training bags of every class for its inner folds.")
    # liblinear takes two classes only; for more, lbfgs solves the L2 problem quickly, and only saga the L1 one.
    solver = "liblinear" if n_classes == 2 else ("saga" if penalty == "l1" else "lbfgs")
    if solver == "saga" and X.shape[1] > 1024:
        warnings.warn(f"an L1 head over {n_classes} classes and {X.shape[1]} features runs scikit-learn's saga, "
                      "which can take minutes here; head_penalty='l2' or fewer prototypes is quicker.",
                      RuntimeWarning, stacklevel=2)
    score_name = {"log_loss": "neg_log_loss",
                  "accuracy": "balanced_accuracy" if class_weight == "balanced" else "accuracy"}[scoring]
    # Repeat 0 is the one partition a single draw uses, so repeats=1 is unchanged.
    partitions = [list(StratifiedKFold(k, shuffle=True, random_state=derived_seed(int(random_state) + r)).split(X, y))
                  for r in range(int(repeats))]
    solver_seed = derived_seed(int(random_state))  # the same number below numpy's limit, so no fit changes
    fits = []
    with warnings.catch_warnings():
        # Extreme strengths may stop early; that only lowers their inner score.
        warnings.simplefilter("ignore", ConvergenceWarning)
        for cols in sets:
            lr = LogisticRegressionCV(
                Cs=list(Cs), cv=[split for part in partitions for split in part],
                l1_ratios=(1.0 if penalty == "l1" else 0.0,), solver=solver, scoring=score_name,
                class_weight=class_weight, max_iter=5000, random_state=solver_seed, use_legacy_attributes=False,
            )
            lr.fit(Z[:, cols], y)
            # The mean inner score at the strength LogisticRegressionCV chose (its best).
            fits.append((float(np.max(np.asarray(lr.scores_).mean(0))), lr))
        best = int(np.argmax([f[0] for f in fits]))  # argmax: the first set on ties
        lr, cols = fits[best][1], sets[best]
        C = float(np.ravel(lr.C_)[0])
        cut = 0.0
        if threshold == "inner":
            from sklearn.linear_model import LogisticRegression
            from sklearn.model_selection import cross_val_predict

            one = LogisticRegression(C=C, l1_ratio=1.0 if penalty == "l1" else 0.0, solver=solver,
                                     class_weight=class_weight, max_iter=5000, random_state=solver_seed)
            scores = [cross_val_predict(one, Z[:, cols], y, cv=part, method="decision_function")
                      for part in partitions]
            cut = best_cut(np.concatenate(scores), np.tile(y, len(partitions)), balanced=class_weight == "balanced")
    coef = np.zeros((lr.coef_.shape[0], X.shape[1]))
    coef[:, cols] = lr.coef_ / scale[cols]
    intercept = lr.intercept_ - cut - (lr.coef_ * mean[cols] / scale[cols]).sum(1)
    return ConvexHead(coef, intercept, C, best)


def best_cut(scores: np.ndarray, y: np.ndarray, *, balanced: bool = False) -> float:
    """The cut of ``scores`` (positive above it) with the best accuracy on labels ``y`` (0/1).

    Cuts lie halfway between neighbouring distinct scores (and beyond both ends); among
    equally good cuts the one nearest 0, the logistic head's own cut, wins, so a threshold
    moves only as far as the inner folds give a reason to. ``balanced``: balanced accuracy.
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(y)
    u = np.unique(s)
    cuts = np.concatenate([[u[0] - 1.0], (u[:-1] + u[1:]) / 2, [u[-1] + 1.0]])
    pred = s[None, :] > cuts[:, None]
    hit = pred == (y[None, :] == 1)
    if balanced:
        acc = hit[:, y == 1].mean(1) / 2 + hit[:, y != 1].mean(1) / 2
    else:
        acc = hit.mean(1)
    best = np.flatnonzero(acc >= acc.max() - 1e-12)
    return float(cuts[best[np.argmin(np.abs(cuts[best]))]])


def check_head_scoring(scoring: str) -> None:
    """One-line error for a head scoring the convex head does not know."""
    if scoring not in ("log_loss", "accuracy"):
        raise ValueError(f"head_scoring must be 'log_loss' or 'accuracy', got {scoring!r}.")


def check_head_repeats(repeats) -> None:
    """One-line error for a number of inner-fold repeats that is not a positive integer."""
    if isinstance(repeats, (bool, np.bool_)) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"head_inner_repeats must be a positive integer, got {repeats!r}.")


def check_head_threshold(threshold: str, n_classes: int | None = None) -> None:
    """One-line errors for a head threshold that cannot work."""
    if threshold not in ("fixed", "inner"):
        raise ValueError(f"head_threshold must be 'fixed' or 'inner', got {threshold!r}.")
    if threshold == "inner" and n_classes is not None and n_classes != 2:
        raise ValueError(f"head_threshold='inner' needs two classes, got {n_classes}.")


def check_head_for_classes(threshold: str, class_weight, classes) -> None:
    """The head settings that depend on ``y``, checked once its classes are known and before any training."""
    check_head_threshold(threshold, len(classes))
    check_class_weight(class_weight, classes)


class HeadWorkers:
    """Where convex heads are fitted: here, one at a time (``n_jobs=1``), or in ``n_jobs`` worker processes.

    :meth:`submit` returns at once with a function that waits for the head, so the caller pushes
    and embeds the next members (torch, in this process) while the workers run liblinear, and the
    heads of every fold of a cross-validation share the workers. Processes, never threads:
    liblinear seeds one process-wide random generator per fit, so heads fitted concurrently in one
    process draw from each other's streams and a run no longer repeats; a worker runs its fits one
    at a time, so each head is the one it would be alone. At most ``2 * n_jobs`` heads are in
    flight (their features wait in memory); the workers (joblib's reusable loky executor) outlive
    the ``with`` block, so the next cross-validation does not start them again. Inside the block,
    torch in this process runs on the cores the workers leave.
    """

    def __init__(self, n_jobs: int = 1) -> None:
        import multiprocessing

        # A daemonic process (itself a worker) may not start workers: its heads are fitted here.
        self.n_jobs = 1 if multiprocessing.current_process().daemon else int(n_jobs)
        self._in_flight: deque = deque()
        self._executor = None

    def __enter__(self) -> "HeadWorkers":
        # The workers take n_jobs cores: torch here keeps what is left (at least one thread). Left at every core,
        # its threads spin against the workers while it pushes, and a Musk1 5 x 10 took 50 s instead of 32 s.
        self._threads = torch_threads(max(1, torch.get_num_threads() - self.n_jobs) if self.n_jobs > 1 else None)
        self._threads.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._in_flight.clear()
        self._threads.__exit__(*exc)

    def submit(self, **job) -> Callable[[], "ConvexHead"]:
        """Fit ``fit_convex_head(**job)``; returns a function that returns the fitted head."""
        if self.n_jobs <= 1:
            head = fit_convex_head(**job)
            return lambda: head
        if self._executor is None:
            from joblib.executor import get_memmapping_executor

            # joblib's own kind of reusable executor, the one process-wide pool its Parallel (and
            # scikit-learn's n_jobs) also takes over: a plain loky one left behind made their next
            # call fail. max_nbytes=None: the features travel pickled, not through temporary files.
            self._executor = get_memmapping_executor(self.n_jobs, max_nbytes=None)
        while len(self._in_flight) >= 2 * self.n_jobs:
            self._in_flight.popleft().result()
        future = self._executor.submit(fit_convex_head, **job)
        self._in_flight.append(future)
        return future.result


def refit_members(models, source, y_enc, classes, seeds, *, push: bool, head: str, penalty: str = "l2",
                  class_weight=None, threshold: str = "fixed", similarity: bool = False,
                  scoring: str = "log_loss", features: str = "all", repeats: int = 1,
                  chunk_size: int = 65_536, workers: HeadWorkers | None = None,
                  ) -> Callable[[], tuple[np.ndarray | None, list | None, list | None]]:
    """Push (optionally) and refit the head (``head="logistic"``) of each trained model, in place.

    ``source`` holds the training bags' instances as the models see them (standardised): a row
    source, :class:`~minitorch_proto.bags.StackedInstances` (one array in memory) or
    :class:`~minitorch_proto.training.distributed.StreamedInstances` (bags read when needed, so a
    collection that does not fit in memory gets the same push and head);
    ``class_weight`` maps the labels in ``classes`` to weights (or "balanced").
    ``similarity``: the head also reads MILES's similarity of each prototype
    (:meth:`~minitorch_proto.model.PrototypeMIL.add_similarity`), its width the median distance
    between (up to 1,000 sampled) training instances, as MILES sets it.
    ``scoring``, ``features`` (one of :data:`HEAD_FEATURES`) and ``repeats`` as the estimator's
    ``head_scoring``, ``head_features`` and ``head_inner_repeats``.
    The push happens now; the heads are fitted by ``workers`` (:class:`HeadWorkers`; ``None``: here,
    now). Returns a function that waits for the heads, copies them into the models and returns
    the prototype sources (n_models, D, 2) when pushing, and the chosen strengths and feature sets
    ("all" or "similarity") when refitting the head (else None for each).
    """
    class_weight = check_class_weight(class_weight, classes)
    workers = HeadWorkers(1) if workers is None else workers
    sources, pending, names = [], [], _HEAD_SETS[features]
    for model, seed in zip(models, seeds):
        with torch.no_grad():
            if push:
                pushed, src = source.nearest_across(*nearest_instances(
                    model.prototypes.detach().double().numpy(), source.pieces(), model.config.distance))
                model.prototypes.copy_(torch.as_tensor(pushed, dtype=model.prototypes.dtype))
                sources.append(src)
            if head == "logistic":
                if similarity:
                    model.add_similarity(median_pairwise_distance(source, random_state=int(seed)) ** 2)
                ids, parts = [], []
                for bag_ids, rows, local in source.groups():
                    ids.append(bag_ids)
                    parts.append(model.features_chunked(rows, local, len(bag_ids), int(chunk_size)).double().numpy())
                feats = source.gather(ids, parts)
                # The similarity block is the last D columns (PrototypeMIL.features).
                columns = {"all": np.arange(feats.shape[1]),
                           "similarity": np.arange(feats.shape[1] - len(model.prototypes), feats.shape[1])}
                pending.append(workers.submit(
                    features=feats, y_enc=y_enc, n_classes=len(classes), penalty=penalty,
                    class_weight=class_weight, random_state=int(seed), threshold=threshold, scoring=scoring,
                    column_sets=[columns[n] for n in names], repeats=repeats))

    def finish() -> tuple[np.ndarray | None, list | None, list | None]:
        fits = [wait() for wait in pending]
        with torch.no_grad():
            for model, fit in zip(models, fits):
                model.weight.copy_(torch.as_tensor(fit.weight, dtype=model.weight.dtype))
                model.bias.copy_(torch.as_tensor(fit.bias, dtype=model.bias.dtype))
        cs, chosen = [fit.C for fit in fits], [names[fit.columns] for fit in fits]
        return (np.stack(sources) if sources else None), (cs or None), (chosen or None)

    return finish


def check_class_weight(class_weight, classes=None):
    """``class_weight`` for the head, a one-line ValueError if it cannot be.

    None, "balanced" or a dict of positive finite weights. With ``classes`` (the labels of
    ``y``, in encoded order) a dict's keys must be among them, and it comes back keyed by the
    encoded class (0, 1, ...), as the head is fitted on encoded labels.
    """
    if class_weight is None or (isinstance(class_weight, str) and class_weight == "balanced"):
        return class_weight
    if not isinstance(class_weight, dict):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict {{class: weight}}, got {class_weight!r}.")
    for c, w in class_weight.items():
        if isinstance(w, (bool, np.bool_)) or not isinstance(w, (numbers.Real, np.number)) or not 0 < w < np.inf:
            raise ValueError(f"class_weight[{c!r}] must be a positive number, got {w!r}.")
    if classes is None:
        return class_weight
    known = np.asarray(classes).tolist()
    unknown = [c for c in class_weight if c not in known]
    if unknown:
        raise ValueError(f"class_weight names classes {unknown} that are not in y ({sorted(known)}).")
    return {known.index(c): float(w) for c, w in class_weight.items()}


def check_head_options(head: str, class_weight, bias: bool, monotone: bool, threshold: str = "fixed",
                       similarity: bool = False, scoring: str = "log_loss", features: str = "all",
                       repeats: int = 1) -> None:
    """One-line errors for head settings that cannot work together (checked before training)."""
    if head not in ("gradient", "logistic"):
        raise ValueError(f"head must be 'gradient' or 'logistic', got {head!r}.")
    check_bool("head_similarity", similarity)
    if similarity and head != "logistic":
        raise ValueError("head_similarity=True needs head='logistic' (the similarity block is fitted by the convex head).")
    check_head_scoring(scoring)
    if head == "gradient" and scoring != "log_loss":
        raise ValueError("head_scoring='accuracy' needs head='logistic' (it chooses that head's strength).")
    check_head_repeats(repeats)
    if head == "gradient" and repeats != 1:
        raise ValueError("head_inner_repeats > 1 needs head='logistic' (it repeats that head's inner folds).")
    if features not in HEAD_FEATURES:
        raise ValueError(f"head_features must be one of {list(HEAD_FEATURES)}, got {features!r}.")
    if features != "all" and not similarity:
        raise ValueError(f"head_features={features!r} needs head_similarity=True (it selects the similarity block).")
    check_head_threshold(threshold)
    if head == "gradient" and threshold != "fixed":
        raise ValueError("head_threshold='inner' needs head='logistic' (the cut is set on that head's inner folds).")
    check_class_weight(class_weight)
    if head == "gradient" and class_weight is not None:
        raise ValueError("class_weight needs head='logistic' (the gradient head trains unweighted, as the paper).")
    if head == "logistic" and not bias:
        raise ValueError("head='logistic' fits an intercept; it needs bias=True.")
    if head == "logistic" and monotone:
        raise ValueError("head='logistic' cannot keep the monotone variant's weights <= 0; use head='gradient'.")
