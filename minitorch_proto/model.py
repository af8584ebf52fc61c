"""The prototype MIL model of Yuksekgonul, Sivrikaya & Baydogan (2019), in one file.

A bag ``X_i`` (K_i instances of L features) becomes a short vector of distances:

1. distances of every instance to each of D learned prototypes ``P_d``,
2. pooled over the bag's instances with min (optionally also mean and max): ``Phi_i``,
3. per-bag layer normalisation of ``Phi_i`` (Eq. 4a-4b),
4. a linear classifier with bias: sigmoid for two classes, softmax for more.

The objective (Eq. 1) is cross-entropy + lambda_w ||beta||_1 + lambda_p sum_d ||P_d||_2
+ lambda_d sum_d min_k Dist(X_ik, P_d). Every switch the authors' published code
flips (see ``compat_config``) is a field of :class:`PrototypeMILConfig`, so each
deviation can be measured on its own.

The functions below take parameters with a leading *model* dimension M, so the
same arithmetic trains one model (M = 1, :class:`PrototypeMIL`) or many models at
once (``minitorch_proto.training``).

Adding a distance takes one call: ``distances.register_distance(name, fn)`` with a torch
``fn(X, P)``; every torch engine (the reference here, the tensor engine, the streaming and
distributed trainer) computes distances through ``pairwise_distance`` and picks it up, and
``backend="auto"`` leaves the compiled engine out for it (``tests/test_distance_registry.py``).
A compiled kernel (below) is an optional speed-up, not a requirement.

Changing anything else in the model or the objective? Three engines compute it and must agree:

* here (the reference: the torch functions below, used by the step-by-step trainer
  ``training/sequential.py`` and, with autograd, by the tensor engine ``training/tensor.py``,
  whose hand-written min-Euclidean backward ``_MinEuclidean`` must follow);
* ``training/compiled.py``: the numba engine's forward (``_forward``), its hand-written
  gradients (``_bag_gradients``, ``_penalties``) and its option codes (derived from
  ``DISTANCES`` and ``POOLINGS``); a built-in distance also has its compiled formula and
  gradient in ``training/compiled_distances.py`` (``_distances``, ``_add_distance_grad``);
* ``tests/test_training.py``: add the new option to ``MODEL_OPTIONS``/``TRAIN_OPTIONS``
  (a test fails until you do); every engine is then checked against the reference on a
  seeded sample of the whole option space.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .bags import POOLINGS, BagBatch, segment_pool
from .distances import available_distances, pairwise_distance, safe_sqrt
from .validation import check_bool, check_int, check_number

__all__ = ["PrototypeMILConfig", "PrototypeMIL", "compat_config", "monotone_config", "project_monotone_",
           "init_prototypes", "normalize_features", "head_logits", "loss_terms", "penalty_terms", "cross_entropy",
           "pooled_from_distances", "init_head", "LOSS_TERMS", "KMEANS_SAMPLE"]

LOSS_TERMS = ("cross_entropy", "weight_penalty", "prototype_penalty", "distance_penalty")


@dataclass(frozen=True)
class PrototypeMILConfig:
    """Everything that defines the model and its objective.

    Defaults are the paper as written (Table 1 regularisers, D = 24, Euclidean
    distance, min pooling, layer normalisation, bias).

    Parameters
    ----------
    n_prototypes : int
        D, the number of prototypes.
    distance : str
        One of ``"euclidean"`` (paper), ``"sqeuclidean"``, ``"manhattan"``,
        ``"cosine"``, ``"pseudo"`` (published code).
    pooling : tuple of str
        Non-empty subset of ``("min", "mean", "max")``; features are concatenated
        in that order, each block D long.
    layer_norm : bool
        Per-bag layer normalisation of the pooled distance vector (Eq. 4).
    bias : bool
        Intercept beta_0 in the classifier.
    lambda_w, lambda_p, lambda_d : float
        Weights of the classifier, prototype and distance penalties.
    weight_penalty : {"l1", "l2"}
        ``||beta||_1`` (paper) or ``||beta||_2`` (an option the published search used).
    prototype_penalty : {"norm", "pairwise"}
        ``sum_d ||P_d||_2`` (paper) or the published code's: its pseudo-distance
        ``|P_a| + |P_c| - 2 P_a.P_c`` (clamped at 0) summed over all D x D pairs.
    distance_penalty : {"min", "pooled"}
        Sum of min distances (paper) or of every pooled feature (published code);
        always taken before normalisation.
    init : {"normal", "instances", "kmeans++"}
        Standard normal prototypes (paper), randomly sampled training instances,
        or k-means++ seeding on the training instances (on a uniform sample of them
        when there are more than :data:`KMEANS_SAMPLE`, or 8 x D).
    layer_norm_eps : float
        Added to the variance in Eq. 4b so a bag whose distances are all equal
        does not divide by zero.
    monotone : bool
        Keep every classifier weight <= 0, so coming closer to a prototype can only
        raise the positive logit: the weights start at ``-|w|`` and are projected onto
        ``w <= 0`` after every optimiser step, in every engine. Needs min pooling only,
        no layer norm (see :func:`monotone_config`) and two classes. The bag score then
        obeys the standard MIL assumption by construction, for the class of the one logit (the
        estimator's ``classes_[1]``; ``book/monotone.md``).
    """

    n_prototypes: int = 24
    distance: str = "euclidean"
    pooling: tuple[str, ...] = ("min",)
    layer_norm: bool = True
    bias: bool = True
    lambda_w: float = 3e-4
    lambda_p: float = 4e-3
    lambda_d: float = 1e-2
    weight_penalty: str = "l1"
    prototype_penalty: str = "norm"
    distance_penalty: str = "min"
    init: str = "normal"
    layer_norm_eps: float = 1e-6
    monotone: bool = False

    def __post_init__(self) -> None:
        pooling = tuple(self.pooling) if not isinstance(self.pooling, str) else (self.pooling,)
        object.__setattr__(self, "pooling", pooling)
        object.__setattr__(self, "n_prototypes", check_int("n_prototypes", self.n_prototypes))
        for name in ("layer_norm", "bias", "monotone"):  # "False" read from text would be truthy
            object.__setattr__(self, name, check_bool(name, getattr(self, name)))
        if self.distance not in available_distances():
            raise ValueError(f"Unknown distance {self.distance!r}; choose from {available_distances()}.")
        if not pooling or any(p not in POOLINGS for p in pooling) or len(set(pooling)) != len(pooling):
            raise ValueError(f"pooling must be a non-empty subset of {POOLINGS}, got {self.pooling!r}.")
        if self.layer_norm and self.n_prototypes * len(pooling) < 2:
            raise ValueError(
                "Layer normalisation of a single feature is always 0: use n_prototypes * len(pooling) >= 2 "
                "or layer_norm=False."
            )
        check_number("layer_norm_eps", self.layer_norm_eps, inclusive=True)
        for name in ("lambda_w", "lambda_p", "lambda_d"):
            check_number(name, getattr(self, name), inclusive=True)
        choices = {"weight_penalty": ("l1", "l2"), "prototype_penalty": ("norm", "pairwise"),
                   "distance_penalty": ("min", "pooled"), "init": ("normal", "instances", "kmeans++")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}.")
        if self.monotone and (pooling != ("min",) or self.layer_norm):
            # Mean/max pooling count or bound instances and layer norm couples the prototypes:
            # either breaks the monotone bag score (book/monotone.md).
            raise ValueError(
                f"monotone=True needs pooling=('min',) and layer_norm=False, got pooling={pooling!r}, "
                f"layer_norm={self.layer_norm}; use monotone_config()."
            )

    @property
    def n_features_out(self) -> int:
        """Length of the pooled distance vector Phi_i."""
        return self.n_prototypes * len(self.pooling)

    def to_dict(self) -> dict:
        """Every field by name, ``pooling`` as a list (JSON-ready); :meth:`from_dict` reads it back."""
        d = asdict(self)
        d["pooling"] = list(self.pooling)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "PrototypeMILConfig":
        """The config of :meth:`to_dict`'s ``d`` (missing fields take their defaults).

        Raises
        ------
        ValueError
            If ``d`` names an unknown field or a value is invalid.
        """
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"Unknown PrototypeMILConfig fields: {sorted(unknown)}.")
        return cls(**{k: (tuple(v) if k == "pooling" else v) for k, v in d.items()})


def compat_config(config: PrototypeMILConfig | None = None, **overrides: object) -> PrototypeMILConfig:
    """The model as the authors' published code builds it (NOTES.md, table rows 1-6).

    Pseudo-distance clamped at 0, min+max+mean pooling (that code's order),
    no layer norm, no bias, pairwise prototype penalty, distance penalty on every
    pooled feature. Training-loop deviations live in ``TrainConfig``.

    Parameters
    ----------
    config : PrototypeMILConfig, default=None
        The configuration to start from (D, init, λs ...); None means the paper's.
    **overrides
        Fields set after the published code's, e.g. ``layer_norm=True`` to measure one switch.

    Returns
    -------
    PrototypeMILConfig
        A new configuration; ``config`` is not changed.
    """
    compat = dict(distance="pseudo", pooling=("min", "max", "mean"), layer_norm=False, bias=False,
                  prototype_penalty="pairwise", distance_penalty="pooled")
    return replace(config or PrototypeMILConfig(), **{**compat, **overrides})


def monotone_config(config: PrototypeMILConfig | None = None, **overrides: object) -> PrototypeMILConfig:
    """The variant that respects the standard MIL assumption by construction.

    Min pooling only, no per-bag layer norm, classifier weights kept <= 0
    (``monotone=True``); every other field (D, distance, penalties, init) comes from
    ``config`` (default: the paper's), then ``overrides``. Adding an instance to a bag
    can then never lower its positive score, repeating one changes nothing, and each
    prototype's term comes from one instance (``book/monotone.md``).

    Parameters
    ----------
    config : PrototypeMILConfig, default=None
        The configuration to start from; None means the paper's.
    **overrides
        Fields set last; with ``monotone`` left True, non-min ``pooling`` or ``layer_norm=True`` raises ValueError.

    Returns
    -------
    PrototypeMILConfig
        A new configuration; ``config`` is not changed.

    Examples
    --------
    >>> monotone_config(n_prototypes=8).pooling
    ('min',)
    """
    settings = dict(pooling=("min",), layer_norm=False, monotone=True)
    return replace(config or PrototypeMILConfig(), **{**settings, **overrides})


@torch.no_grad()
def project_monotone_(weight: torch.Tensor) -> torch.Tensor:
    """Project classifier weights onto ``w <= 0`` in place (after an optimiser step)."""
    return weight.clamp_(max=0.0)


# --------------------------------------------------------------------------- init
#: k-means++ seeding draws from a uniform sample of max(KMEANS_SAMPLE, 8 x D) training instances when
#: there are more. Each of its D steps passes over every instance it sees, so on a whole-slide
#: collection the seeding would be most of the fit (60,420 instances of 512 features, D = 1,024:
#: 26 s of a 31 s fit, against 3 s of 8 s with the sample; benchmarks/bench_recommended_large.py).
#: Every benchmark of the book is smaller (Musk2 has 6,598 instances); page 07's toy slides are just above
#: it, so the recommended model there starts from the sample.
KMEANS_SAMPLE = 8_192


def init_prototypes(
    config: PrototypeMILConfig,
    n_features: int,
    generator: torch.Generator,
    instances: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Initial prototypes of shape (D, L), drawn from ``generator``.

    ``instances`` (the standardised training instances) is an (N, L) array or tensor, or any row
    source with ``len()`` and indexing by an integer array (a bag collection read lazily,
    :class:`~minitorch_proto.training.distributed.StreamedInstances`): only the rows drawn are read,
    so a data-driven start needs neither every instance in memory nor a different draw.
    """
    D = config.n_prototypes
    if config.init == "normal":
        return torch.randn(D, n_features, generator=generator, dtype=dtype)
    if instances is None or len(instances) == 0:
        raise ValueError(f"init={config.init!r} needs the training instances.")
    n = len(instances)

    def take(idx: torch.Tensor) -> torch.Tensor:
        rows = instances[idx] if isinstance(instances, torch.Tensor) else instances[idx.numpy()]
        return torch.as_tensor(rows, dtype=dtype)

    if config.init == "instances":
        idx = torch.randperm(n, generator=generator)[:D] if n >= D else torch.randint(n, (D,), generator=generator)
        return take(idx)
    # k-means++ seeding: each next prototype is an instance drawn with probability
    # proportional to its squared distance from the nearest prototype so far.
    sample = max(KMEANS_SAMPLE, 8 * D)
    if n > sample:
        X, n = take(torch.randperm(n, generator=generator)[:sample]), sample
    else:
        X = take(torch.arange(n))
    # Every step writes into the same two buffers: a fresh (n, L) temporary per step can cost a page
    # fault per page (glibc maps large blocks anew), which made the seeding up to five times slower.
    diff, sqdist = torch.empty_like(X), torch.empty(n, dtype=X.dtype, device=X.device)

    def squared_distances(i: int) -> torch.Tensor:
        torch.sub(X, X[i], out=diff)
        return torch.sum(diff.square_(), 1, out=sqdist)

    chosen = [int(torch.randint(n, (1,), generator=generator))]
    closest = squared_distances(chosen[0]).clone()
    for _ in range(1, D):
        total = float(closest.sum())
        if total <= 0:
            nxt = int(torch.randint(n, (1,), generator=generator))
        else:
            nxt = int(torch.multinomial(closest / total, 1, generator=generator))
        chosen.append(nxt)
        torch.minimum(closest, squared_distances(nxt), out=closest)
    return X[chosen].clone()


def init_head(
    n_inputs: int, n_outputs: int, generator: torch.Generator, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """Classifier weights and bias, uniform in +-1/sqrt(n_inputs) like ``nn.Linear``.

    The paper does not say how the head starts. At Table 1's rates it moves about 0.0025 an epoch
    on Musk1 against a start of up to 0.2, so for the first 25-50 epochs the predictions are mostly
    this random start: 5 x 10 Musk1 AUC about .5 after one epoch (.47 to .56 with the seeds),
    .69 after 25, .83 after 100. A few-epoch run at those rates says nothing about the model.
    """
    bound = 1.0 / np.sqrt(n_inputs)
    weight = (torch.rand(n_outputs, n_inputs, generator=generator, dtype=dtype) * 2 - 1) * bound
    bias = (torch.rand(n_outputs, generator=generator, dtype=dtype) * 2 - 1) * bound
    return weight, bias


# --------------------------------------------------------------------- forward
def normalize_features(phi: torch.Tensor, config: PrototypeMILConfig) -> torch.Tensor:
    """Eq. 4: each bag's pooled vector to zero mean and unit (population) variance."""
    if not config.layer_norm:
        return phi
    mu = phi.mean(-1, keepdim=True)
    var = ((phi - mu) ** 2).mean(-1, keepdim=True)
    return (phi - mu) / torch.sqrt(var + config.layer_norm_eps)


def head_logits(phi: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Linear classifier: ``phi @ weight.T + bias``, optional leading (model) dimensions kept.

    Parameters
    ----------
    phi : Tensor (..., B, F), features of B bags
    weight : Tensor (..., O, F)
    bias : Tensor (..., O), or None for no bias

    Returns
    -------
    Tensor (..., B, O), the logits
    """
    logits = phi @ weight.transpose(-1, -2)
    if bias is not None:
        logits = logits + bias.unsqueeze(-2)
    return logits


def class_probabilities(logits):
    """Class probabilities from logits (n, O): a sigmoid for one column, a softmax otherwise.

    Takes and returns a torch tensor, or a numpy array (computed in float64).
    """
    if isinstance(logits, np.ndarray):
        return class_probabilities(torch.from_numpy(np.asarray(logits, dtype=np.float64))).numpy()
    if logits.shape[-1] == 1:
        p1 = torch.sigmoid(logits[..., 0])
        return torch.stack([1 - p1, p1], dim=-1)
    return torch.softmax(logits, dim=-1)


def mean_class_probabilities(member_logits) -> np.ndarray:
    """An ensemble's prediction: its members' class probabilities (from each one's logits) averaged, in float64."""
    return np.mean([class_probabilities(one.double()).numpy() for one in member_logits], axis=0)


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-bag cross-entropy; one logit column means a sigmoid, several a softmax."""
    if logits.shape[-1] == 1:
        return F.binary_cross_entropy_with_logits(logits[..., 0], y.to(logits.dtype), reduction="none")
    logp = torch.log_softmax(logits, dim=-1)
    return -logp.gather(-1, y.unsqueeze(-1)).squeeze(-1)


def penalty_terms(weight: torch.Tensor, prototypes: torch.Tensor, config: PrototypeMILConfig) -> dict[str, torch.Tensor]:
    """The two parameter penalties of Eq. 1, weighted, per model (shape (...,))."""
    if config.weight_penalty == "l1":
        w_pen = weight.abs().sum((-1, -2))
    else:
        w_pen = torch.sqrt((weight * weight).sum((-1, -2)) + 1e-12)
    if config.prototype_penalty == "norm":
        p_pen = safe_sqrt((prototypes * prototypes).sum(-1)).sum(-1)
    else:
        p_pen = pairwise_distance(prototypes, prototypes, "pseudo").sum((-1, -2))  # every ordered pair, diagonal too
    return {"weight_penalty": config.lambda_w * w_pen, "prototype_penalty": config.lambda_p * p_pen}


def loss_terms(
    logits: torch.Tensor,
    y: torch.Tensor,
    weight: torch.Tensor,
    prototypes: torch.Tensor,
    penalised_distances: torch.Tensor,
    config: PrototypeMILConfig,
) -> dict[str, torch.Tensor]:
    """The four terms of Eq. 1 for a minibatch, per model.

    The data terms (cross-entropy and distance penalty) are averaged over the
    minibatch's bags, the two parameter penalties are added once: with the paper's
    batch size of 1 each step minimises Eq. 1 written for the one bag it sees.

    Parameters
    ----------
    logits : Tensor (..., B, O)
        One column: a sigmoid (two classes); several: a softmax.
    y : Tensor of int (..., B)
        Encoded labels.
    weight : Tensor (..., O, F)
    prototypes : Tensor (..., D, L)
    penalised_distances : Tensor (..., B, D')
        The pooled distances the distance penalty sums (see ``config.distance_penalty``).
    config : PrototypeMILConfig
        The penalties and their weights (``lambda_w``, ``lambda_p``, ``lambda_d``).

    Returns
    -------
    dict of str to Tensor (...,)
        :data:`LOSS_TERMS` in order, each already weighted; ``...`` is the optional model dimension.
    """
    terms = {
        "cross_entropy": cross_entropy(logits, y).mean(-1),
        **penalty_terms(weight, prototypes, config),
        "distance_penalty": config.lambda_d * penalised_distances.sum(-1).mean(-1),
    }
    return {k: terms[k] for k in LOSS_TERMS}


def pooled_from_distances(
    dist: torch.Tensor, pool_fn, config: PrototypeMILConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply the configured poolings; return (features, distances that are penalised)."""
    pooled = {how: pool_fn(dist, how) for how in config.pooling}
    if "min" not in pooled and config.distance_penalty == "min":
        pooled_min = pool_fn(dist, "min")
    else:
        pooled_min = pooled.get("min")
    phi = torch.cat([pooled[how] for how in config.pooling], dim=-1)
    penalised = pooled_min if config.distance_penalty == "min" else phi
    return phi, penalised


# ---------------------------------------------------------------------- module
class PrototypeMIL(nn.Module):
    """One prototype MIL model.

    Parameters
    ----------
    n_features : int
        L, features per instance.
    n_classes : int
        2 gives one sigmoid output; more give a softmax.
    config : PrototypeMILConfig, optional
    generator : torch.Generator, optional
        Source of the initial parameters (``torch.Generator().manual_seed(seed)``).
    init_instances : array-like, optional
        Training instances, required for ``init="instances"`` or ``"kmeans++"``.
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int = 2,
        config: PrototypeMILConfig | None = None,
        generator: torch.Generator | None = None,
        init_instances: np.ndarray | torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {n_classes}.")
        self.config = config or PrototypeMILConfig()
        if self.config.monotone and n_classes != 2:
            # A softmax couples the class logits (raising one lowers the others' probabilities),
            # so "closer can only help" has no clean meaning there.
            raise ValueError(f"monotone=True is defined for two classes only, got n_classes={n_classes}.")
        self.n_features = int(n_features)
        self.n_classes = int(n_classes)
        gen = generator or torch.Generator().manual_seed(0)
        n_out = 1 if n_classes == 2 else n_classes
        self.prototypes = nn.Parameter(init_prototypes(self.config, n_features, gen, init_instances))
        w, b = init_head(self.config.n_features_out, n_out, gen)
        if self.config.monotone:
            w = -w.abs()  # the same draw, mirrored into the feasible set
        self.weight = nn.Parameter(w)
        self.bias = nn.Parameter(b) if self.config.bias else None

    # ------------------------------------------------------------ similarity block
    # MILES's bag embedding (Chen, Bi & Wang 2006) on this model's prototypes: for each prototype p,
    # max over the bag's instances of exp(-||x - p||^2 / sigma^2). It is added after training, for the
    # convex head only (``PrototypeMILClassifier(head_similarity=True)``), so no engine trains it; the
    # head's weight then has F + D columns, the similarity block last.
    @property
    def has_similarity(self) -> bool:
        """Whether the head also reads the similarity block (see :meth:`add_similarity`)."""
        return "similarity_sigma2" in self._buffers

    def add_similarity(self, sigma2: float) -> None:
        """Append the similarity block to the head's features; the head's weight grows to (O, F + D), new columns 0.

        ``sigma2`` is the kernel's squared width (MILES: the squared median distance between
        training instances). Called by the convex-head refit and when a model file is loaded.
        """
        if not float(sigma2) > 0:
            raise ValueError(f"the similarity width sigma^2 must be positive, got {sigma2}.")
        if self.has_similarity:
            raise ValueError("this model already has its similarity block.")
        w = self.weight.detach()
        extra = torch.zeros((w.shape[0], self.config.n_prototypes), dtype=w.dtype, device=w.device)
        self.weight = nn.Parameter(torch.cat([w, extra], dim=1))
        self.register_buffer("similarity_sigma2", torch.tensor(float(sigma2), dtype=w.dtype, device=w.device))

    def similarity_from_sqdist(self, min_sqdist: torch.Tensor) -> torch.Tensor:
        """The similarity block from each bag's smallest squared Euclidean distance to each prototype."""
        return torch.exp(-min_sqdist / self.similarity_sigma2)

    # The three stages are separate so explanations and plots can reuse them.
    def distances(self, instances: torch.Tensor) -> torch.Tensor:
        """(N, L) instances -> (N, D) distances to the prototypes."""
        return pairwise_distance(instances, self.prototypes, self.config.distance)

    def pooled(self, batch: BagBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Pooled distance features Phi (n_bags, F) before normalisation, and the penalised distances."""
        dist = self.distances(batch.instances)
        return pooled_from_distances(
            dist, lambda d, how: segment_pool(d, batch.bag_index, batch.n_bags, how), self.config
        )

    @torch.no_grad()
    def pooled_chunked(
        self, instances, bag_index, n_bags: int, chunk_size: int = 65_536
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`pooled` in bounded memory, for inference on very large collections.

        Instances are processed ``chunk_size`` rows at a time, so memory is
        O(chunk_size x (L + D) + n_bags x D) whatever the number of instances;
        ``instances`` may be a NumPy memmap. Bags may span chunk boundaries.
        Returns the same (features, penalised distances) as :meth:`pooled`.
        """
        return self._scan_chunked(instances, bag_index, n_bags, chunk_size, similarity=False)[:2]

    @torch.no_grad()
    def features_chunked(self, instances, bag_index, n_bags: int, chunk_size: int = 65_536) -> torch.Tensor:
        """:meth:`features` in bounded memory (as :meth:`pooled_chunked`), one pass over the instances."""
        phi, _, sim = self._scan_chunked(instances, bag_index, n_bags, chunk_size, similarity=self.has_similarity)
        z = normalize_features(phi, self.config)
        return z if sim is None else torch.cat([z, sim], dim=-1)

    def _scan_chunked(self, instances, bag_index, n_bags: int, chunk_size: int, *, similarity: bool):
        """One pass over the instances: (pooled features, penalised distances, similarity block or None)."""
        D = self.config.n_prototypes
        dtype, device = self.prototypes.dtype, self.prototypes.device
        n = len(instances)
        bag_index = torch.as_tensor(np.asarray(bag_index), dtype=torch.long)
        lo = torch.full((n_bags, D), float("inf"), dtype=dtype, device=device)
        hi = torch.full((n_bags, D), float("-inf"), dtype=dtype, device=device)
        total = torch.zeros((n_bags, D), dtype=dtype, device=device)
        count = torch.zeros((n_bags, 1), dtype=dtype, device=device)
        lo_sq = torch.full((n_bags, D), float("inf"), dtype=dtype, device=device) if similarity else None
        for start in range(0, n, chunk_size):
            rows_np = np.asarray(instances[start : start + chunk_size])
            if not rows_np.flags.writeable:  # a read-only memmap: torch would share it and warn about writes
                rows_np = rows_np.copy()
            X = torch.as_tensor(rows_np, dtype=dtype, device=device)
            idx = bag_index[start : start + chunk_size].to(device)
            d = self.distances(X)
            rows = idx.unsqueeze(1).expand_as(d)
            lo.scatter_reduce_(0, rows, d, reduce="amin", include_self=True)
            hi.scatter_reduce_(0, rows, d, reduce="amax", include_self=True)
            total.index_add_(0, idx, d)
            count.index_add_(0, idx, torch.ones((len(idx), 1), dtype=dtype, device=device))
            if similarity:
                lo_sq.scatter_reduce_(0, rows, pairwise_distance(X, self.prototypes, "sqeuclidean"), reduce="amin",
                                      include_self=True)
        if (count == 0).any():
            raise ValueError(f"Bag {int(torch.nonzero(count[:, 0] == 0)[0])} has no instances.")
        pooled = {"min": lo, "max": hi, "mean": total / count}
        phi, penalised = pooled_from_distances(None, lambda _d, how: pooled[how], self.config)
        return phi, penalised, (self.similarity_from_sqdist(lo_sq) if similarity else None)

    def features(self, batch: BagBatch) -> torch.Tensor:
        """Features fed to the classifier, (n_bags, F): the normalised pooled distances (and the similarity block)."""
        z = normalize_features(self.pooled(batch)[0], self.config)
        if not self.has_similarity:
            return z
        d2 = pairwise_distance(batch.instances, self.prototypes, "sqeuclidean")
        sim = self.similarity_from_sqdist(segment_pool(d2, batch.bag_index, batch.n_bags, "min"))
        return torch.cat([z, sim], dim=-1)

    def forward(self, batch: BagBatch) -> torch.Tensor:
        """Logits of shape (n_bags, 1) for two classes, (n_bags, C) otherwise."""
        return head_logits(self.features(batch), self.weight, self.bias)

    def loss_terms(self, batch: BagBatch, y: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each term of Eq. 1 on this minibatch (scalars); ``total`` is their sum."""
        if self.has_similarity:
            raise NotImplementedError("a model with the similarity block is not trained further (it belongs to "
                                      "the convex head, fitted after training).")
        phi, penalised = self.pooled(batch)
        logits = head_logits(normalize_features(phi, self.config), self.weight, self.bias)
        terms = loss_terms(logits, y, self.weight, self.prototypes, penalised, self.config)
        terms["total"] = sum(terms.values())
        return terms

    @torch.no_grad()
    def predict_proba_batch(self, batch: BagBatch) -> torch.Tensor:
        """Class probabilities (n_bags, n_classes)."""
        return class_probabilities(self.forward(batch))

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"n_features={self.n_features}, n_prototypes={c.n_prototypes}, distance={c.distance!r}, "
            f"pooling={c.pooling}, layer_norm={c.layer_norm}, bias={c.bias}"
            + (", monotone=True" if c.monotone else "") + (", similarity=True" if self.has_similarity else "")
        )
