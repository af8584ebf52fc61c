"""Synthetic multiple-instance data: a toy picture and algorithmic unit tests.

Two kinds of generators live here.

* :func:`make_toy_bags` reproduces the situation of the paper's Figure 1: a handful of
  two-feature bags that a linear model cannot separate from their bag means, but that the
  minimum distance to one well-placed prototype separates perfectly.
* :func:`make_single_concept_test`, :func:`make_multi_concept_test` and
  :func:`make_false_frequency_test` are *algorithmic unit tests* of the MIL assumption in the
  spirit of Raff & Holt, "Reproducibility in Multiple Instance Learning: A Case For Algorithmic
  Unit Tests" (NeurIPS 2023). Each returns a training and a test set built so that a shortcut
  which works on the training set (a "poison" pattern, or the frequency of a distractor) is
  reversed on the test set. A model that obeys the stated label rule keeps its accuracy; a model
  that learned the shortcut drops to or below chance. :func:`minitorch_proto.evaluation.mil_unit_tests.run_mil_unit_tests` fits a model on
  each training set and scores it on the matching test set.

Every generator takes ``random_state`` (an ``int``, ``None`` or a :class:`numpy.random.Generator`)
and returns the same data for the same integer seed. Bags are ``float64`` arrays of shape
``(n_instances, n_features)``; labels are ``int64`` (1 = positive bag).

Instance kinds
--------------
``info["instance_kinds"]`` holds, per bag, an ``int64`` code per instance:
``0`` background, ``1..k`` concept ``j`` (``1`` when there is a single concept), ``-1`` poison,
``-2`` frequency distractor. ``instance_labels`` is ``1`` for concept instances and ``0``
otherwise (so, in the multi-concept test, a negative bag can hold instances labelled ``1``: a
single concept does not make a bag positive there).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .containers import SyntheticBags

__all__ = [
    "SyntheticBags",
    "make_toy_bags",
    "make_single_concept_test",
    "make_multi_concept_test",
    "make_false_frequency_test",
    "MIL_UNIT_TESTS",
    "BACKGROUND",
    "POISON",
    "DISTRACTOR",
]

#: Instance-kind code of background instances.
BACKGROUND = 0
#: Instance-kind code of poison instances (concept ``j`` has code ``j``, starting at 1).
POISON = -1
#: Instance-kind code of the frequency distractor in :func:`make_false_frequency_test`.
DISTRACTOR = -2


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------
def _rng(random_state: int | np.random.Generator | None) -> np.random.Generator:
    if isinstance(random_state, np.random.RandomState):
        raise TypeError("random_state must be an int, None or a numpy.random.Generator, not RandomState.")
    return np.random.default_rng(random_state)


def _check_range(value: int | tuple[int, int], name: str, low: int = 0) -> tuple[int, int]:
    """Normalise an ``int`` or inclusive ``(low, high)`` pair of counts."""
    if np.isscalar(value):
        lo = hi = int(value)  # type: ignore[arg-type]
    else:
        vals = tuple(int(v) for v in value)  # type: ignore[union-attr]
        if len(vals) != 2:
            raise ValueError(f"{name} must be an int or a (low, high) pair; got {value!r}.")
        lo, hi = vals
    if lo < low or hi < lo:
        raise ValueError(f"{name} must satisfy {low} <= low <= high; got {value!r}.")
    return lo, hi


def _directions(rng: np.random.Generator, n_dirs: int, n_features: int) -> np.ndarray:
    """``n_dirs`` mutually orthogonal random unit vectors (rows)."""
    if n_features < n_dirs:
        raise ValueError(
            f"n_features must be at least {n_dirs} so that the concept, poison and distractor "
            f"means point in orthogonal directions; got {n_features}."
        )
    g = rng.standard_normal((n_features, n_dirs))
    q, r = np.linalg.qr(g)
    q = q * np.sign(np.diag(r))  # make the result a deterministic function of g
    return q.T.copy()


def _draw(rng: np.random.Generator, bounds: tuple[int, int]) -> int:
    return int(rng.integers(bounds[0], bounds[1] + 1))


def _make_bag(
    rng: np.random.Generator,
    size: int,
    parts: Sequence[tuple[int, int]],
    means: Mapping[int, np.ndarray],
    spread: float,
    n_features: int,
    background: str = "fill",
) -> tuple[np.ndarray, np.ndarray]:
    """One bag: ``count`` instances of each ``(kind, count)`` in ``parts``, background elsewhere.

    Background instances are N(0, I); an instance of kind ``k`` is N(means[k], spread^2 I).
    ``background="fill"``: the special instances take the place of background instances within
    ``size`` (the bag grows beyond it only when they need more room); ``"independent"``:
    ``size`` background instances, the special ones added on top. Rows are shuffled.
    """
    kinds = [kind for kind, count in parts for _ in range(count)]
    n_background = size if background == "independent" else max(size - len(kinds), 0)
    kinds = np.array(kinds + [BACKGROUND] * n_background, dtype=np.int64)
    X = rng.standard_normal((len(kinds), n_features))
    for kind, mean in means.items():
        rows = kinds == kind
        X[rows] = mean + spread * X[rows]
    order = rng.permutation(len(kinds))
    return X[order], kinds[order]


def _finish(
    bags: list[np.ndarray],
    kinds: list[np.ndarray],
    label_rule: Callable[[np.ndarray], int],
    rng: np.random.Generator,
    name: str,
    info: dict[str, Any],
) -> SyntheticBags:
    """Shuffle the bags, apply the label rule to each bag's instance kinds, wrap the result."""
    order = rng.permutation(len(bags))
    bags = [bags[i] for i in order]
    kinds = [kinds[i] for i in order]
    y = np.array([label_rule(k) for k in kinds], dtype=np.int64)
    instance_labels = [(k > 0).astype(np.int64) for k in kinds]
    info = dict(info)
    info["instance_kinds"] = kinds
    return SyntheticBags(bags=bags, y=y, name=name, instance_labels=instance_labels, info=info)


