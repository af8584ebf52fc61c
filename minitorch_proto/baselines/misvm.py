"""mi-SVM (Andrews, Tsochantaridis & Hofmann, NIPS 2002/2003): instance-level SVM with
imputed instance labels.

Algorithm (the paper's heuristic for the mixed-integer problem):

1. Instances of negative bags are negative (fixed). Instances of positive bags start
   positive. "Positive" is ``classes_[1]``, the label that sorts last (1 of 0/1, ``"normal"``
   of ``"cancer"``/``"normal"``): name the witness class so that it sorts last, or the
   assumption is applied to the other class.
2. Train an SVM on all instances with the current labels.
3. Relabel each positive bag's instances by the sign of the SVM decision value; if a
   positive bag ends up with no positive instance, its highest-scoring instance is made
   positive.
4. Repeat 2-3 until the labels stop changing or ``max_iter`` SVMs have been trained.

A bag's score is the largest decision value of its instances; it is predicted positive
when that score is > 0.

Hyper-parameters and where they come from
-----------------------------------------
* The algorithm, RBF kernel, bag score = max instance score: **paper**.
* ``C=1.0``, ``gamma="scale"`` (``1 / (n_features * Var(training instances))``, as
  scikit-learn defines it), ``max_iter=50``: **our defaults** (Andrews et al. chose C and
  the kernel width per data set; they do not cap the iterations).
* ``tune=True`` selects ``C`` and ``gamma_scale`` (a multiplier on gamma) from
  ``param_grid`` (default ``C in {1, 10, 100}``, ``gamma_scale in {0.5, 1, 2}``) by
  stratified ``inner_cv``-fold cross-validation over the training bags passed to ``fit``.
* ``max_instances`` (default ``None`` = use every instance): optional cap for very large
  data. When set, negative-bag instances are subsampled uniformly (at least one per bag);
  positive-bag instances are always all kept, so no witness can be lost.

``predict_proba`` is ``sigmoid(decision_function)`` - a monotone score, not calibrated.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike
from sklearn.svm import SVC
from sklearn.utils import check_random_state

from ..validation import check_bool, check_number, fits_fresh
from ._base import (
    SOURCE_DEFAULT,
    SOURCE_TUNED,
    BaseMILClassifier,
    segment_max_numpy,
    select_by_inner_cv,
    stack_bags,
)

__all__ = ["MISVM"]

DEFAULT_MISVM_GRID = {"C": [1.0, 10.0, 100.0], "gamma_scale": [0.5, 1.0, 2.0]}
#: Rows of instances scored at once by :func:`rbf_decision` (bounds its kernel block to
#: ``_ROWS x n_support_vectors`` doubles).
_ROWS = 4096
#: Up to this many training instances mi-SVM computes the RBF kernel matrix once per fit
#: (``8 n^2`` bytes: 330 MB for a Musk2 training fold of 6,447 instances, 537 MB at the cap)
#: and every SVM of the relabelling loop reads it; above it libsvm computes kernel columns
#: itself, as it must at whole-slide scale. Both give the same SVMs (``tests/test_baselines.py``).
GRAM_MAX_INSTANCES = 8192


def _rbf_block(x: np.ndarray, sv: np.ndarray, sv_sq: np.ndarray, gamma: float) -> np.ndarray:
    """``exp(-gamma |x_i - s_j|^2)`` as one BLAS product, written in place."""
    k = x @ sv.T
    k *= -2.0
    k += np.einsum("ij,ij->i", x, x)[:, None]
    k += sv_sq[None, :]
    np.maximum(k, 0.0, out=k)  # rounding can make a tiny squared distance negative
    k *= -gamma
    np.exp(k, out=k)
    return k


def rbf_gram(X: np.ndarray, gamma: float) -> np.ndarray:
    """The (n, n) RBF kernel matrix of the rows of ``X``, in libsvm's formula."""
    X = np.asarray(X, dtype=np.float64)
    return _rbf_block(X, X, np.einsum("ij,ij->i", X, X), float(gamma))


def rbf_decision(X: np.ndarray, sv: np.ndarray, coef: np.ndarray, intercept: float, gamma: float) -> np.ndarray:
    """Decision values ``sum_j coef_j k(x, s_j) + intercept`` of a binary RBF SVM, in row blocks.

    libsvm scores one (instance, support vector) pair at a time, about 1 GFLOP/s; mi-SVM
    rescoring every training instance after every SVM made that 60 % of its fit. Written as
    ``exp(-gamma (|x|^2 + |s|^2 - 2 x.s))`` the kernel is one BLAS product, and the result
    agrees with libsvm's to rounding (about 1e-13).
    """
    X = np.asarray(X, dtype=np.float64)
    sv_sq = np.einsum("ij,ij->i", sv, sv)
    out = np.empty(X.shape[0])
    for lo in range(0, X.shape[0], _ROWS):
        out[lo : lo + _ROWS] = _rbf_block(X[lo : lo + _ROWS], sv, sv_sq, float(gamma)) @ coef + intercept
    return out


