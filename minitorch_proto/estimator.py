"""A scikit-learn style estimator around the prototype MIL model."""
from __future__ import annotations

import numbers
import os
from dataclasses import fields
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError

from .bags import StackedInstances, bag_groups, shared_pool
from .model import PrototypeMILConfig, head_logits, mean_class_probabilities
from .convex_head import RECOMMENDED, HeadWorkers, check_head_for_classes, check_head_options, refit_members
from .preprocessing import BagStandardizer
from .estimator_files import load_estimator, save_estimator
from .training import TrainConfig
from .utils import resolve_device
from .validation import (align_frames, check_bags, check_chunk_size, check_distance_range, check_finite_scores,
                         check_int, check_labels, check_named_bags, check_shared_bags, frame_columns,
                         frames_in_model_order, fresh_fit, own_feature_names, seed_from, derived_seed)

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
    verbose : bool, default=False
        Show a progress bar over epochs.
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
        class_weight=None,
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
        """
        names = own_feature_names(bags, feature_names)
        self._train([(bags, y)], [self], on_epoch_end)
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        return self

    def fit_seeds(self, bags: Sequence[np.ndarray], y, seeds: Sequence[int]) -> list["PrototypeMILClassifier"]:
        """Fit one copy of this estimator per seed, all in one batched program.

        Returns fitted clones with ``random_state`` set to each seed; each equals
        ``clone(self).set_params(random_state=seed).fit(bags, y)``, but training
        them together costs little more than training one (see :mod:`minitorch_proto.training.batched`).
        """
        seeds = [seed_from(s) for s in seeds]  # 0.7 is refused as random_state=0.7 is, not read as 0
        if not seeds:
            raise ValueError("seeds is empty.")
        clones = [clone(self).set_params(random_state=s) for s in seeds]
        self._train([(bags, y)] * len(seeds), clones, None)
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
            estimators[members[0]]._train([train_sets[i] for i in members], [estimators[i] for i in members], None,
                                          n_jobs)
        return estimators

    def _check_settings(self) -> int:
        """One-line errors for settings that cannot work, before any data are read; returns ``n_seeds``."""
        check_head_options(self.head, self.class_weight, bool(self.bias), bool(self.monotone), self.head_threshold,
                           self.head_similarity, self.head_scoring, self.head_features, self.head_inner_repeats)
        check_chunk_size(self.chunk_size)
        return check_int("n_seeds", self.n_seeds)

    def _train(self, sets, targets, on_epoch_end, n_jobs: int = 1) -> None:
        """Fit ``targets[t]`` on ``sets[t] = (bags, y)``, all in one batched program with this one's settings."""
        from .training import train_batched

        with fresh_fit(targets):  # nothing of an earlier fit survives, nothing half-done is left
            mconf, tconf = self.model_config(), self.train_config()  # validates hyper-parameters first
            k = self._check_settings()
            prepared, classes0, seen = [], None, {}
            for bags, y in sets:
                names = frame_columns(bags)
                if names is not None:
                    bags = align_frames(bags, names)
                bags = check_shared_bags(bags, seen, dtype=None)  # float32 kept: every use below converts itself
                y_enc, classes = check_labels(y, len(bags))
                if classes0 is None:
                    classes0 = classes
                elif len(classes) != len(classes0) or not np.array_equal(classes, classes0):
                    # One batched program needs one label encoding; sets with other classes train apart.
                    raise ValueError("training sets fitted together must have the same classes; fit them one by one.")
                standardizer = BagStandardizer(self.standardization).fit(bags)
                # Bag by bag (a generator): a standardised copy of every bag would only be thrown away.
                check_distance_range((standardizer.transform_instances(b) for b in bags), torch.float32,
                                     standardization=self.standardization)
                prepared.append((bags, y_enc, classes, names, standardizer))
            check_head_for_classes(self.head_threshold, self.class_weight, classes0)  # before training, not after
            pool, labels, index_sets = shared_pool([(bags, y_enc) for bags, y_enc, *_ in prepared])
            seeds = [seed_from(est.random_state) for est in targets]  # once each: a RandomState advances
            for est, seed, (bags, _, classes, names, standardizer) in zip(targets, seeds, prepared):
                # Set before training: on_epoch_end may read standardizer_.
                est.seed_ = seed
                est.classes_, est.n_features_in_, est.standardizer_ = classes, bags[0].shape[1], standardizer
                if names is not None:
                    est.feature_names_in_ = np.asarray(names, dtype=object)
            # Each target's members are seeded seed, seed + 1, ...: all targets' members train together.
            model_seeds = [derived_seed(int(s) + j) for s in seeds for j in range(k)]
            fit = train_batched(
                pool, labels, [index_sets[t] for t in range(len(targets)) for _ in range(k)],
                model_seeds, mconf, tconf, n_classes=len(classes0), standardization=self.standardization,
                lr_prototypes=[float(e.lr_prototypes) for e in targets for _ in range(k)],
                lr_classifier=[float(e.lr_classifier) for e in targets for _ in range(k)],
                device=resolve_device(self.device), progress=self.verbose,
                on_epoch_end=None if on_epoch_end is None else (lambda epoch, f: on_epoch_end(epoch, f.module(0))),
                backend=self.backend, autocast=self.autocast,
            )
            for m in range(len(model_seeds)):
                if not all(bool(torch.isfinite(p).all()) for p in fit.module(m).parameters()):
                    raise ValueError(
                        f"training diverged (seed {model_seeds[m]}): the parameters became NaN or infinite; lower the "
                        "learning rates or standardise the features (standardization='feature')."
                    )
            for t, est in enumerate(targets):
                est.models_ = [fit.module(t * k + j).eval() for j in range(k)]
                est.histories_ = [fit.history[t * k + j] for j in range(k)]
                est.model_, est.history_ = est.models_[0], est.histories_[0]
            del fit  # its pool of every instance is not needed past here: on large sets, memory the push can use
            # Heads in processes, never threads (HeadWorkers says why; threads moved Fox's 5 x 10 from .623 to .625).
            with HeadWorkers(n_jobs) as workers:  # every target's heads share them, fitted while the next one pushes
                done = [est._refit_after_training(StackedInstances(std.transform_stacked(bags), [len(b) for b in bags]),
                                                  y_enc, classes, model_seeds[t * k:(t + 1) * k], workers)
                        for t, (est, (bags, y_enc, classes, _, std)) in enumerate(zip(targets, prepared))
                        if est.push or est.head == "logistic"]
                for finish in done:
                    finish()

    def _refit_after_training(self, source, y_enc, classes, seeds, workers) -> Callable[[], None]:
        """Push each member's prototypes onto training instances (``source``, a row source) now; returns what
        stores its head once fitted."""
        pending = refit_members(
            self.models_, source, y_enc, classes, seeds, push=bool(self.push), head=self.head,
            penalty=self.head_penalty, class_weight=self.class_weight, threshold=self.head_threshold,
            similarity=bool(self.head_similarity), scoring=self.head_scoring, features=self.head_features,
            repeats=int(self.head_inner_repeats), chunk_size=int(self.chunk_size), workers=workers)

        def finish() -> None:
            sources, cs, chosen = pending()
            if sources is not None:
                self.prototype_sources_ = sources
            if cs is not None:
                self.head_C_, self.head_features_ = cs, chosen
        return finish

    def member(self, j: int) -> "PrototypeMILClassifier":
        """Ensemble member ``j`` (0-based) as a fitted single model, sharing this estimator's standardisation."""
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
        with the same model. ``bags`` may be a list of arrays or a :class:`~minitorch_proto.data.disk.DiskBagDataset`.
        Every setting works (:meth:`recommended` too): a data-driven start reads only the instances it
        draws, the ``n_seeds`` members train one after another, and the push and the convex head read
        the bags once more, ``chunk_size`` instances or one bag at a time (each process its share).
        The result agrees with :meth:`fit` to rounding (the engines sum in different orders).
        """
        from .training.distributed import StreamedInstances, agree_across_ranks, train_streaming
        with fresh_fit([self]):

            mconf, tconf = self.model_config(), self.train_config()
            k = self._check_settings()
            names = None  # DataFrame bags: by column name, as fit reads them; a lazy dataset checks its own files
            if not hasattr(bags, "rows"):
                bags, names = check_named_bags(bags)
            y_enc, classes = check_labels(y, len(bags))
            check_head_for_classes(self.head_threshold, self.class_weight, classes)
            # Under torchrun: rank 0's seed (random_state=None draws one per process), one collection.
            seed = self.seed_ = agree_across_ranks(seed_from(self.random_state), bags, y_enc)
            fits, standardizer = [], None  # fitted by the first member's pass, shared by the others
            for j in range(k):  # member j is seeded seed + j, as fit seeds it
                fit = train_streaming(
                    bags, y_enc, mconf, tconf, seed=derived_seed(seed + j), n_classes=len(classes),
                    standardization=self.standardization,
                    standardizer=standardizer, chunk_size=int(self.chunk_size), dtype=dtype,
                    device=resolve_device(self.device), autocast=self.autocast, progress=self.verbose,
                )
                diverged = [h["epoch"] for h in fit.history if not np.isfinite(h.get("total", 0.0))]
                if diverged or not all(bool(torch.isfinite(p).all()) for p in fit.model.parameters()):
                    where = f"at epoch {diverged[0]}" if diverged else "in its last steps"
                    raise ValueError(f"training diverged {where}: the loss became NaN or infinite; lower the learning "
                                     "rates (--lr-prototypes, --lr-classifier), or rescale very large features "
                                     "(the streamed fit does not check their range first).")
                fits.append(fit)
                standardizer = fit.standardizer
            self.classes_, self.n_features_in_, self.standardizer_ = classes, fits[0].model.n_features, standardizer
            if names:
                self.feature_names_in_ = np.asarray(names, dtype=object)
            self.models_ = [f.model.float().eval() for f in fits]
            self.histories_ = [f.history for f in fits]
            self.model_, self.history_ = self.models_[0], self.histories_[0]
            if self.push or self.head == "logistic":
                source = StreamedInstances(bags, standardizer, int(self.chunk_size))
                with HeadWorkers(1) as workers:
                    self._refit_after_training(source, y_enc, classes, [derived_seed(seed + j) for j in range(k)], workers)()
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
        """Class probabilities, shape (n_bags, n_classes), columns in ``classes_`` order (members averaged)."""
        return mean_class_probabilities(self._logits(bags))

    def decision_function(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Logit of the positive class (two classes) or the logits (n_bags, C); for an ensemble, the log-odds
        (two classes) or the log of the averaged probabilities."""
        logits = self._logits(bags)
        if len(logits) > 1:
            p = np.clip(mean_class_probabilities(logits), 1e-300, 1.0)
            return np.log(p[:, 1]) - np.log(p[:, 0]) if p.shape[1] == 2 else np.log(p)
        logits = logits[0].double().numpy()
        return logits[:, 0] if logits.shape[1] == 1 else logits

    def predict(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Predicted labels (threshold 0.5 for two classes)."""
        self._check_fitted()
        return self.classes_[np.argmax(self.predict_proba(bags), axis=1)]

    def transform(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Normalised distance features Phi (n_bags, D * len(pooling)) fed to the classifier.

        With ``head_similarity=True`` the similarity block follows (D more columns).
        For an ensemble: every member's features side by side.
        """
        with torch.no_grad():
            return np.hstack([phi.double().numpy() for phi in self._features(bags)])

    # -------------------------------------------------------- save/load
    def save(self, path: str | os.PathLike) -> Path:
        """Write the fitted model to one safetensors file with a verified JSON header.

        The header holds the parameters, classes, feature names (when known), standardisation mode, training
        histories and the heads' choices; the tensors the state dicts, standardisation statistics and pushed sources.
        The write is atomic, and :meth:`load` checks a sha256 of everything (:mod:`~minitorch_proto.serialization`).
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