def _split_counts(n: int, name: str) -> tuple[int, int]:
    n = int(n)
    if n < 2:
        raise ValueError(f"{name} must be at least 2 (one positive and one negative bag); got {n}.")
    n_pos = n // 2
    return n_pos, n - n_pos


def _build_split(
    rng: np.random.Generator,
    n: int,
    split: str,
    parts: Callable[[int], list[tuple[int, int]]],
    size: tuple[int, int],
    means: Mapping[int, np.ndarray],
    spread: float,
    n_features: int,
    label_rule: Callable[[np.ndarray], int],
    name: str,
    info: dict[str, Any],
    background: str = "fill",
) -> SyntheticBags:
    """Half positive, half negative bags; ``parts(label)`` says which special instances a bag gets."""
    if background not in ("fill", "independent"):
        raise ValueError(f"background must be 'fill' or 'independent'; got {background!r}.")
    n_pos, n_neg = _split_counts(n, f"n_{split}")
    bags, kinds = [], []
    for label, count in ((1, n_pos), (0, n_neg)):
        for _ in range(count):
            special = parts(label)  # drawn before the size: the order of draws fixes the data
            X, kind = _make_bag(rng, _draw(rng, size), special, means, spread, n_features, background)
            bags.append(X)
            kinds.append(kind)
    return _finish(bags, kinds, label_rule, rng, name=name, info=dict(info, background=background))


def _poison_parts(rng, split: str, poison: bool, rate: float, n_p: tuple[int, int]) -> Callable[[int], list]:
    """Poison instances for a bag of ``label``: in negatives when training, in positives at test."""
    poisoned_class = 0 if split == "train" else 1

    def parts(label: int) -> list[tuple[int, int]]:
        if poison and label == poisoned_class and rng.random() < rate:
            return [(POISON, _draw(rng, n_p))]
        return []

    return parts


