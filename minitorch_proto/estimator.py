"""A scikit-learn style estimator around the prototype MIL model."""
from __future__ import annotations

import numbers
import os
from dataclasses import fields
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError

from .bags import bag_groups
from .model import PrototypeMILConfig, head_logits, mean_class_probabilities
from .convex_head import RECOMMENDED, check_head_options
from .estimator_files import load_estimator, save_estimator
from .estimator_training import fit_streaming as streamed_fit, train_together
from .training import TrainConfig
from .validation import (check_bags, check_bool, check_chunk_size, check_distance_range, check_finite_scores,
                         check_int, check_verbose, frames_in_model_order, own_feature_names, seed_from)

__all__ = ["PrototypeMILClassifier", "load_model", "RECOMMENDED"]


class PrototypeMILClassifier(ClassifierMixin, BaseEstimator):
    """Prototype MIL classifier (Yuksekgonul, Sivrikaya & Baydogan, 2019).

    Parameters
    ----------
    n_prototypes : int, default=24
        D, the number of learned prototypes.
    distance : {"euclidean", "sqeuclidean", "manhattan", "cosine", "pseudo"}, default="euclidean"
    pooling : tuple of {"min", "mean", "max"}, default=("min",)
    layer_norm : bool or None, default=None
        Per-bag layer normalisation of the pooled distances (Eq. 4). None: on, except
        with ``monotone=True``, which needs it off (so ``monotone=True`` alone works).
    layer_norm_eps : float, default=1e-6
        Added to the variance in Eq. 4b.
    bias : bool, default=True
    lambda_w, lambda_p, lambda_d : float, default=3e-4, 4e-3, 1e-2
        Weights of the L1 classifier penalty, the prototype-norm penalty and the
        distance penalty (Table 1).
    weight_penalty, prototype_penalty, distance_penalty : str
        See :class:`~minitorch_proto.model.PrototypeMILConfig`.
    init : {"normal", "instances", "kmeans++"}, default="normal"
    monotone : bool, default=False
        Classifier weights kept <= 0, so the score of ``classes_[1]`` (the label sorting last:
        encode the witness class so) respects the standard MIL assumption by construction; needs
        ``pooling=("min",)``, layer norm off (implied when ``layer_norm`` is None) and two classes.
    lr_prototypes, lr_classifier : float, default=9e-5, 3e-5
        Adam learning rates (Table 1, Musk1).
    epochs : int, default=100
    batch_size : int, default=1
    sampling, lr_halving_every, accumulate_gradients :
        Training-loop switches, see :class:`~minitorch_proto.training.TrainConfig`.
    betas, eps : tuple of float and float, default=(0.9, 0.999) and 1e-8 (Adam's coefficients)
    standardization : {"feature", "instance", "none"}, default="feature"
        Fitted on the bags passed to :meth:`fit` only.
    device : str, default="auto"
        "auto" uses CUDA when available.
    backend : {"auto", "compiled", "tensor"}, default="auto"
        How training runs (:func:`~minitorch_proto.training.train_batched`): a compiled
        loop on the CPU, or batched tensor operations (CPU or CUDA). Same result.
    random_state : int, numpy RandomState or Generator, or None, default=0
        Seeds the initial parameters and the order of the bags (scikit-learn's
        convention: None draws fresh entropy at each fit; a generator gives its
        next draw, so successive fits differ).
    n_seeds : int, default=1
        Train this many models, seeded ``random_state``, ``random_state + 1``, ..., in one
        batched program, and average their class probabilities (a seed ensemble). Each
        member equals ``PrototypeMILClassifier(random_state=random_state + j).fit(...)``;
        :meth:`member` returns it as a fitted single model (for explanations and plots).
    verbose : bool or int, default=False
        Show a progress bar over epochs (a whole number >= 0 as in scikit-learn: any but 0 shows it).
    chunk_size : int, default=65536
        Instances processed at a time when predicting (and when training with
        :meth:`fit_streaming`), so memory stays bounded however large the bags.
        A positive integer.
    autocast : {None, "bf16"}, default=None
        Compute the instance-prototype matrix products under bf16 autocast while
        training (tensor engine or :meth:`fit_streaming`; CPU or CUDA).
    push : bool, default=False
        After training, replace each prototype by its nearest training instance
        (:func:`~minitorch_proto.convex_head.push_prototypes`); ``prototype_sources_``
        then says which instance each prototype is.
    head : {"gradient", "logistic"}, default="gradient"
        "gradient": the classifier trained with the prototypes by Eq. 1 (the paper).
        "logistic": after training (and pushing), the classifier is refitted on the frozen
        features of the training bags as a logistic regression whose strength is chosen on
        stratified inner folds of those bags (:func:`~minitorch_proto.convex_head.fit_convex_head`).
    head_penalty : {"l2", "l1"}, default="l2"
        Penalty of the "logistic" head.
    class_weight : None, "balanced" or dict, default=None
        Weights of the classes in the "logistic" head's loss, as in scikit-learn (a dict
        maps the labels given to ``fit`` to weights): "balanced" makes unbalanced bag sets usable.
    head_threshold : {"fixed", "inner"}, default="fixed"
        Where the "logistic" head (two classes) puts its decision: "fixed" at probability 0.5;
        "inner" at the cut with the best accuracy (balanced accuracy with
        ``class_weight="balanced"``) on the head's inner folds of the training bags, folded into
        the bias (probabilities shift, their ranking does not).
    head_similarity : bool, default=False
        The "logistic" head also reads MILES's similarity of each prototype to the bag
        (Chen, Bi & Wang 2006): ``max_k exp(-||x_k - p||^2 / sigma^2)`` over the bag's
        standardised instances, with sigma the median distance between (up to 1,000 sampled)
        training instances. The head's weight then has ``D * len(pooling) + D`` columns,
        the similarity block last; every explanation in ``minitorch_proto.evaluation`` covers it.
    head_scoring : {"log_loss", "accuracy"}, default="log_loss"
        What chooses the "logistic" head's strength (and ``head_features="inner"``'s set) on its inner
        folds: log-loss, or accuracy (balanced accuracy with ``class_weight="balanced"``).
    head_features : {"all", "similarity", "inner"}, default="all"
        What the "logistic" head reads (the rest get weight 0): every feature, the similarity block
        alone (needs ``head_similarity=True``), or whichever of the two scores better inside.
    head_inner_repeats : int, default=1
        Draws of the "logistic" head's inner folds; its choices take the mean score over all of them.

    Attributes
    ----------
    classes_ : ndarray of the distinct labels seen in ``fit``.
    model_ : PrototypeMIL, the fitted torch module (on the CPU); the first member of an ensemble.
    models_ : list of PrototypeMIL, every member (one unless ``n_seeds > 1``).
    standardizer_ : BagStandardizer
    history_ : list of dict, per-epoch mean of each loss term.
    prototype_sources_ : int ndarray (n_members, n_prototypes, 2)
        Only with ``push=True``: (training bag index, instance index) of the instance each
        prototype of each member is, positions in the bags given to ``fit``.
    head_C_ : list of float
        Only with ``head="logistic"``: each member's chosen inverse strength.
    head_features_ : list of str
        Only with ``head="logistic"``: what each member's head reads, "all" or "similarity".
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when fitted on DataFrame bags (or with ``feature_names=``); predicting
        DataFrame bags then matches their columns by name.

    Examples
    --------
    >>> from minitorch_proto import PrototypeMILClassifier, load_benchmark
    >>> data = load_benchmark("musk1")                        # doctest: +SKIP
    >>> clf = PrototypeMILClassifier(epochs=100).fit(data.bags, data.y)  # doctest: +SKIP
    >>> clf.predict_proba(data.bags[:3])                      # doctest: +SKIP
    """

    def __init__(
        self,
        n_prototypes: int = 24,
        distance: str = "euclidean",
        pooling: Sequence[str] = ("min",),
        layer_norm: bool | None = None,
        bias: bool = True,
        lambda_w: float = 3e-4,
        lambda_p: float = 4e-3,
        lambda_d: float = 1e-2,
        weight_penalty: str = "l1",
        prototype_penalty: str = "norm",
        distance_penalty: str = "min",
        init: str = "normal",
        layer_norm_eps: float = 1e-6,
        monotone: bool = False,
        lr_prototypes: float = 9e-5,
        lr_classifier: float = 3e-5,
        epochs: int = 100,
        batch_size: int = 1,
        sampling: str = "shuffle",
        lr_halving_every: int | None = None,
        accumulate_gradients: bool = False,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        standardization: str = "feature",
        device: str = "auto",
        backend: str = "auto",
        random_state: int | np.random.RandomState | np.random.Generator | None = 0,
        n_seeds: int = 1,
        verbose: bool = False,
        chunk_size: int = 65_536,
        autocast: str | None = None,
        push: bool = False,
        head: str = "gradient",
        head_penalty: str = "l2",
        class_weight: dict | str | None = None,
        head_threshold: str = "fixed",
        head_similarity: bool = False,
        head_scoring: str = "log_loss",
        head_features: str = "all",
        head_inner_repeats: int = 1,
    ) -> None:
        self.n_prototypes = n_prototypes
        self.distance = distance
        self.pooling = pooling
        self.layer_norm = layer_norm
        self.bias = bias
        self.lambda_w = lambda_w
        self.lambda_p = lambda_p
        self.lambda_d = lambda_d
        self.weight_penalty = weight_penalty
        self.prototype_penalty = prototype_penalty
        self.distance_penalty = distance_penalty
        self.init = init
        self.layer_norm_eps = layer_norm_eps
        self.monotone = monotone
        self.lr_prototypes = lr_prototypes
        self.lr_classifier = lr_classifier
        self.epochs = epochs
        self.batch_size = batch_size
        self.sampling = sampling
        self.lr_halving_every = lr_halving_every
        self.accumulate_gradients = accumulate_gradients
        self.betas = betas
        self.eps = eps
        self.standardization = standardization
        self.device = device
        self.backend = backend
        self.random_state = random_state
        self.n_seeds = n_seeds
        self.verbose = verbose
        self.chunk_size = chunk_size
        self.autocast = autocast
        self.push = push
        self.head = head
        self.head_penalty = head_penalty
        self.class_weight = class_weight
        self.head_threshold = head_threshold
        self.head_similarity = head_similarity
        self.head_scoring = head_scoring
        self.head_features = head_features
        self.head_inner_repeats = head_inner_repeats

    def __sklearn_tags__(self):
        # A classifier whose ``transform`` gives the distance features, so it is also a
        # transformer (its output keeps no input feature names). Its input is a list of bags,
        # not one 2-D array: scikit-learn's checks that feed a single matrix fail for that reason.
        from sklearn.utils import TransformerTags

        tags = super().__sklearn_tags__()
        tags.transformer_tags = TransformerTags(preserves_dtype=[])
        tags.non_deterministic = self.random_state is None
        return tags

    @classmethod
    def recommended(cls, **overrides) -> "PrototypeMILClassifier":
        """The recommended model: prototypes started on and pushed onto real instances, a convex head.

        One recipe for every data set (:data:`~minitorch_proto.convex_head.RECOMMENDED`), a 2-seed
        ensemble whose members each have 1,024 k-means++ prototypes from the training instances, cosine
        distance, min/mean/max pooling, one epoch of training, each prototype pushed onto its nearest
        training instance, and an L1 logistic head on the pooled distances and MILES's similarity of
        each prototype, or the similarity alone: its strength and that choice by inner accuracy
        (``head_scoring="accuracy"``, ``head_features="inner"``). ``overrides`` are ordinary parameters
        (``n_seeds=1`` gives one model); the result is an ordinary estimator (``clone``, ``save``/``load`` work).
        What it is in practice (training barely moves the prototypes; transductive scaling): :mod:`~minitorch_proto.convex_head`.

        Parameters
        ----------
        **overrides
            Constructor parameters that replace the recipe's (any of :class:`PrototypeMILClassifier`'s).

        Returns
        -------
        PrototypeMILClassifier
            Unfitted.
        """
        return cls(**{**RECOMMENDED, **overrides})

    @classmethod
    def from_configs(cls, model_config: PrototypeMILConfig, train_config: TrainConfig,
                     **params) -> "PrototypeMILClassifier":
        """The estimator whose :meth:`model_config` and :meth:`train_config` are these (``params`` set the rest)."""
        values = {f.name: getattr(model_config, f.name) for f in fields(PrototypeMILConfig)}
        values.update({f.name: getattr(train_config, f.name) for f in fields(TrainConfig)})
        values["pooling"] = tuple(values["pooling"])
        return cls(**{**values, **params})

    # ------------------------------------------------------------ configs
    def model_config(self) -> PrototypeMILConfig:
        """The :class:`PrototypeMILConfig` these parameters describe (every field is a parameter)."""
        values = {f.name: getattr(self, f.name) for f in fields(PrototypeMILConfig)}
        if values["layer_norm"] is None:  # implied: on, except for the monotone variant, which needs it off
            values["layer_norm"] = not bool(self.monotone)
        if isinstance(values["pooling"], str):
            values["pooling"] = (values["pooling"],)
        return PrototypeMILConfig(**values)

    def train_config(self) -> TrainConfig:
        """The :class:`TrainConfig` these parameters describe (every field is a parameter)."""
        return TrainConfig(**{f.name: getattr(self, f.name) for f in fields(TrainConfig)})

    # -------------------------------------------------------------- fit
    def fit(self, bags: Sequence[np.ndarray], y, on_epoch_end=None, *,
            feature_names: Sequence[str] | None = None) -> "PrototypeMILClassifier":
        """Fit on a sequence of bags (each n_instances x n_features) and their labels.

        Bags may be pandas DataFrames with the same columns: their names are kept
        in ``feature_names_in_`` (``feature_names`` names the columns of array bags).

        ``on_epoch_end(epoch, model)``, if given, is called once with epoch 0 before
        training (the initial parameters) and after every epoch, with a
        :class:`PrototypeMIL` holding the current parameters (``standardizer_`` is
        already fitted by then). Nothing of an earlier fit survives; a fit that raises leaves the estimator unfitted.

        Parameters
        ----------
        bags : sequence of array-like of shape (n_instances, n_features)
            One array (or DataFrame) per bag; bags may differ in size, not in features.
        y : array-like of shape (n_bags,)
            Bag labels (any sortable labels; ``classes_`` holds them sorted).
        on_epoch_end : callable, default=None
            ``on_epoch_end(epoch, model)``, as above.
        feature_names : sequence of str, default=None
            Names of array bags' columns (DataFrame bags bring their own).

        Returns
        -------
        self : PrototypeMILClassifier
            Fitted.
        """
        names = own_feature_names(bags, feature_names)
        train_together(self, [(bags, y)], [self], on_epoch_end)
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        return self

    def fit_seeds(self, bags: Sequence[np.ndarray], y, seeds: Sequence[int]) -> list["PrototypeMILClassifier"]:
        """Fit one copy of this estimator per seed, all in one batched program.

        Returns fitted clones with ``random_state`` set to each seed; each equals
        ``clone(self).set_params(random_state=seed).fit(bags, y)``, but training
        them together costs little more than training one (see :mod:`minitorch_proto.training.batched`).

        Parameters
        ----------
        bags, y
            As for :meth:`fit`.
        seeds : sequence of int
            One ``random_state`` per copy; not empty.

        Returns
        -------
        list of PrototypeMILClassifier
            Fitted copies, in the order of ``seeds`` (this estimator itself is not changed).
        """
        seeds = [seed_from(s) for s in seeds]  # 0.7 is refused as random_state=0.7 is, not read as 0
        if not seeds:
            raise ValueError("seeds is empty.")
        clones = [clone(self).set_params(random_state=s) for s in seeds]
        train_together(self, [(bags, y)] * len(seeds), clones)
        return clones

    def fit_many(self, train_sets, random_states=None, *, estimators=None,
                 n_jobs: int = 1) -> list["PrototypeMILClassifier"]:
        """Fit one copy per ``(bags, y)`` in ``train_sets``, batched: the hook of :func:`~minitorch_proto.evaluation.cross_validate`.

        Each returned estimator equals ``clone(copy).fit(bags, y)`` fitted alone; copies whose
        parameters differ at most in ``random_state`` and the two learning rates (a
        cross-validation's folds, a learning-rate grid's candidates) train as one batched
        program over one pool of bags, so a 5 x 10 cross-validation costs little more than
        a few single fits. A bag object shared by several training sets is stored once.

        Parameters
        ----------
        train_sets : sequence of (bags, y)
        random_states : sequence of int, optional (one seed per training set, for copies of this estimator)
        estimators : sequence of unfitted PrototypeMILClassifier, optional (one per training set, instead)
        n_jobs : int, default=1
            Worker processes for the convex heads, shared by every training set's members and fitted while
            the next set is pushed (:class:`~minitorch_proto.convex_head.HeadWorkers`); the same result for any value.

        Returns
        -------
        list of the fitted estimators, in the order of ``train_sets``
        """
        train_sets = list(train_sets)
        if estimators is None:
            if random_states is None or len(random_states) != len(train_sets):
                raise ValueError("fit_many needs one random state per training set.")
            estimators = [clone(self).set_params(random_state=int(s)) for s in random_states]
        estimators = list(estimators)
        if len(estimators) != len(train_sets):
            raise ValueError(f"fit_many got {len(estimators)} estimators for {len(train_sets)} training sets.")
        groups: dict[str, list[int]] = {}
        for i, est in enumerate(estimators):
            if not isinstance(est, PrototypeMILClassifier):
                raise TypeError(f"fit_many fits PrototypeMILClassifier copies, got {type(est).__name__}.")
            shared = {k: v for k, v in est.get_params(deep=False).items()
                      if k not in ("random_state", "lr_prototypes", "lr_classifier")}
            groups.setdefault(repr(sorted(shared.items())), []).append(i)
        for members in groups.values():
            train_together(estimators[members[0]], [train_sets[i] for i in members], [estimators[i] for i in members],
                           n_jobs=n_jobs)
        return estimators

    def _check_settings(self) -> int:
        """One-line errors for settings that cannot work, before any data are read; returns ``n_seeds``."""
        flags = ["bias", "monotone", "push", "accumulate_gradients"] + ["layer_norm"] * (self.layer_norm is not None)
        for name in flags:  # "False" read from text would be truthy
            check_bool(name, getattr(self, name))
        check_head_options(self.head, self.class_weight, bool(self.bias), bool(self.monotone), self.head_threshold,
                           self.head_similarity, self.head_scoring, self.head_features, self.head_inner_repeats)
        check_chunk_size(self.chunk_size)
        check_verbose(self.verbose)
        return check_int("n_seeds", self.n_seeds)

    def member(self, j: int) -> "PrototypeMILClassifier":
        """Ensemble member ``j`` (0-based) as a fitted single model, sharing this estimator's standardisation.

        Raises
        ------
        IndexError
            If there is no member ``j`` (an estimator has ``n_seeds`` members).
        """
        self._check_fitted()
        models, j = getattr(self, "models_", [self.model_]), int(j)
        if not 0 <= j < len(models):
            raise IndexError(f"member {j} does not exist: this estimator has {len(models)} member(s).")
        base = getattr(self, "seed_", self.random_state)
        seed = (int(base) if isinstance(base, (numbers.Integral, np.integer)) else 0) + j
        one = clone(self).set_params(n_seeds=1, random_state=seed)
        for name in ("classes_", "n_features_in_", "standardizer_", "feature_names_in_"):  # shared by the members
            if hasattr(self, name):
                setattr(one, name, getattr(self, name))
        for name in ("prototype_sources_", "head_C_", "head_features_"):  # one entry per member
            if hasattr(self, name):
                setattr(one, name, getattr(self, name)[j : j + 1])
        one.model_ = models[j]
        one.models_ = [one.model_]
        histories = getattr(self, "histories_", None)
        one.history_ = histories[j] if histories else getattr(self, "history_", [])
        one.histories_ = [one.history_]
        return one

    def _ensemble(self) -> list["PrototypeMILClassifier"] | None:
        """The members when this is an ensemble of several, else None."""
        self._check_fitted()
        models = getattr(self, "models_", None)
        return [self.member(j) for j in range(len(models))] if models and len(models) > 1 else None

    def fit_streaming(self, bags, y, *, dtype: torch.dtype = torch.float32) -> "PrototypeMILClassifier":
        """Fit reading the bags lazily, in bounded memory, in one process or data-parallel under torchrun.

        Same model and training semantics as :meth:`fit` (the reference trainer's), run by
        :func:`~minitorch_proto.training.distributed.train_streaming`: each bag is read when its
        minibatch comes up, ``chunk_size`` instances at a time, and the standardisation is fitted in
        one streaming pass. Inside an initialised ``torch.distributed`` process group (``torchrun``)
        each process takes its share of every global minibatch of ``batch_size`` bags and all end
        with the same model. Every setting works (:meth:`recommended` too): a data-driven start reads
        only the instances it draws, the ``n_seeds`` members train one after another, and the push and
        the convex head read the bags once more, ``chunk_size`` instances or one bag at a time (each
        process its share). The result agrees with :meth:`fit` to rounding (the engines sum in
        different orders).

        Parameters
        ----------
        bags : sequence of array-like or DiskBagDataset
            A list of arrays (or DataFrames with the same columns), or a lazy
            :class:`~minitorch_proto.data.disk.DiskBagDataset` read a bag at a time.
        y : array-like of shape (n_bags,)
            Bag labels.
        dtype : torch.dtype, default=torch.float32
            The precision training runs in (float64 for exact comparisons).

        Returns
        -------
        self : PrototypeMILClassifier
            Fitted.
        """
        streamed_fit(self, bags, y, dtype=dtype)
        return self

    # ---------------------------------------------------------- predict
    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise NotFittedError("This PrototypeMILClassifier is not fitted yet; call fit(bags, y) first.")

    def _features(self, bags) -> list[torch.Tensor]:
        """Every member's normalised features, the bags read and standardised once for all members.

        A lazy collection (with ``rows`` and ``sizes``, such as
        :class:`~minitorch_proto.data.disk.DiskBagDataset`) is read a group of bags
        of about ``chunk_size`` instances at a time, so it is never all in memory.
        """
        self._check_fitted()
        check_chunk_size(self.chunk_size)
        bags = frames_in_model_order(bags, getattr(self, "feature_names_in_", None))
        if hasattr(bags, "rows") and hasattr(bags, "sizes"):
            groups = [self._head_features(check_bags(bags[a:b], self.n_features_in_), first=a)
                      for a, b in bag_groups(bags.sizes, self.chunk_size)]
            return [torch.cat(member) for member in zip(*groups)]
        return self._head_features(check_bags(bags, self.n_features_in_))

    def _head_features(self, bags: list[np.ndarray], first: int = 0) -> list[torch.Tensor]:
        sizes, models = np.array([len(b) for b in bags]), getattr(self, "models_", [self.model_])
        std = self.standardizer_.transform_stacked(bags)
        check_distance_range(np.split(std, np.cumsum(sizes)[:-1]), self.model_.prototypes.dtype, first,  # views
                             self.standardization)
        index = np.repeat(np.arange(len(bags)), sizes)
        return [m.features_chunked(std, index, len(bags), self.chunk_size) for m in models]

    def _logits(self, bags) -> list[torch.Tensor]:
        """Every member's logits."""
        with torch.no_grad():
            logits = [head_logits(phi, m.weight, m.bias)
                      for phi, m in zip(self._features(bags), getattr(self, "models_", [self.model_]))]
        for one in logits:
            check_finite_scores(one, "scores", self.standardization)
        return logits

    def predict_proba(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order (an ensemble's members averaged).

        Parameters
        ----------
        bags : sequence of array-like of shape (n_instances, n_features_in_), or DiskBagDataset
            Bags with the training bags' features (DataFrames matched by column name); a lazy
            dataset is read about ``chunk_size`` instances at a time.

        Returns
        -------
        ndarray of shape (n_bags, n_classes)
        """
        return mean_class_probabilities(self._logits(bags))

    def decision_function(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Logit of ``classes_[1]`` (two classes) or every class's logit; for an ensemble, the log-odds
        of the averaged probabilities (two classes) or their log.

        Parameters
        ----------
        bags : sequence of array-like of shape (n_instances, n_features_in_), or DiskBagDataset
            Bags with the training bags' features (DataFrames matched by column name); a lazy
            dataset is read about ``chunk_size`` instances at a time.

        Returns
        -------
        ndarray of shape (n_bags,) for two classes, else (n_bags, n_classes)
        """
        logits = self._logits(bags)
        if len(logits) > 1:
            p = np.clip(mean_class_probabilities(logits), 1e-300, 1.0)
            return np.log(p[:, 1]) - np.log(p[:, 0]) if p.shape[1] == 2 else np.log(p)
        logits = logits[0].double().numpy()
        return logits[:, 0] if logits.shape[1] == 1 else logits

    def predict(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Predicted labels: the class of highest probability (two classes: 0.5 on :meth:`predict_proba`).

        Parameters
        ----------
        bags : sequence of array-like of shape (n_instances, n_features_in_), or DiskBagDataset
            Bags with the training bags' features (DataFrames matched by column name); a lazy
            dataset is read about ``chunk_size`` instances at a time.

        Returns
        -------
        ndarray of shape (n_bags,)
            Labels from ``classes_``.
        """
        self._check_fitted()
        return self.classes_[np.argmax(self.predict_proba(bags), axis=1)]

    def transform(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Normalised distance features Phi (n_bags, D * len(pooling)) fed to the classifier.

        With ``head_similarity=True`` the similarity block follows (D more columns).
        For an ensemble: every member's features side by side.

        Parameters
        ----------
        bags : sequence of array-like of shape (n_instances, n_features_in_), or DiskBagDataset
            Bags with the training bags' features (DataFrames matched by column name); a lazy
            dataset is read about ``chunk_size`` instances at a time.

        Returns
        -------
        ndarray of shape (n_bags, n_members * n_columns)
        """
        with torch.no_grad():
            return np.hstack([phi.double().numpy() for phi in self._features(bags)])

    # -------------------------------------------------------- save/load
    def save(self, path: str | os.PathLike) -> Path:
        """Write the fitted model to one safetensors file with a verified JSON header.

        The header holds the parameters, classes, feature names (when known), standardisation mode, training
        histories and the heads' choices; the tensors the state dicts, standardisation statistics and pushed sources.
        The write is atomic, and :meth:`load` checks a sha256 of everything (:mod:`~minitorch_proto.serialization`).

        Parameters
        ----------
        path : str or PathLike
            Where to write (conventionally ``*.safetensors``); missing parent folders are made, and an
            existing file is replaced whole.

        Returns
        -------
        Path
            The path written.
        """
        self._check_fitted()
        return save_estimator(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "PrototypeMILClassifier":
        """Read a model written by :meth:`save` (or by version 0.1, safely).

        Raises
        ------
        FileNotFoundError
            If there is no file at ``path``.
        ModelFileError
            (a ``ValueError``) with a one-line message if the file is damaged (checksum), not a
            model file, unsafe (a pickle that would need code to run) or holds another estimator.
        """
        return load_estimator(cls, path)


def load_model(path: str | os.PathLike) -> PrototypeMILClassifier:
    """Shorthand for :meth:`PrototypeMILClassifier.load`."""
    return PrototypeMILClassifier.load(path)
