"""Repeated stratified cross-validation in which no test fold chooses anything.

Standardisation is fitted on each fold's training bags, hyper-parameters come
from the caller (the paper's Table 1, or an inner split of the training bags),
and the model evaluated is the one after the last epoch. The published code's
habit of scoring the test fold every 5 epochs and keeping the best test AUC is
available as a separately labelled evaluation (``"test_selected"``), so its
optimism can be measured, never as the default.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator
from sklearn.model_selection import StratifiedKFold

from ..model import PrototypeMILConfig
from ..training import TrainConfig
from ..utils import progress_bar
from ..validation import derived_seed
from .metrics import scores_from_proba

__all__ = [
    "TIE_DIGITS",
    "cross_validate",
    "mean_standard_error",
    "Fold",
    "EVALUATIONS",
    "stratified_folds",
    "split_file_folds",
    "evaluate_tasks",
    "CVTask",
    "summarize",
    "RESULT_COLUMNS",
    "prediction_rows",
]

EVALUATIONS = {
    "final": "model after the last epoch (nothing chosen on the test fold)",
    "test_selected": "best test-fold AUC over epochs 5, 10, ... (published code; optimistic, not a valid estimate)",
}
RESULT_COLUMNS = [
    "dataset", "method", "evaluation", "repeat", "fold", "seed", "n_train", "n_test",
    "epoch", "accuracy", "auc", "fit_seconds",
]


def prediction_rows(dataset: str, method: str, evaluation: str, fold: "Fold", test_ids, classes, y_test,
                    proba: np.ndarray) -> pd.DataFrame:
    """One fold's test bags as scored: the rows of a results folder's ``predictions.csv``.

    Columns ``dataset``, ``method``, ``evaluation``, ``repeat``, ``fold``, ``bag``
    (the data set's bag id), ``bag_index`` (its position in the data set), ``label``
    and ``predicted`` (classes as the user wrote them; ``predicted`` is the arg-max
    class, the one the fold's accuracy counts), then ``proba_<class>`` per class.
    Every method of one run scores the same bags of the same folds, so two methods'
    rows pair up on (``repeat``, ``bag``) for a paired test or a per-bag look.
    """
    classes = np.asarray(classes)
    proba = np.asarray(proba, dtype=np.float64)
    frame = pd.DataFrame(dict(dataset=dataset, method=method, evaluation=evaluation, repeat=fold.repeat,
                              fold=fold.fold, bag=np.asarray(test_ids), bag_index=np.asarray(fold.test),
                              label=classes[np.asarray(y_test, dtype=np.int64)],
                              predicted=classes[np.argmax(proba, axis=1)]))
    for j, c in enumerate(classes.tolist()):
        frame[f"proba_{c}"] = proba[:, j]
    return frame


def _ids_of(bags, bag_ids, n: int) -> np.ndarray:
    """The bag ids to write: given, the collection's own (a DiskBagDataset's), or positions."""
    ids = bag_ids if bag_ids is not None else getattr(bags, "bag_ids", None)
    ids = np.arange(n) if ids is None else np.asarray(ids)
    if len(ids) != n:
        raise ValueError(f"bag_ids has {len(ids)} entries for {n} bags.")
    return ids


@dataclass(frozen=True)
class Fold:
    """One train/test split: positions of bags in the data set, the seed of its model, and the
    seed of the shuffle that made it (``None`` for folds not drawn by a shuffle, e.g. split files)."""

    repeat: int
    fold: int
    train: np.ndarray
    test: np.ndarray
    seed: int
    split_seed: int | None = None


def stratified_folds(y: ArrayLike, n_repeats: int = 5, n_folds: int = 10, random_state: int = 0) -> list[Fold]:
    """``n_repeats`` x stratified ``n_folds``-fold splits, deterministic by ``random_state``.

    Repetition r (0-based) shuffles with seed ``random_state * n_repeats + r``, so runs with
    different ``random_state`` share no shuffle (``random_state + r`` would give ``--seed 1``
    four of ``--seed 0``'s five partitions); with ``random_state=0`` or one repetition the
    shuffle seed is ``random_state + r``, as before. The model of repetition r, fold f is
    seeded with ``1000 * random_state + 100 * r + f`` (1-based r and f); each ``Fold`` keeps
    its shuffle seed as ``split_seed``.

    Parameters
    ----------
    y : array-like, shape (n_bags,)
        Bag labels (any values); the folds keep their proportions.
    n_repeats : int, default=5
        Repetitions, each a fresh shuffle.
    n_folds : int, default=10
        Folds per repetition, at least 2.
    random_state : int, default=0
        A whole number >= 0 (not None: the folds and their seeds are the same on every run).

    Returns
    -------
    list of Fold
        ``n_repeats * n_folds`` folds, repetition by repetition.

    Raises
    ------
    ValueError
        If ``n_repeats``, ``n_folds`` or ``random_state`` is not a whole number in range, ``y`` holds
        one class, or its smallest class has fewer than ``n_folds`` bags.
    """
    from ..validation import check_int

    y = np.asarray(y)
    n_folds, n_repeats = check_int("n_folds", n_folds, 2), check_int("n_repeats", n_repeats)
    # An int, not None: the folds and their models' seeds are meant to be the same on every run.
    random_state = check_int("random_state", random_state, 0)
    _, counts = np.unique(y, return_counts=True)
    if len(counts) < 2:
        raise ValueError("Cross-validation needs at least two classes in y.")
    if counts.min() < n_folds:
        raise ValueError(
            f"The smallest class has {counts.min()} bags, fewer than n_folds={n_folds}: "
            "stratified folds are impossible; lower n_folds."
        )
    folds = []
    for r in range(n_repeats):
        split_seed = derived_seed(random_state * n_repeats + r)
        skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=split_seed)
        for f, (tr, te) in enumerate(skf.split(np.zeros(len(y)), y)):
            folds.append(Fold(r + 1, f + 1, tr, te, derived_seed(1000 * random_state + 100 * (r + 1) + (f + 1)),
                              split_seed))
    return folds


def split_file_folds(bag_ids: np.ndarray, splits: dict[tuple[int, int], np.ndarray], random_state: int = 0) -> list[Fold]:
    """Folds from the authors' split files (:func:`~minitorch_proto.data.read_split_files`).

    ``splits`` maps (repeat, fold) to the test bags' ids; the training bags are
    all the others.

    Parameters
    ----------
    bag_ids : ndarray, shape (n_bags,)
        The data set's bag ids (integers), in the order of its bags.
    splits : dict of (int, int) to ndarray
        (repeat, fold) -> ids of that fold's test bags, as ``read_split_files`` returns.
    random_state : int, default=0
        The model of repeat r, fold f is seeded ``1000 * random_state + 100 * r + f``.

    Returns
    -------
    list of Fold
        One per entry of ``splits``, sorted by (repeat, fold).

    Raises
    ------
    ValueError
        If a split names a bag id that is not in ``bag_ids``.
    """
    bag_ids = np.asarray(bag_ids)
    position: dict[int, int] = {}
    for i, b in enumerate(bag_ids):
        try:
            key = int(b)
        except (TypeError, ValueError):
            raise ValueError(f"split files name bags by integer id, but this data set's ids are text "
                             f"({str(b)!r}, ...).") from None
        if key in position:  # "001" and "1": one id in a split file, two bags here
            raise ValueError(f"bag ids {str(bag_ids[position[key]])!r} and {str(b)!r} are the same number {key}; a split "
                             "file could not tell them apart.")
        position[key] = i
    folds = []
    for (r, f), test_ids in sorted(splits.items()):
        missing = [int(t) for t in test_ids if int(t) not in position]
        if missing:
            raise ValueError(f"Split file rep{r} fold{f} names bag ids not in the data: {missing[:5]}.")
        if len(test_ids) == 0:
            raise ValueError(f"Split file rep{r} fold{f} lists no bags; every fold needs test bags.")
        ids = [int(t) for t in test_ids]
        twice = sorted({t for t in ids if ids.count(t) > 1})
        if twice:
            raise ValueError(f"Split file rep{r} fold{f} lists bag {twice[0]} twice.")
        test = np.array(sorted(position[int(t)] for t in test_ids))
        train = np.setdiff1d(np.arange(len(bag_ids)), test)
        folds.append(Fold(r, f, train, test, derived_seed(1000 * random_state + 100 * r + f)))
    return folds


def _fold_row(dataset: str, method: str, fold: Fold, evaluation: str, epoch, accuracy: float, auc: float,
              fit_seconds: float) -> dict:
    """One row of :data:`RESULT_COLUMNS`."""
    return dict(dataset=dataset, method=method, evaluation=evaluation, repeat=fold.repeat, fold=fold.fold,
                seed=fold.seed, n_train=len(fold.train), n_test=len(fold.test), epoch=epoch,
                accuracy=accuracy, auc=auc, fit_seconds=fit_seconds)


@dataclass
class CVTask:
    """One data set to cross-validate with one setting of the prototype model."""

    dataset: str
    bags: Sequence[np.ndarray]
    y: np.ndarray
    folds: Sequence[Fold]
    model_config: PrototypeMILConfig = field(default_factory=PrototypeMILConfig)
    train_config: TrainConfig = field(default_factory=TrainConfig)
    standardization: str = "feature"
    method: str = "prototype"
    bag_ids: np.ndarray | None = None  # written in predictions; None: positions
    classes: np.ndarray | None = None  # the user's names of labels 0..C-1, for predictions; None: 0..C-1

    def group_key(self) -> tuple:
        # Learning rates may differ inside one batched program; nothing else may (the number of
        # classes included: a two-class task batched with a three-class one trained as three).
        return (
            int(np.asarray(self.bags[0]).shape[1]),
            int(np.asarray(self.y).max()) + 1,
            self.model_config,
            replace(self.train_config, lr_prototypes=1.0, lr_classifier=1.0),
            self.standardization,
        )


def _encoded(task: CVTask) -> CVTask:
    """The task with labels 0..C-1 (the trainer indexes by label): -1/+1 had read -1 as the last class."""
    from ..validation import check_labels

    y, classes = check_labels(task.y, len(task.bags))
    if task.classes is None:
        return replace(task, y=y, classes=classes)
    if not np.array_equal(np.asarray(task.y), y) or len(classes) > len(task.classes):
        raise ValueError(f"task {task.dataset!r}: with classes given, y must hold their positions 0..C-1 "
                         f"(C = {len(task.classes)}); leave classes=None to encode raw labels.")
    return replace(task, y=y)


def evaluate_tasks(
    tasks: Sequence[CVTask],
    *,
    evaluations: Iterable[str] = ("final",),
    selection_every: int = 5,
    models_per_batch: int | None = None,
    device="auto",
    dtype=None,
    progress: bool = False,
    backend: str = "auto",
    return_predictions: bool = False,
) -> pd.DataFrame | tuple[pd.DataFrame, pd.DataFrame]:
    """Score the paper's prototype model on several (data set, setting) tasks' folds, training compatible ones together.

    The same models as :func:`cross_validate` over
    ``PrototypeMILClassifier`` with each task's settings, for the two things an
    estimator cannot do: train *several data sets* in one program (Table 2's
    Fox, Tiger and Elephant), and report the published code's test-fold
    selection (``"test_selected"``: each fold's best test AUC over epochs, an
    optimistic audit figure, never an estimate). Tasks whose bags have the same number of features and whose settings differ
    at most in the learning rates (the paper's Table 1 varies only those) become
    one batched program: e.g. the 150 models of Fox, Tiger and Elephant. Every
    model still sees only its own fold's training bags, standardised with its own
    statistics. ``backend`` chooses how :func:`~minitorch_proto.training.train_batched`
    runs them (compiled loops on the CPU by default).

    Parameters
    ----------
    tasks : sequence of CVTask
        Each a data set (bags, labels encoded 0..C-1, folds) with one setting.
    evaluations : iterable of str, default=("final",)
        Keys of :data:`EVALUATIONS` to report.
    selection_every : int, default=5
        With ``"test_selected"``: the epochs at which the test folds are scored.
    models_per_batch : int, optional
        Largest batched program; None (default): a whole group of compatible tasks at once.
    device : "auto", "cpu", "cuda" or torch.device, default="auto"
    dtype : torch.dtype, optional
        Of the arithmetic; None (default): ``train_batched``'s, torch.float32.
    progress : bool, default=False
        Show progress bars over batches and epochs.
    backend : {"auto", "compiled", "tensor"}, default="auto"
    return_predictions : bool, default=False
        Also return every test bag's probabilities (:func:`prediction_rows`; bags
        named by ``CVTask.bag_ids``, classes by ``CVTask.classes``).

    Returns
    -------
    DataFrame
        With :data:`RESULT_COLUMNS`, one row per task, fold and evaluation;
        ``fit_seconds`` is the batch's wall time divided by its number of models.
        With ``return_predictions``, a tuple ``(results, predictions)``.

    Raises
    ------
    ValueError
        If ``evaluations`` names an unknown evaluation.
    """
    from ..training import train_batched

    evaluations = tuple(evaluations)
    unknown = set(evaluations) - set(EVALUATIONS)
    if unknown:
        raise ValueError(f"Unknown evaluation(s) {sorted(unknown)}; choose from {sorted(EVALUATIONS)}.")
    groups: dict[tuple, list[CVTask]] = {}
    for task in tasks:
        task = _encoded(task)
        groups.setdefault(task.group_key(), []).append(task)
    rows, predicted = [], []
    for group in groups.values():
        # One pool holding every task's bags; each model indexes into it.
        offsets = np.cumsum([0] + [len(t.bags) for t in group])
        pool = [b for t in group for b in t.bags]
        y_pool = np.concatenate([np.asarray(t.y, dtype=np.int64) for t in group])
        models = [(t, k, f) for k, t in enumerate(group) for f in t.folds]
        size = models_per_batch or len(models)
        chunks = [models[i : i + size] for i in range(0, len(models), size)]
        names = "+".join(t.dataset for t in group)
        for chunk in progress_bar(chunks, progress and len(chunks) > 1, f"{names} batches"):
            t0 = group[0]
            fit = train_batched(
                pool,
                y_pool,
                [f.train + offsets[k] for _, k, f in chunk],
                [f.seed for _, _, f in chunk],
                t0.model_config,
                t0.train_config,
                n_classes=int(y_pool.max()) + 1,
                standardization=t0.standardization,
                lr_prototypes=[t.train_config.lr_prototypes for t, _, _ in chunk],
                lr_classifier=[t.train_config.lr_classifier for t, _, _ in chunk],
                eval_sets=[f.test + offsets[k] for _, k, f in chunk],
                eval_every=selection_every if "test_selected" in evaluations else None,
                device=device,
                progress=progress,
                backend=backend,
                **({"dtype": dtype} if dtype is not None else {}),
            )
            per_model = fit.seconds / len(chunk)
            last = int(t0.train_config.epochs)
            n_classes = int(y_pool.max()) + 1
            for m, (task, _, fold) in enumerate(chunk):
                y_test = np.asarray(task.y)[fold.test]
                chosen = {}  # evaluation -> epoch whose probabilities it scored
                if "final" in evaluations:
                    acc, auc = scores_from_proba(y_test, fit.evaluations[last][m])
                    rows.append(_fold_row(task.dataset, task.method, fold, "final", last, acc, auc, per_model))
                    chosen["final"] = last
                if "test_selected" in evaluations:
                    best = None
                    for epoch in sorted(fit.evaluations):
                        acc, auc = scores_from_proba(y_test, fit.evaluations[epoch][m])
                        key = -1.0 if np.isnan(auc) else auc
                        if best is None or key > best[0]:
                            best = (key, epoch, acc, auc)
                    rows.append(_fold_row(task.dataset, task.method, fold, "test_selected", best[1], best[2], best[3],
                                          per_model))
                    chosen["test_selected"] = best[1]
                if return_predictions:
                    ids = _ids_of(task.bags, task.bag_ids, len(task.y))[fold.test]
                    classes = np.arange(n_classes) if task.classes is None else task.classes
                    predicted += [prediction_rows(task.dataset, task.method, evaluation, fold, ids,
                                                  classes, y_test, fit.evaluations[epoch][m])
                                  for evaluation, epoch in chosen.items()]
    results = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    return (results, _concat(predicted)) if return_predictions else results


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _class_names(estimator) -> str:
    """``StandardizedMIL(MILES)``: a wrapper's class with the classes it wraps, so that different
    methods behind one wrapper do not share one ``method`` label (and one summary row)."""
    inner = getattr(estimator, "estimator", None)
    name = type(estimator).__name__
    return f"{name}({_class_names(inner)})" if hasattr(inner, "get_params") else name


def cross_validate(
    estimator: BaseEstimator,
    bags: Sequence[np.ndarray],
    y: ArrayLike,
    folds: Sequence[Fold],
    *,
    dataset: str = "custom",
    method: str | None = None,
    n_jobs: int = 1,
    return_estimators: bool = False,
    return_predictions: bool = False,
    bag_ids: ArrayLike | None = None,
) -> pd.DataFrame | tuple:
    """Cross-validate any bag estimator: one unfitted copy per fold, scored through ``predict_proba``.

    Fold f's copy is ``estimator`` with every ``random_state`` set to ``f.seed``
    (:func:`~minitorch_proto.meta_estimators.with_random_state`), fitted on the fold's
    training bags as given (raw: the estimator does its own preprocessing, as
    :func:`minitorch_proto.methods.make` builds them) and scored on its test bags with
    ``predict_proba``. When the estimator has ``fit_many(train_sets, estimators=...)``
    every fold's copy is fitted in that one call, so batched methods train together.

    Parameters
    ----------
    estimator : unfitted bag classifier (``fit``, ``predict_proba``, ``classes_``)
    bags, y : the data set; labels in any form ``check_labels`` accepts (the user's classes)
    folds : from :func:`stratified_folds` or :func:`split_file_folds`
    dataset, method : the ``dataset`` and ``method`` columns of the rows (default ``method``: the
        estimator's class with what it wraps, e.g. ``StandardizedMIL(MILES)``)
    n_jobs : workers for estimators fitted one by one inside ``fit_many`` (for the prototype model:
        worker processes for its members' convex heads); the results do not depend on it
    return_estimators : also return the fitted copies, one per fold
    return_predictions : also return every test bag's probabilities (:func:`prediction_rows`)
    bag_ids : the ids written in the predictions; None: the collection's own ``bag_ids`` if it has
        them (a :class:`~minitorch_proto.data.DiskBagDataset`), else positions

    Returns
    -------
    DataFrame with :data:`RESULT_COLUMNS`, one row per fold (evaluation ``"final"``);
    ``fit_seconds`` is the fitting wall time divided by the number of folds. With
    ``return_predictions`` and/or ``return_estimators``, a tuple: the results, then the
    predictions, then the fitted copies (each only if asked).
    """
    from ..meta_estimators import proba_in, with_random_state
    from ..validation import check_labels

    y = np.asarray(y)
    y_enc, classes = check_labels(y, len(bags))
    folds = list(folds)
    if not folds:
        raise ValueError("cross_validate needs at least one fold.")
    for f in folds:
        used = np.concatenate([np.asarray(f.train).ravel(), np.asarray(f.test).ravel()])
        if len(f.test) == 0 or used.min(initial=0) < 0 or used.max(initial=0) >= len(bags):
            raise ValueError(f"fold (repeat {f.repeat}, fold {f.fold}) names bags outside 0..{len(bags) - 1} or "
                             "tests none: were the folds made for other data?")
        if np.intersect1d(f.train, f.test).size or len(np.unique(f.test)) != len(f.test):
            raise ValueError(f"fold (repeat {f.repeat}, fold {f.fold}) tests bags it trains on, or one bag twice: "
                             "a fold's training and test bags must be disjoint.")
    copies = [with_random_state(estimator, f.seed) for f in folds]
    # Each bag fetched once: a lazy collection (DiskBagDataset) reads its file on every access, which would
    # give every fold its own copy of every bag (45 for 5 x 10) and leave the trainers nothing to share.
    fetched: dict[int, np.ndarray] = {}

    def bags_at(index) -> list[np.ndarray]:
        index = [int(i) for i in index]
        for i in index:
            if i not in fetched:
                fetched[i] = bags[i]
        return [fetched[i] for i in index]

    train_sets = [(bags_at(f.train), y[f.train]) for f in folds]
    t0 = time.perf_counter()
    if hasattr(estimator, "fit_many"):
        fitted = estimator.fit_many(train_sets, estimators=copies, n_jobs=n_jobs)
    else:
        fitted = [c.fit(b, t) for c, (b, t) in zip(copies, train_sets)]
    seconds = (time.perf_counter() - t0) / max(len(folds), 1)
    label = method or _class_names(estimator)
    ids = _ids_of(bags, bag_ids, len(bags)) if return_predictions else None
    rows, predicted = [], []
    for fold, est in zip(folds, fitted):
        proba = proba_in(est, bags_at(fold.test), classes)
        acc, auc = scores_from_proba(y_enc[fold.test], proba)
        # The epoch the model ends at, for an estimator trained by epochs (evaluate_tasks' rows have it too).
        epochs = est.get_params(deep=False).get("epochs") if hasattr(est, "get_params") else None
        epoch = int(epochs) if isinstance(epochs, (int, np.integer)) and not isinstance(epochs, bool) else np.nan
        rows.append(_fold_row(dataset, label, fold, "final", epoch, acc, auc, seconds))
        if return_predictions:
            predicted.append(prediction_rows(dataset, label, "final", fold, ids[fold.test], classes,
                                             y_enc[fold.test], proba))
    frame = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    extra = ([_concat(predicted)] if return_predictions else []) + ([list(fitted)] if return_estimators else [])
    return (frame, *extra) if extra else frame


#: Means are compared at this many decimals: two equal means summed in another order differ in the last bit
#: (Tiger, mi-Net mean: 0.8299999999999998 against its ensemble's 0.83, both 83 of 100 bags), and ranks and
#: choices must share a tie, not split it on rounding noise.
TIE_DIGITS = 12


def mean_standard_error(values: pd.Series, repeats: pd.Series) -> float:
    """Standard error of the mean of per-fold values (or paired per-fold differences).

    Over the repetition means when there are several repetitions (the folds of one repetition
    share training bags, so they are not independent replicates); with one repetition over its
    folds, which is optimistic; NaN for a single fold. The ladder and the ablation tables use it.
    :func:`summarize`'s ``*_se_repeats`` is the first form only (NaN for one repetition).
    """
    # Over the values that exist (an AUC of a one-class test fold is NaN): std skips NaN, so the count must too.
    values = pd.Series(np.asarray(values, dtype=float), index=np.asarray(repeats))
    means = values.groupby(level=0).mean().dropna()
    if len(means) > 1:
        return float(means.std(ddof=1) / np.sqrt(len(means)))
    values = values.dropna()
    return float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and two labelled spreads per (dataset, method, evaluation).

    Columns: ``accuracy_mean``, ``accuracy_std_folds`` (standard deviation over all
    folds, ddof=1), ``accuracy_se_repeats`` (standard error of the repetition means:
    their standard deviation / sqrt(number of repetitions); NaN for one repetition),
    the same three for ``auc`` (over the folds that have one: ``auc_n_folds`` of them; a test fold of
    one class has no AUC), ``n_folds``, ``n_repeats`` and ``fit_seconds_total`` (the sum of the
    rows' ``fit_seconds``, each a model's share of its fit's wall time).

    Parameters
    ----------
    results : pandas.DataFrame
        One row per fold, such as :func:`cross_validate` returns: at least the columns
        ``dataset``, ``method``, ``evaluation``, ``repeat``, ``accuracy``, ``auc`` and ``fit_seconds``.

    Returns
    -------
    pandas.DataFrame
        One row per (dataset, method, evaluation), in order of first appearance in ``results``:
        those three columns, then the ones above.

    Raises
    ------
    ValueError
        If ``results`` has no rows.
    """
    if results.empty:
        raise ValueError("No results to summarise.")
    out = []
    for key, g in results.groupby(["dataset", "method", "evaluation"], sort=False):
        row = dict(zip(["dataset", "method", "evaluation"], key))
        for metric in ("accuracy", "auc"):
            vals = g[metric].astype(float)
            rep_means = g.groupby("repeat")[metric].mean().dropna()  # a repetition without any value: none
            row[f"{metric}_mean"] = vals.mean()
            row[f"{metric}_std_folds"] = vals.std(ddof=1) if len(vals) > 1 else np.nan
            row[f"{metric}_se_repeats"] = (
                rep_means.std(ddof=1) / np.sqrt(len(rep_means)) if len(rep_means) > 1 else np.nan
            )
        row["n_folds"] = len(g)
        row["auc_n_folds"] = int(g["auc"].notna().sum())  # the AUC mean's folds: a one-class test fold has none
        row["n_repeats"] = g["repeat"].nunique()
        row["fit_seconds_total"] = g["fit_seconds"].sum()  # per-fold shares added up: not the same quantity
        out.append(row)
    return pd.DataFrame(out)