# --------------------------------------------------------------------------------------
# Figure 1 toy problem
# --------------------------------------------------------------------------------------
def make_toy_bags(
    n_bags: int = 4,
    instances_per_bag: int = 2,
    random_state: int | np.random.Generator | None = 0,
    *,
    concept: Sequence[float] = (1.0, 1.0),
    offset: float = 2.0,
    concept_noise: float = 0.1,
    scatter: float = 0.25,
) -> SyntheticBags:
    """Two-feature bags in the situation of the paper's Figure 1.

    Label rule: a bag is positive iff it holds an instance near the concept point ``c``
    (within ``2 * concept_noise``); every other instance lies at least ``offset / 2`` away
    from ``c``.

    Layout (``a = offset``, ``k = instances_per_bag``). Positive bags alternate between
    "east" and "west": one instance near ``c`` and ``k - 1`` instances around
    ``c +/- a * k / (k - 1) * e_x``, so that their bag mean lies near ``c +/- a * e_x``.
    Negative bags alternate between "north" and "south": ``k`` instances spread evenly along the
    x-axis between ``-a`` and ``a`` at height ``c +/- a * e_y``, so that their bag mean lies near
    ``c +/- a * e_y``. The four groups of means form an XOR pattern: no line separates the bag
    means (as soon as there are at least two bags of each class and the scatter is small
    against ``offset``, as with the defaults), while the minimum distance to a prototype at ``c``
    separates the classes with a margin of at least ``offset / 2 - 2 * concept_noise``.

    Parameters
    ----------
    n_bags : int, default=4
        Number of bags, half positive (rounded down), half negative. The default, 2 positive and
        2 negative bags of 2 instances, is the setting of the paper's figure; ``n_bags=40``
        makes a fuller demo.
    instances_per_bag : int, default=2
        Instances in every bag (at least 2).
    random_state : int, Generator or None, default=0
        Seed or generator.
    concept : pair of float, default=(1.0, 1.0)
        The concept point ``c``.
    offset : float, default=2.0
        Distance ``a`` between ``c`` and the bag-mean clusters.
    concept_noise : float, default=0.1
        Standard deviation of the concept instance around ``c`` (truncated at 2 standard
        deviations).
    scatter : float, default=0.25
        Standard deviation of every other instance around its nominal position.

    Returns
    -------
    SyntheticBags
        ``info`` holds ``concepts`` (array of shape ``(1, 2)``: the true concept point, which is
        also a separating prototype), ``label_rule``, ``margin`` (smallest min-distance to ``c``
        among negative bags minus the largest among positive bags; positive by construction),
        ``instance_kinds`` and the parameters.
    """
    n_bags = int(n_bags)
    k = int(instances_per_bag)
    if n_bags < 2:
        raise ValueError(f"n_bags must be at least 2; got {n_bags}.")
    if k < 2:
        raise ValueError(
            f"instances_per_bag must be at least 2 (a positive bag needs a concept instance and "
            f"another one); got {k}."
        )
    # NaN passes every comparison, and the resampling loops below would then never end.
    if not all(np.isfinite(v) for v in (offset, concept_noise, scatter)):
        raise ValueError(f"offset, concept_noise and scatter must be finite; got {offset}, {concept_noise}, "
                         f"{scatter}.")
    if offset <= 0 or concept_noise < 0 or scatter < 0:
        raise ValueError("offset must be > 0 and concept_noise, scatter must be >= 0.")
    if 2 * concept_noise >= offset / 2:
        raise ValueError("concept_noise is too large for offset: need 2 * concept_noise < offset / 2.")
    c = np.asarray(concept, dtype=np.float64).reshape(-1)
    if c.shape != (2,) or not np.isfinite(c).all():
        raise ValueError(f"concept must be a finite point with 2 features; got {c}.")
    rng = _rng(random_state)
    n_pos, n_neg = _split_counts(n_bags, "n_bags")
    ex, ey = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    min_far = offset / 2.0

    def far_instance(nominal: np.ndarray) -> np.ndarray:
        # resample until the instance is at least offset / 2 from the concept
        while True:
            x = nominal + scatter * rng.standard_normal(2)
            if np.linalg.norm(x - c) >= min_far:
                return x

    def concept_instance() -> np.ndarray:
        while True:
            z = rng.standard_normal(2)
            if np.linalg.norm(z) <= 2.0:
                return c + concept_noise * z

    bags: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    for i in range(n_pos):
        sign = 1.0 if i % 2 == 0 else -1.0
        nominal = c + sign * offset * k / (k - 1) * ex
        rows = [concept_instance()] + [far_instance(nominal) for _ in range(k - 1)]
        kind = np.array([1] + [BACKGROUND] * (k - 1), dtype=np.int64)
        order = rng.permutation(k)
        bags.append(np.array(rows)[order])
        kinds.append(kind[order])
    xs = np.linspace(-offset, offset, k)
    for i in range(n_neg):
        sign = 1.0 if i % 2 == 0 else -1.0
        rows = [far_instance(c + sign * offset * ey + x * ex) for x in xs]
        order = rng.permutation(k)
        bags.append(np.array(rows)[order])
        kinds.append(np.zeros(k, dtype=np.int64))

    def label_rule(kind: np.ndarray) -> int:
        # positive iff the bag holds a concept instance (an instance near c)
        return int(np.any(kind == 1))

    data = _finish(
        bags,
        kinds,
        label_rule,
        rng,
        name=f"toy bags (Figure 1; {n_bags} bags x {k} instances)",
        info={
            "source": "synthetic: minitorch_proto.data.synthetic.make_toy_bags",
            "label_rule": "positive iff the bag holds an instance within 2*concept_noise of the concept point",
            "concepts": c.reshape(1, 2).copy(),
            "offset": float(offset),
            "concept_noise": float(concept_noise),
            "scatter": float(scatter),
        },
    )
    min_d = np.array([np.min(np.linalg.norm(b - c, axis=1)) for b in data.bags])
    data.info["margin"] = float(min_d[data.y == 0].min() - min_d[data.y == 1].max())
    return data


