"""A scikit-learn style estimator around the prototype MIL model."""
from __future__ import annotations

import json
from dataclasses import replace
import os
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, clone

from .model import PrototypeMIL, PrototypeMILConfig, class_probabilities, head_logits, normalize_features
from .preprocessing import BagStandardizer
from .training import TrainConfig
from .utils import resolve_device
from .validation import check_bags, check_labels

__all__ = ["PrototypeMILClassifier", "load_model"]

_CHECKPOINT_FORMAT = 1


class PrototypeMILClassifier(ClassifierMixin, BaseEstimator):
    """Prototype MIL classifier (Yuksekgonul, Sivrikaya & Baydogan, 2019).

    Parameters
    ----------
    n_prototypes : int, default=24
        D, the number of learned prototypes.
    distance : {"euclidean", "sqeuclidean", "manhattan", "cosine", "pseudo"}, default="euclidean"
    pooling : tuple of {"min", "mean", "max"}, default=("min",)
    layer_norm : bool, default=True
        Per-bag layer normalisation of the pooled distances (Eq. 4).
    bias : bool, default=True
    lambda_w, lambda_p, lambda_d : float, default=3e-4, 4e-3, 1e-2
        Weights of the L1 classifier penalty, the prototype-norm penalty and the
        distance penalty (Table 1).
    weight_penalty, prototype_penalty, distance_penalty : str
        See :class:`~minitorch_proto.model.PrototypeMILConfig`.
    init : {"normal", "instances", "kmeans++"}, default="normal"
    monotone : bool, default=False
        Classifier weights kept <= 0, so the score respects the standard MIL
        assumption by construction; needs ``pooling=("min",)``, ``layer_norm=False``
        and two classes (see :func:`~minitorch_proto.model.monotone_config`).
    lr_prototypes, lr_classifier : float, default=9e-5, 3e-5
        Adam learning rates (Table 1, Musk1).
    epochs : int, default=100
    batch_size : int, default=1
    sampling, lr_halving_every, accumulate_gradients :
        Training-loop switches, see :class:`~minitorch_proto.training.TrainConfig`.
    standardization : {"feature", "instance", "none"}, default="feature"
        Fitted on the bags passed to :meth:`fit` only.
    device : str, default="auto"
        "auto" uses CUDA when available.
    backend : {"auto", "compiled", "tensor"}, default="auto"
        How training runs (:func:`~minitorch_proto.training.train_batched`): a compiled
        loop on the CPU, or batched tensor operations (CPU or CUDA). Same result.
    random_state : int, default=0
        Seeds the initial parameters and the order of the bags.
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
    autocast : {None, "bf16"}, default=None
        Compute the instance-prototype matrix products under bf16 autocast while
        training (tensor engine or :meth:`fit_streaming`; CPU or CUDA).

    Attributes
    ----------
    classes_ : ndarray of the distinct labels seen in ``fit``.
    model_ : PrototypeMIL, the fitted torch module (on the CPU); the first member of an ensemble.
    models_ : list of PrototypeMIL, every member (one unless ``n_seeds > 1``).
    standardizer_ : BagStandardizer
    history_ : list of dict, per-epoch mean of each loss term.
    n_features_in_ : int

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
        layer_norm: bool = True,
        bias: bool = True,
        lambda_w: float = 3e-4,
        lambda_p: float = 4e-3,
        lambda_d: float = 1e-2,
        weight_penalty: str = "l1",
        prototype_penalty: str = "norm",
        distance_penalty: str = "min",
        init: str = "normal",
        monotone: bool = False,
        lr_prototypes: float = 9e-5,
        lr_classifier: float = 3e-5,
        epochs: int = 100,
        batch_size: int = 1,
        sampling: str = "shuffle",
        lr_halving_every: int | None = None,
        accumulate_gradients: bool = False,
        standardization: str = "feature",
        device: str = "auto",
        backend: str = "auto",
        random_state: int = 0,
        n_seeds: int = 1,
        verbose: bool = False,
        chunk_size: int = 65_536,
        autocast: str | None = None,
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
        self.monotone = monotone
        self.lr_prototypes = lr_prototypes
        self.lr_classifier = lr_classifier
        self.epochs = epochs
        self.batch_size = batch_size
        self.sampling = sampling
        self.lr_halving_every = lr_halving_every
        self.accumulate_gradients = accumulate_gradients
        self.standardization = standardization
        self.device = device
        self.backend = backend
        self.random_state = random_state
        self.n_seeds = n_seeds
        self.verbose = verbose
        self.chunk_size = chunk_size
        self.autocast = autocast

    # ------------------------------------------------------------ configs
    def model_config(self) -> PrototypeMILConfig:
        """The :class:`PrototypeMILConfig` these parameters describe."""
        return PrototypeMILConfig(
            n_prototypes=int(self.n_prototypes),
            distance=self.distance,
            pooling=tuple(self.pooling) if not isinstance(self.pooling, str) else (self.pooling,),
            layer_norm=bool(self.layer_norm),
            bias=bool(self.bias),
            lambda_w=float(self.lambda_w),
            lambda_p=float(self.lambda_p),
            lambda_d=float(self.lambda_d),
            weight_penalty=self.weight_penalty,
            prototype_penalty=self.prototype_penalty,
            distance_penalty=self.distance_penalty,
            init=self.init,
            monotone=bool(self.monotone),
        )

    def train_config(self) -> TrainConfig:
        """The :class:`TrainConfig` these parameters describe."""
        return TrainConfig(
            epochs=int(self.epochs),
            lr_prototypes=float(self.lr_prototypes),
            lr_classifier=float(self.lr_classifier),
            batch_size=int(self.batch_size),
            sampling=self.sampling,
            lr_halving_every=self.lr_halving_every,
            accumulate_gradients=bool(self.accumulate_gradients),
        )

    # -------------------------------------------------------------- fit
    def fit(self, bags: Sequence[np.ndarray], y, on_epoch_end=None) -> "PrototypeMILClassifier":
        """Fit on a sequence of bags (each n_instances x n_features) and their labels.

        ``on_epoch_end(epoch, model)``, if given, is called once with epoch 0 before
        training (the initial parameters) and after every epoch, with a
        :class:`PrototypeMIL` holding the current parameters (``standardizer_`` is
        already fitted by then).
        """
        seed = int(self.random_state) if self.random_state is not None else 0
        self._fit_many(bags, y, [seed], [self], on_epoch_end)
        return self

    def fit_seeds(self, bags: Sequence[np.ndarray], y, seeds: Sequence[int]) -> list["PrototypeMILClassifier"]:
        """Fit one copy of this estimator per seed, all in one batched program.

        Returns fitted clones with ``random_state`` set to each seed; each equals
        ``clone(self).set_params(random_state=seed).fit(bags, y)``, but training
        them together costs little more than training one (see :mod:`minitorch_proto.training.batched`).
        """
        seeds = [int(s) for s in seeds]
        if not seeds:
            raise ValueError("seeds is empty.")
        clones = [clone(self).set_params(random_state=s) for s in seeds]
        self._fit_many(bags, y, seeds, clones, None)
        return clones

    def _fit_many(self, bags, y, seeds, targets, on_epoch_end) -> None:
        from .training import train_batched

        mconf, tconf = self.model_config(), self.train_config()  # validates hyper-parameters first
        k = self._n_members()
        # Each target's members are seeded seed, seed + 1, ...: all targets' members train together.
        seeds = [int(s) + j for s in seeds for j in range(k)]
        bags = check_bags(bags)
        y_enc, classes = check_labels(y, len(bags))
        standardizer = BagStandardizer(self.standardization).fit(bags)
        for est in targets:
            est.classes_, est.n_features_in_, est.standardizer_ = classes, bags[0].shape[1], standardizer
        hook = None
        if on_epoch_end is not None:
            hook = lambda epoch, fit: on_epoch_end(epoch, fit.module(0))  # noqa: E731
        fit = train_batched(
            bags, y_enc, [np.arange(len(bags))] * len(seeds), seeds, mconf, tconf, n_classes=len(classes),
            standardization=self.standardization, device=resolve_device(self.device), progress=self.verbose,
            on_epoch_end=hook, backend=self.backend, autocast=self.autocast,
        )
        for t, est in enumerate(targets):
            est.models_ = [fit.module(t * k + j).eval() for j in range(k)]
            est.histories_ = [fit.history[t * k + j] for j in range(k)]
            est.model_, est.history_ = est.models_[0], est.histories_[0]

    def _n_members(self) -> int:
        k = int(self.n_seeds)
        if k < 1:
            raise ValueError(f"n_seeds must be >= 1, got {self.n_seeds}.")
        return k

    def member(self, j: int) -> "PrototypeMILClassifier":
        """Ensemble member ``j`` (0-based) as a fitted single model, sharing this estimator's standardisation."""
        self._check_fitted()
        models = getattr(self, "models_", [self.model_])
        if not 0 <= int(j) < len(models):
            raise IndexError(f"member {j} does not exist: this estimator has {len(models)} member(s).")
        seed = (int(self.random_state) if self.random_state is not None else 0) + int(j)
        one = clone(self).set_params(n_seeds=1, random_state=seed)
        one.classes_, one.n_features_in_, one.standardizer_ = self.classes_, self.n_features_in_, self.standardizer_
        one.model_ = models[int(j)]
        one.models_ = [one.model_]
        histories = getattr(self, "histories_", None)
        one.history_ = histories[int(j)] if histories else getattr(self, "history_", [])
        one.histories_ = [one.history_]
        return one

    def _ensemble(self) -> list["PrototypeMILClassifier"] | None:
        """The members when this is an ensemble of several, else None."""
        self._check_fitted()
        models = getattr(self, "models_", None)
        return [self.member(j) for j in range(len(models))] if models and len(models) > 1 else None

    def fit_streaming(self, bags, y, *, dtype: torch.dtype = torch.float32) -> "PrototypeMILClassifier":
        """Fit reading the bags lazily, in bounded memory, in one process or data-parallel under torchrun.

        Same model and training semantics as :meth:`fit` (the reference trainer's),
        run by :func:`~minitorch_proto.training.distributed.train_streaming`: each bag
        is read when its minibatch comes up, ``chunk_size`` instances at a time, and
        the standardisation is fitted in one streaming pass. Inside an initialised
        ``torch.distributed`` process group (``torchrun``) each process takes its
        share of every global minibatch of ``batch_size`` bags and all end with the
        same model. ``bags`` may be a list of arrays or a
        :class:`~minitorch_proto.data.disk.DiskBagDataset`. Only ``init="normal"``
        is supported. In float32 the result agrees with :meth:`fit` to rounding (the
        engines sum in different orders); in float64 to about 1e-12.
        """
        from .training.distributed import train_streaming

        mconf, tconf = self.model_config(), self.train_config()
        if not hasattr(bags, "rows"):
            bags = check_bags(bags)  # a lazy dataset checks its files itself, as it reads them
        y_enc, classes = check_labels(y, len(bags))
        seed = int(self.random_state) if self.random_state is not None else 0
        fit = train_streaming(
            bags, y_enc, mconf, tconf, seed=seed, n_classes=len(classes), standardization=self.standardization,
            chunk_size=int(self.chunk_size), dtype=dtype, device=resolve_device(self.device), autocast=self.autocast,
            progress=self.verbose,
        )
        self.classes_, self.n_features_in_, self.standardizer_ = classes, fit.model.n_features, fit.standardizer
        self.history_ = fit.history
        self.model_ = fit.model.float().eval()
        return self

    # ---------------------------------------------------------- predict
    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("This PrototypeMILClassifier is not fitted yet; call fit(bags, y) first.")

    def _features(self, bags) -> torch.Tensor:
        """Normalised features of bags, computed chunk by chunk (bounded memory).

        A lazy collection (with ``rows`` and ``sizes``, such as
        :class:`~minitorch_proto.data.disk.DiskBagDataset`) is read a group of bags
        of about ``chunk_size`` instances at a time, so it is never all in memory.
        """
        self._check_fitted()
        if hasattr(bags, "rows") and hasattr(bags, "sizes"):
            ends = np.cumsum(np.asarray(bags.sizes))
            cuts, start = [0], 0
            for i, end in enumerate(ends):
                if end - start > self.chunk_size and i > cuts[-1]:
                    cuts.append(i)
                    start = ends[i - 1]
            cuts.append(len(bags))
            phi = torch.cat([self._pooled(check_bags(bags[a:b], self.n_features_in_))
                             for a, b in zip(cuts[:-1], cuts[1:])])
        else:
            phi = self._pooled(check_bags(bags, self.n_features_in_))
        return normalize_features(phi, self.model_.config)

    def _pooled(self, bags: list[np.ndarray]) -> torch.Tensor:
        std = self.standardizer_.transform(bags)
        sizes = np.array([len(b) for b in std])
        bag_index = np.repeat(np.arange(len(std)), sizes)
        return self.model_.pooled_chunked(np.concatenate(std), bag_index, len(std), self.chunk_size)[0]

    def _logits(self, bags) -> torch.Tensor:
        with torch.no_grad():
            return head_logits(self._features(bags), self.model_.weight, self.model_.bias)

    def predict_proba(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Class probabilities, shape (n_bags, n_classes), columns in ``classes_`` order (members averaged)."""
        members = self._ensemble()
        if members:
            return np.mean([m.predict_proba(bags) for m in members], axis=0)
        return class_probabilities(self._logits(bags).double()).numpy()

    def decision_function(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Logit of the positive class (two classes) or the logits (n_bags, C).

        For an ensemble: the log-odds (two classes) or the log of the averaged probabilities.
        """
        if self._ensemble():
            p = np.clip(self.predict_proba(bags), 1e-300, 1.0)
            return np.log(p[:, 1]) - np.log(p[:, 0]) if p.shape[1] == 2 else np.log(p)
        logits = self._logits(bags).double().numpy()
        return logits[:, 0] if logits.shape[1] == 1 else logits

    def predict(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Predicted labels (threshold 0.5 for two classes)."""
        self._check_fitted()
        return self.classes_[np.argmax(self.predict_proba(bags), axis=1)]

    def transform(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Normalised distance features Phi (n_bags, D * len(pooling)) fed to the classifier.

        For an ensemble: every member's features side by side (n_bags, n_seeds * D * len(pooling)).
        """
        members = self._ensemble()
        if members:
            return np.hstack([m.transform(bags) for m in members])
        with torch.no_grad():
            return self._features(bags).double().numpy()

    # -------------------------------------------------------- save/load
    def save(self, path: str | os.PathLike) -> Path:
        """Write the fitted model, its configuration and standardisation to one file.

        The file is written to a temporary name and renamed, so an interrupted
        save never leaves a truncated checkpoint behind.
        """
        self._check_fitted()
        path = Path(path)
        payload = {
            "format": _CHECKPOINT_FORMAT,
            "params": json.dumps({k: (list(v) if isinstance(v, tuple) else v) for k, v in self.get_params().items()}),
            "classes": self.classes_.tolist(),
            "n_features": int(self.n_features_in_),
            "state_dict": self.model_.state_dict(),
            "standardizer": self.standardizer_.get_state(),
            "history": self.history_,
            # Ensemble members after the first (state dicts of the same shapes, in seed order).
            "members": [m.state_dict() for m in getattr(self, "models_", [self.model_])[1:]],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".part")
        os.close(fd)
        try:
            torch.save(payload, tmp)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "PrototypeMILClassifier":
        """Read a model written by :meth:`save`."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"No checkpoint at {path}.")
        payload = torch.load(path, map_location="cpu", weights_only=False)
        if not isinstance(payload, dict) or payload.get("format") != _CHECKPOINT_FORMAT:
            raise ValueError(f"{path} is not a minitorch_proto checkpoint (format {_CHECKPOINT_FORMAT}).")
        params = json.loads(payload["params"])
        if "pooling" in params:
            params["pooling"] = tuple(params["pooling"])
        clf = cls(**params)
        clf.classes_ = np.asarray(payload["classes"])
        clf.n_features_in_ = payload["n_features"]
        # The initialisation is irrelevant here (the saved weights replace it), and
        # data-driven inits would need the training instances: build with "normal".
        config = replace(clf.model_config(), init="normal")
        model = PrototypeMIL(clf.n_features_in_, len(clf.classes_), config)
        model.load_state_dict(payload["state_dict"])
        model.config = clf.model_config()
        model.eval()
        clf.model_ = model
        clf.standardizer_ = BagStandardizer.from_state(payload["standardizer"])
        clf.history_ = payload["history"]
        clf.models_ = [model]
        for state in payload.get("members", []):
            member = PrototypeMIL(clf.n_features_in_, len(clf.classes_), config)
            member.load_state_dict(state)
            member.config = clf.model_config()
            clf.models_.append(member.eval())
        return clf


def load_model(path: str | os.PathLike) -> PrototypeMILClassifier:
    """Shorthand for :meth:`PrototypeMILClassifier.load`."""
    return PrototypeMILClassifier.load(path)