def svc_decision(svc: SVC, X: np.ndarray) -> np.ndarray:
    """``svc.decision_function(X)`` of a fitted binary SVC; the RBF kernel through :func:`rbf_decision`."""
    if svc.kernel != "rbf" or len(svc.classes_) != 2:
        return svc.decision_function(X)
    return rbf_decision(X, svc.support_vectors_, svc.dual_coef_[0], float(svc.intercept_[0]), float(svc.gamma))


class MISVM(BaseMILClassifier):
    """mi-SVM (Andrews et al.); see the module docstring for details and sources.

    Parameters
    ----------
    C : float
        SVM penalty.
    kernel : str
        Any ``sklearn.svm.SVC`` kernel ("rbf" default).
    gamma : "scale", "auto" or float
        Kernel coefficient; "scale" = ``1 / (n_features * X.var())`` on training instances, "auto" = ``1 / n_features``.
    gamma_scale : float
        Multiplier applied to gamma (used by the tuning grid).
    degree : int
        Degree for the polynomial kernel.
    class_weight : None, "balanced" or dict
        A dict is keyed by the labels given to ``fit`` (``{"tumour": 3}``), as in scikit-learn.
        Instance class weights passed to ``SVC``.
    max_iter : int
        Most SVMs trained in the relabelling loop.
    max_instances : int or None
        Cap on training instances (negative-bag instances are subsampled).
    tune, param_grid, inner_cv : inner-CV selection of ``C`` and ``gamma_scale``.
    cache_size : float
        SVC kernel cache in MB.
    random_state : int, RandomState or None

    Attributes
    ----------
    svc_ : fitted ``SVC`` (on the kernel matrix, ``kernel="precomputed"``, for an RBF kernel and
        at most ``GRAM_MAX_INSTANCES`` training instances)
    support_vectors_ : ndarray, the support vectors (training instances) of ``svc_``
    instance_labels_ : ndarray of {-1, 1}, the final imputed labels of the used instances
    n_iter_ : int, SVMs trained
    converged_ : bool
    gamma_ : float
    best_params_, cv_results_ : when ``tune=True``, the inner search's choice and its table
    hyperparameter_source_ : str, where the settings came from (the defaults or the inner search)
    """

    hyperparameter_source = (
        "paper (algorithm, RBF kernel, max-instance bag score); default (C=1, "
        "gamma='scale', max_iter=50); 'tuned (inner CV)' when tune=True"
    )

    def __init__(
        self,
        C: float = 1.0,
        kernel: str = "rbf",
        gamma: float | str = "scale",
        gamma_scale: float = 1.0,
        degree: int = 3,
        class_weight: dict | str | None = None,
        max_iter: int = 50,
        max_instances: int | None = None,
        tune: bool = False,
        param_grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]] | None = None,
        inner_cv: int = 3,
        cache_size: float = 500.0,
        random_state: int | np.random.RandomState | None = None,
    ):
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.gamma_scale = gamma_scale
        self.degree = degree
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.max_instances = max_instances
        self.tune = tune
        self.param_grid = param_grid
        self.inner_cv = inner_cv
        self.cache_size = cache_size
        self.random_state = random_state

    @fits_fresh  # a failed fit leaves it unfitted, not half new labels, half old model
    def fit(self, bags: Sequence[np.ndarray], y: ArrayLike) -> "MISVM":
        """Run the mi-SVM relabelling loop on the training bags."""
        bags, y_enc = self._validate_fit_data(bags, y)
        check_number("C", self.C)
        check_number("gamma_scale", self.gamma_scale)
        if self.gamma not in ("scale", "auto"):
            check_number("gamma", self.gamma)
        if int(self.max_iter) < 1:
            raise ValueError(f"max_iter must be >= 1, got {self.max_iter}.")
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(0, 2**31 - 1))
        for stale in ("best_params_", "cv_results_"):
            self.__dict__.pop(stale, None)
        if check_bool("tune", self.tune):
            grid = self.param_grid if self.param_grid is not None else DEFAULT_MISVM_GRID
            best, results = select_by_inner_cv(self, bags, y_enc, grid, self.inner_cv, seed)
            self.cv_results_ = results
            if best:
                self.best_params_ = best
                self.hyperparameter_source_ = SOURCE_TUNED
                return self._fit_final(bags, y_enc, seed, **best)
        self.hyperparameter_source_ = SOURCE_DEFAULT
        return self._fit_final(bags, y_enc, seed)

    def _subsample(self, bags, y_enc, seed):
        cap = self.max_instances
        total = sum(b.shape[0] for b in bags)
        if cap is None or total <= int(cap):
            return bags
        rng = np.random.RandomState(seed)
        n_pos_inst = sum(b.shape[0] for b, t in zip(bags, y_enc) if t == 1)
        neg_sizes = np.array([b.shape[0] for b, t in zip(bags, y_enc) if t == 0])
        budget = max(int(cap) - n_pos_inst, len(neg_sizes))
        frac = min(1.0, budget / max(neg_sizes.sum(), 1))
        out = []
        for b, t in zip(bags, y_enc):
            if t == 1:
                out.append(b)
            else:
                k = max(1, int(round(frac * b.shape[0])))
                out.append(b[np.sort(rng.choice(b.shape[0], size=k, replace=False))])
        return out

    def _fit_final(self, bags, y_enc, seed, **overrides):
        C = float(overrides.get("C", self.C))
        gamma_scale = check_number("gamma_scale", overrides.get("gamma_scale", self.gamma_scale))
        bags = self._subsample(bags, y_enc, seed)
        X, offsets = stack_bags(bags)
        sizes = np.diff(offsets)
        inst_bag = np.repeat(np.arange(len(bags)), sizes)
        in_pos = (y_enc == 1)[inst_bag]
        if self.gamma == "scale":
            var = X.var()
            gamma = 1.0 / (X.shape[1] * var) if var > 0 else 1.0
        elif self.gamma == "auto":
            gamma = 1.0 / X.shape[1]
        else:
            gamma = float(self.gamma)
        self.gamma_ = gamma * gamma_scale
        self.C_ = C

        # The SVMs of the loop differ only in their labels, so with the kernel matrix in
        # memory each one skips libsvm's kernel evaluations (and scoring the training
        # instances is a slice of it): 3.7x faster per SVM on Musk2, less the matrix's cost once.
        gram = rbf_gram(X, self.gamma_) if self.kernel == "rbf" and X.shape[0] <= GRAM_MAX_INSTANCES else None
        pos_bags = np.flatnonzero(y_enc == 1)
        labels = np.where(in_pos, 1, -1)
        converged = False
        svc = None
        n_iter = 0
        for n_iter in range(1, int(self.max_iter) + 1):
            svc = SVC(
                C=C, kernel=self.kernel if gram is None else "precomputed", gamma=self.gamma_,
                degree=int(self.degree), class_weight=self._class_weight_for((-1, 1)), cache_size=float(self.cache_size),
            )
            svc.fit(X if gram is None else gram, labels)
            trained_labels = labels
            if gram is None:
                f = svc_decision(svc, X)
            else:
                f = gram[:, svc.support_] @ svc.dual_coef_[0] + float(svc.intercept_[0])
            new = labels.copy()
            new[in_pos] = np.where(f[in_pos] > 0, 1, -1)
            for b in pos_bags:
                lo, hi = offsets[b], offsets[b + 1]
                if not np.any(new[lo:hi] == 1):
                    new[lo + int(np.argmax(f[lo:hi]))] = 1
            if np.array_equal(new, labels):
                converged = True
                break
            labels = new
        self.svc_ = svc
        self.support_vectors_ = X[svc.support_] if gram is not None else svc.support_vectors_
        self.instance_labels_ = trained_labels
        self.n_iter_ = n_iter
        self.converged_ = converged
        return self

    def instance_decision_function(self, bags) -> list[np.ndarray]:
        """SVM decision value of every instance, one array per bag."""
        bags = self._validate_predict_data(bags)
        X, offsets = stack_bags(bags)
        f = self._decision(X)
        return [f[offsets[i] : offsets[i + 1]] for i in range(len(bags))]

    def decision_function(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Bag score: the maximum instance decision value, shape (n_bags,)."""
        bags = self._validate_predict_data(bags)
        X, offsets = stack_bags(bags)
        return segment_max_numpy(self._decision(X), offsets).astype(np.float64)

    def _decision(self, X: np.ndarray) -> np.ndarray:
        svc = self.svc_
        if svc.kernel not in ("rbf", "precomputed"):  # "precomputed" is the RBF kernel matrix
            return svc.decision_function(X)
        return rbf_decision(X, self.support_vectors_, svc.dual_coef_[0], float(svc.intercept_[0]), self.gamma_)