# --------------------------------------------------------------------------------------
# Algorithmic unit tests (after Raff & Holt, NeurIPS 2023)
# --------------------------------------------------------------------------------------
_COMMON_PARAMS_DOC = """
    n_train, n_test : int, default=200
        Number of training and test bags, each split half positive (rounded down) and half
        negative, in random order.
    n_features : int, default=10
        Features per instance.
    bag_size : int or (int, int), default=(8, 16)
        Inclusive range of bag sizes (drawn uniformly). A bag grows beyond it only when its
        special instances need more room.
    background : {"fill", "independent"}, default="fill"
        ``"fill"``: special instances take the place of background ones within the drawn size,
        so the number of background instances depends on the label (and the shift reverses at
        test time with the shortcut). ``"independent"``: the drawn size counts background
        instances only and the special ones are added on top (as in Raff & Holt's generators),
        so the background count is independent of the label but the bag size is not.
    random_state : int, Generator or None, default=0
        Seed or generator; one integer seed always gives the same pair of sets.
    separation : float, default=4.0
        Distance from the origin of every special (concept / poison / distractor) mean. The
        means point in mutually orthogonal random directions, so ``n_features`` must be at
        least the number of special distributions.
    spread : float, default=0.5
        Standard deviation of the special instances around their means (background: N(0, I)).
"""


def _unit_test_info(name: str, label_rule: str, means: Mapping[int, np.ndarray], **params: Any) -> dict:
    info = {
        "source": f"synthetic: minitorch_proto.data.synthetic.{name}",
        "label_rule": label_rule,
        "kind_codes": {"background": BACKGROUND, "poison": POISON, "distractor": DISTRACTOR, "concept j": "j >= 1"},
        "means": {int(k): v.copy() for k, v in means.items()},
        "concepts": np.array([means[k] for k in sorted(means) if k > 0]),
    }
    info.update(params)
    return info


def make_single_concept_test(
    n_train: int = 200,
    n_test: int = 200,
    n_features: int = 10,
    bag_size: int | tuple[int, int] = (8, 16),
    random_state: int | np.random.Generator | None = 0,
    *,
    separation: float = 4.0,
    spread: float = 0.5,
    concept_per_bag: int | tuple[int, int] = (1, 2),
    poison: bool = True,
    poison_per_bag: int | tuple[int, int] = (2, 4),
    poison_rate: float = 1.0,
    background: str = "fill",
) -> tuple[SyntheticBags, SyntheticBags]:
    """Standard-MIL unit test with a poisoned shortcut.

    Label rule (both sets): **a bag is positive iff it holds at least one instance of the
    concept** ``N(mu_c, spread^2 I)``. Background instances are ``N(0, I)``.

    Poison (``poison=True``): instances from a distinct ``N(mu_p, spread^2 I)``. In the
    *training* set a fraction ``poison_rate`` of the NEGATIVE bags hold ``poison_per_bag``
    poison instances, so "poison => negative" is a useful but wrong rule there. In the *test*
    set the poison moves to the POSITIVE bags (the same fraction) and never appears in negatives.
    Under the MIL assumption an instance can only make a bag positive, never negative, so a model
    that respects it still classifies the test bags by the concept alone; a model that learned
    "poison => negative" misclassifies the poisoned positives.

    Parameters
    ----------
    %(common)s
    concept_per_bag : int or (int, int), default=(1, 2)
        Inclusive range of concept instances in a positive bag.
    poison : bool, default=True
        Add the poison; ``False`` gives a plain standard-MIL problem.
    poison_per_bag : int or (int, int), default=(2, 4)
        Inclusive range of poison instances in a poisoned bag.
    poison_rate : float, default=1.0
        Fraction of training negatives (test positives) that carry the poison.

    Returns
    -------
    train, test : SyntheticBags
        ``info["means"]`` maps kind codes (1 = concept, -1 = poison) to means; ``info["concepts"]``
        has shape ``(1, n_features)``.
    """
    rng = _rng(random_state)
    size = _check_range(bag_size, "bag_size", low=1)
    n_c = _check_range(concept_per_bag, "concept_per_bag", low=1)
    n_p = _check_range(poison_per_bag, "poison_per_bag", low=1)
    if not 0.0 <= poison_rate <= 1.0:
        raise ValueError(f"poison_rate must lie in [0, 1]; got {poison_rate}.")
    n_features = int(n_features)
    dirs = _directions(rng, 2, n_features)
    means = {1: separation * dirs[0], POISON: separation * dirs[1]}
    rule = "positive iff the bag holds at least one concept instance"

    def label_rule(kind: np.ndarray) -> int:
        return int(np.any(kind == 1))

    def build(n: int, split: str) -> SyntheticBags:
        poisoned = _poison_parts(rng, split, poison, poison_rate, n_p)
        return _build_split(
            rng, n, split, lambda label: ([(1, _draw(rng, n_c))] if label == 1 else []) + poisoned(label),
            size, means, spread, n_features, label_rule,
            name=f"single-concept MIL unit test ({split})",
            info=_unit_test_info(
                "make_single_concept_test", rule, means, split=split, poison=poison,
                poison_in=("negative" if split == "train" else "positive") if poison else None,
                separation=separation, spread=spread,
            ),
            background=background,
        )

    return build(n_train, "train"), build(n_test, "test")


def make_multi_concept_test(
    n_train: int = 200,
    n_test: int = 200,
    n_features: int = 10,
    bag_size: int | tuple[int, int] = (8, 16),
    random_state: int | np.random.Generator | None = 0,
    *,
    n_concepts: int = 2,
    separation: float = 4.0,
    spread: float = 0.5,
    concept_per_bag: int | tuple[int, int] = (1, 2),
    poison: bool = True,
    poison_per_bag: int | tuple[int, int] = (2, 4),
    poison_rate: float = 1.0,
    background: str = "fill",
) -> tuple[SyntheticBags, SyntheticBags]:
    """Multi-concept ("all of k concepts") unit test with a poisoned shortcut.

    Label rule (both sets): **a bag is positive iff it holds at least one instance of EVERY one
    of the** ``n_concepts`` **concepts** ``N(mu_j, spread^2 I)``. Each negative bag holds a
    random non-empty strict subset of the concepts (for ``k = 2``: exactly one of the two), so
    the presence of any single concept does not decide the label.

    Poison as in :func:`make_single_concept_test`: in training it rides in the negative bags, in
    the test set in the positive bags.

    Parameters
    ----------
    %(common)s
    n_concepts : int, default=2
        Number ``k`` of concepts a positive bag must hold (at least 2).
    concept_per_bag : int or (int, int), default=(1, 2)
        Inclusive range of instances of each concept that a bag holds.
    poison, poison_per_bag, poison_rate
        As in :func:`make_single_concept_test`.

    Returns
    -------
    train, test : SyntheticBags
        ``info["concepts"]`` has shape ``(n_concepts, n_features)``; ``info["instance_kinds"]``
        codes concept ``j`` as ``j`` (1-based).
    """
    rng = _rng(random_state)
    k = int(n_concepts)
    if k < 2:
        raise ValueError(f"n_concepts must be at least 2; got {n_concepts}.")
    size = _check_range(bag_size, "bag_size", low=1)
    n_c = _check_range(concept_per_bag, "concept_per_bag", low=1)
    n_p = _check_range(poison_per_bag, "poison_per_bag", low=1)
    if not 0.0 <= poison_rate <= 1.0:
        raise ValueError(f"poison_rate must lie in [0, 1]; got {poison_rate}.")
    n_features = int(n_features)
    dirs = _directions(rng, k + 1, n_features)
    means = {j + 1: separation * dirs[j] for j in range(k)}
    means[POISON] = separation * dirs[k]
    rule = f"positive iff the bag holds at least one instance of each of the {k} concepts"

    def label_rule(kind: np.ndarray) -> int:
        return int(all(np.any(kind == j) for j in range(1, k + 1)))

    def concepts(label: int) -> list[int]:
        if label == 1:
            return list(range(1, k + 1))
        n_present = int(rng.integers(1, k))  # 1 .. k-1 concepts
        return sorted(rng.choice(np.arange(1, k + 1), size=n_present, replace=False).tolist())

    def build(n: int, split: str) -> SyntheticBags:
        poisoned = _poison_parts(rng, split, poison, poison_rate, n_p)
        return _build_split(
            rng, n, split, lambda label: [(j, _draw(rng, n_c)) for j in concepts(label)] + poisoned(label),
            size, means, spread, n_features, label_rule,
            name=f"multi-concept MIL unit test, k={k} ({split})",
            info=_unit_test_info(
                "make_multi_concept_test", rule, means, split=split, n_concepts=k, poison=poison,
                poison_in=("negative" if split == "train" else "positive") if poison else None,
                separation=separation, spread=spread,
            ),
            background=background,
        )

    return build(n_train, "train"), build(n_test, "test")


def make_false_frequency_test(
    n_train: int = 200,
    n_test: int = 200,
    n_features: int = 10,
    bag_size: int | tuple[int, int] = (8, 16),
    random_state: int | np.random.Generator | None = 0,
    *,
    separation: float = 4.0,
    spread: float = 0.5,
    concept_per_bag: int | tuple[int, int] = (1, 2),
    few: int | tuple[int, int] = (0, 1),
    many: int | tuple[int, int] = (4, 7),
    background: str = "fill",
) -> tuple[SyntheticBags, SyntheticBags]:
    """False-frequency unit test: the label must not follow how often a distractor appears.

    Label rule (both sets): **a bag is positive iff it holds at least one concept instance**
    ``N(mu_c, spread^2 I)``. A distractor instance type ``N(mu_d, spread^2 I)`` appears in bags
    of both classes, but with class-dependent frequency: in *training*, negative bags hold
    ``many`` of them and positive bags ``few``; in the *test* set the frequencies are swapped.
    A model that counts (or averages) the distractor learns "many distractors => negative" and
    fails on the test set; a model that looks for the concept is unaffected. The distractors are
    independent draws, not repeats of one instance, so min pooling sees their number too (the
    bag's smallest distance to ``mu_d`` shrinks as they grow more numerous).

    Parameters
    ----------
    %(common)s
    concept_per_bag : int or (int, int), default=(1, 2)
        Inclusive range of concept instances in a positive bag.
    few, many : int or (int, int), default=(0, 1) and (4, 7)
        Inclusive ranges of distractor counts in the "rare" and the "frequent" class.

    Returns
    -------
    train, test : SyntheticBags
        ``info["means"]`` maps 1 (concept) and -2 (distractor) to their means.
    """
    rng = _rng(random_state)
    size = _check_range(bag_size, "bag_size", low=1)
    n_c = _check_range(concept_per_bag, "concept_per_bag", low=1)
    few_r = _check_range(few, "few", low=0)
    many_r = _check_range(many, "many", low=0)
    if many_r[0] <= few_r[1]:
        raise ValueError(f"every 'many' count must exceed every 'few' count; got few={few}, many={many}.")
    n_features = int(n_features)
    dirs = _directions(rng, 2, n_features)
    means = {1: separation * dirs[0], DISTRACTOR: separation * dirs[1]}
    rule = "positive iff the bag holds at least one concept instance (distractor counts are irrelevant)"

    def label_rule(kind: np.ndarray) -> int:
        return int(np.any(kind == 1))

    def build(n: int, split: str) -> SyntheticBags:
        frequent_class = 0 if split == "train" else 1

        def parts(label: int) -> list[tuple[int, int]]:
            out = [(1, _draw(rng, n_c))] if label == 1 else []
            n_d = _draw(rng, many_r if label == frequent_class else few_r)
            return out + ([(DISTRACTOR, n_d)] if n_d else [])

        return _build_split(
            rng, n, split, parts, size, means, spread, n_features, label_rule,
            name=f"false-frequency MIL unit test ({split})",
            info=_unit_test_info(
                "make_false_frequency_test", rule, means, split=split,
                distractor_frequent_in="negative" if split == "train" else "positive",
                few=few_r, many=many_r, separation=separation, spread=spread,
            ),
            background=background,
        )

    return build(n_train, "train"), build(n_test, "test")


for _f in (make_single_concept_test, make_multi_concept_test, make_false_frequency_test):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ = _f.__doc__.replace("%(common)s", _COMMON_PARAMS_DOC.strip("\n").lstrip())
del _f

#: Name -> generator of the algorithmic unit tests; each returns ``(train, test)``.
MIL_UNIT_TESTS: dict[str, Callable[..., tuple[SyntheticBags, SyntheticBags]]] = {
    "single_concept": make_single_concept_test,
    "multi_concept": make_multi_concept_test,
    "false_frequency": make_false_frequency_test,
}
