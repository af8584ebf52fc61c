"""Input checks shared by every estimator, loader and trainer.

Each check raises ``ValueError`` (or ``TypeError``) with a message that names the
offending bag or label, so a user can find the problem in their own data.
"""
from __future__ import annotations

import contextlib
import functools
import numbers
from typing import Iterator, Sequence

import numpy as np

_FLOAT32_MAX = float(np.finfo(np.float32).max)

__all__ = [
    "check_bool", "check_number",
    "check_bags", "check_shared_bags", "check_labels", "check_codes", "check_same_length", "seed_from",
    "check_chunk_size", "SEED_MAX",
    "frame_columns", "align_frames", "check_distance_range", "check_finite_scores", "check_int",
    "base_seed", "check_named_bags", "derived_seed", "frames_in_model_order", "own_feature_names", "fresh_fit",
    "fits_fresh",
]


def check_int(name: str, value, minimum: int | None = 1) -> int:
    """``value`` as an int if it is a whole number >= ``minimum``; a one-line ValueError naming ``name`` otherwise.

    Bools and fractional numbers are refused rather than truncated (``2.7`` prototypes is
    a mistake, not a request for 2).
    """
    whole = isinstance(value, (numbers.Integral, np.integer)) or (
        isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer())
    if isinstance(value, (bool, np.bool_)) or not whole:
        raise ValueError(f"{name} must be a whole number, got {value!r}.")
    if minimum is not None and int(value) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}.")
    return int(value)


def check_bool(name: str, value) -> bool:
    """``value`` as a bool if it is True or False (numpy's too); a one-line ValueError naming ``name`` otherwise.

    A string such as ``"False"`` (a setting read from text) is truthy: taken as it is, it would mean True.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def check_verbose(value) -> bool:
    """``verbose`` as a bool: True, False, or a count >= 0 as scikit-learn's estimators take it (0 is off); a
    one-line ValueError otherwise (``"False"`` read from text, or a model file, would mean True)."""
    if not isinstance(value, (bool, np.bool_, numbers.Integral)) or value < 0:
        raise ValueError(f"verbose must be True, False or a whole number >= 0, got {value!r}.")
    return bool(value)


def check_number(name: str, value, *, minimum: float = 0.0, inclusive: bool = False) -> float:
    """``value`` as a float if it is a finite real number > ``minimum`` (>= with ``inclusive``); else a one-line
    ValueError naming ``name``. Strings and bools are refused (``"1e-3"`` is a mistake to say, not to guess)."""
    real = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    if not real or not np.isfinite(float(value)) or (value < minimum if inclusive else value <= minimum):
        raise ValueError(f"{name} must be a finite number {'>=' if inclusive else '>'} {minimum:g}, got {value!r}.")
    return float(value)


def check_bags(
    bags: Sequence[np.ndarray],
    n_features: int | None = None,
    *,
    dtype: type | None = np.float64,
    name: str = "bags",
) -> list[np.ndarray]:
    """Validate a collection of bags and return them as 2-D float arrays.

    Parameters
    ----------
    bags : sequence of array-like, each of shape (n_instances, n_features)
        One entry per bag. A 1-D entry is read as a bag with a single instance.
    n_features : int, optional
        Required number of features (for example the number seen in ``fit``).
    dtype : numpy dtype or None
        dtype of the returned arrays. ``None``: float32 and float64 arrays come back as they are
        (no copy: a fit that converts them itself need not hold a float64 copy of float32 features),
        anything else as float64.
    name : str
        Name used in error messages.

    Returns
    -------
    list of ndarray
        Contiguous arrays of shape (n_instances_i, n_features).

    Raises
    ------
    ValueError
        If there are no bags, a bag is empty, bags disagree on the number of
        features, or a value is NaN, infinite or beyond float32's range (about 3.4e38).
    """
    if isinstance(bags, np.ndarray) and bags.dtype != object:
        if bags.ndim != 3:
            raise ValueError(
                f"{name} must be a sequence of 2-D arrays (instances x features); "
                f"got a single array of shape {bags.shape}. Pass a list of bags."
            )
        bags = list(bags)
    try:
        n_bags = len(bags)
    except TypeError as exc:
        raise TypeError(f"{name} must be a sequence of 2-D arrays, got {type(bags).__name__}") from exc
    if n_bags == 0:
        raise ValueError(f"{name} is empty: at least one bag is needed.")
    out: list[np.ndarray] = []
    expected = n_features
    for i, bag in enumerate(bags):
        try:
            if np.iscomplexobj(bag):  # numpy would drop the imaginary part with only a warning
                raise ValueError(f"{name}[{i}] holds complex numbers; features must be real.")
            arr = np.asarray(bag, dtype=dtype)
            if dtype is None and arr.dtype not in (np.float32, np.float64):
                arr = np.asarray(arr, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            if str(exc).startswith(f"{name}[{i}] "):
                raise
            raise ValueError(f"{name}[{i}] could not be converted to a float array: {exc}") from exc
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2:
            raise ValueError(
                f"{name}[{i}] must be 2-D (instances x features); got shape {arr.shape}."
            )
        if arr.shape[0] == 0:
            raise ValueError(f"{name}[{i}] is empty: every bag needs at least one instance.")
        if arr.shape[1] == 0:
            raise ValueError(f"{name}[{i}] has no features.")
        if expected is None:
            expected = arr.shape[1]
        elif arr.shape[1] != expected:
            raise ValueError(
                f"{name}[{i}] has {arr.shape[1]} features but "
                f"{'the model was fitted with' if n_features is not None else 'earlier bags have'} "
                f"{expected}."
            )
        if not np.all(np.isfinite(arr)):
            bad = np.argwhere(~np.isfinite(arr))[0]
            raise ValueError(
                f"{name}[{i}] contains NaN or infinite values "
                f"(first at instance {bad[0]}, feature {bad[1]})."
            )
        big = np.abs(arr) > _FLOAT32_MAX
        if big.any():
            # The models compute in float32: such a value would turn infinite there and poison the prototypes.
            j, k = np.argwhere(big)[0]
            raise ValueError(
                f"{name}[{i}] holds a value beyond float32's range (instance {j}, feature {k}: {float(arr[j, k])!r}); "
                "rescale the features."
            )
        out.append(np.ascontiguousarray(arr))
    return out


def check_shared_bags(bags: Sequence[np.ndarray], seen: dict, **kwargs) -> list[np.ndarray]:
    """:func:`check_bags` for training sets that share bag objects (a cross-validation's folds).

    A bag object met before, in any call given the same ``seen`` dict, comes back as the array
    it was validated into then. Without it a conversion (float32 to float64, say) gives every
    fold its own copy of every bag, and a pool of the sets (:func:`~minitorch_proto.bags.shared_pool`)
    holds 45 copies of the data for 5 x 10 folds instead of one.
    """
    checked = check_bags(bags, **kwargs)
    if isinstance(bags, np.ndarray) and bags.dtype != object:
        return checked  # one 3-D array: its rows are new objects on every call
    # The original is kept beside its copy so that its id cannot be reused while ``seen`` lives.
    return [seen.setdefault(id(bag), (bag, arr))[1] for bag, arr in zip(bags, checked)]


def check_labels(y, n_bags: int | None = None, *, min_classes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Validate bag labels and encode them as 0..C-1.

    Parameters
    ----------
    y : array-like of shape (n_bags,)
        One label per bag (any hashable, sortable values).
    n_bags : int, optional
        Number of bags the labels must match.
    min_classes : int
        Fewest distinct classes allowed (2 for fitting a classifier).

    Returns
    -------
    y_encoded : ndarray of int64
    classes : ndarray
        The sorted distinct labels; ``classes[y_encoded]`` recovers ``y``.
    """
    y_arr = np.asarray(y)
    if isinstance(y, (list, tuple)) and y_arr.dtype.kind in "US":
        # numpy turns [0, 1, "1"] into strings, merging 1 and "1": look at the labels as given.
        kinds = {"str" if isinstance(v, str) else type(v).__name__ for v in y}
        if len(kinds) > 1:
            names = sorted(kinds)
            raise ValueError(f"y mixes label types {names}; use one type (1 and '1' would be one class).")
    if y_arr.ndim != 1:
        y_arr = y_arr.reshape(-1) if y_arr.ndim == 2 and 1 in y_arr.shape else y_arr
    if y_arr.ndim != 1:
        raise ValueError(f"y must be 1-D (one label per bag); got shape {np.asarray(y).shape}.")
    if n_bags is not None and len(y_arr) != n_bags:
        raise ValueError(f"Found {n_bags} bags but {len(y_arr)} labels: they must match.")
    if y_arr.dtype.kind == "f" and not np.all(np.isfinite(y_arr)):
        raise ValueError("y contains NaN or infinite labels.")
    if y_arr.dtype == object:
        # v != v is the NaN test that works for any object.
        missing = [i for i, v in enumerate(y_arr) if v is None or v != v]
        if missing:
            raise ValueError(f"y holds a missing label (None or NaN) at position {missing[0]}; every bag needs a label.")
    if y_arr.dtype.kind == "f" and np.any(y_arr != np.round(y_arr)):
        raise ValueError("y must hold class labels, not continuous values.")
    try:
        classes, encoded = np.unique(y_arr, return_inverse=True)
    except TypeError:
        kinds = sorted({type(v).__name__ for v in y_arr})
        raise ValueError(f"y mixes label types {kinds} that cannot be sorted; use one type.") from None
    if len(classes) < min_classes:
        raise ValueError(
            f"y has {len(classes)} distinct class(es) {classes.tolist()}; "
            f"at least {min_classes} are needed to fit a classifier."
        )
    return encoded.astype(np.int64), classes


def check_codes(y, n_classes: int | None = None) -> tuple[np.ndarray, int]:
    """Labels already encoded as class codes 0..C-1 (what the trainers take), as int64, with C.

    The trainers index each bag's logits by its code: -1 had trained a cross-entropy without a lower
    bound, 0.5 was read as 0 by some engines and as 0.5 by another, and a code past ``n_classes`` was
    read out of bounds by the compiled loop. An estimator encodes any labels (:func:`check_labels`).
    """
    raw = np.asarray(y)
    if raw.dtype.kind == "O":  # whole numbers held as Python objects are codes too
        try:
            raw = raw.astype(np.float64)
        except (TypeError, ValueError):
            pass
    if raw.dtype.kind not in "iub" and not (raw.dtype.kind == "f" and np.all(np.isfinite(raw))
                                            and np.array_equal(raw, np.round(raw))):
        raise ValueError(f"y must hold class codes 0..C-1 (whole numbers); got {raw.dtype} values such as "
                         f"{raw.reshape(-1)[:3].tolist()} (an estimator's fit encodes any labels).")
    codes = raw.astype(np.int64).reshape(-1)
    n_classes = int(n_classes or (codes.max() + 1 if codes.size else 0))
    if codes.size and (codes.min() < 0 or codes.max() >= n_classes):
        want = f"0..{n_classes - 1}" if n_classes > 0 else "from 0 up"
        raise ValueError(f"y must hold class codes {want}; got values from {codes.min()} to "
                         f"{codes.max()} (an estimator's fit encodes any labels).")
    return codes, n_classes


def check_same_length(**arrays) -> int:
    """Check that named sequences have the same length and return it."""
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{k}={n}" for k, n in lengths.items())
        raise ValueError(f"Lengths differ: {desc}.")
    return next(iter(lengths.values()))


# Squared instance norms above this (after standardisation) would overflow the
# prototype distances in the model's float type; the margin covers |x - p|^2 <= 2|x|^2 + 2|p|^2
# and the sums over instances behind mean pooling.
_RANGE_MARGIN = 64.0


def seed_from(random_state) -> int:
    """An integer seed from scikit-learn's ``random_state`` convention.

    None draws fresh entropy (each fit differs), an int is used as it is, a
    ``numpy.random.RandomState`` or ``Generator`` gives the next draw of its stream.
    """
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0] >> 1)
    if isinstance(random_state, (numbers.Integral, np.integer)) and not isinstance(random_state, bool):
        if not 0 <= random_state < 2**63:
            raise ValueError(f"random_state must be an int from 0 to 2**63 - 1, got {random_state}.")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**31 - 1))
    raise ValueError(
        f"random_state must be None, an int, a numpy RandomState or a numpy Generator; got {random_state!r}."
    )


#: The largest seed numpy takes (seeds are 0..SEED_MAX): one home for the command line and the notebooks.
SEED_MAX = 2**32 - 1


def derived_seed(value: int) -> int:
    """A seed made from another (``1000 seed + 100 r + f``, ``10 seed + s``, ``seed + 10,000 j``),
    brought into numpy's range: the same number whenever it fits, so every seed below about
    4 million derives exactly as before, and any valid seed derives a valid one."""
    return int(value) % (SEED_MAX + 1)


def base_seed(random_state) -> int:
    """The seed an estimator derives others from: an int ``random_state`` as given; None (fresh
    entropy) or a numpy generator draws one below 2**27 (derived seeds, ``10 seed + s`` and
    ``seed + 10,000 j``, then need no wrapping by :func:`derived_seed`)."""
    if isinstance(random_state, (numbers.Integral, np.integer)) and not isinstance(random_state, bool):
        return seed_from(random_state)
    return seed_from(random_state) % 2**27


@contextlib.contextmanager
def fresh_fit(estimators: Sequence) -> Iterator[None]:
    """A fit that starts from nothing and, if it fails, leaves the estimators unfitted.

    Every fitted attribute (scikit-learn's ``name_``) of an earlier fit is removed first, so
    one that this fit does not set (``prototype_sources_`` when ``push`` is now off) cannot
    outlive it; a fit that raises removes what it had set, so a half-fitted estimator never
    predicts with new classes on an old model.
    """
    def forget() -> None:
        for est in estimators:
            for name in [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]:
                delattr(est, name)

    forget()
    try:
        yield
    except BaseException:
        forget()
        raise


def fits_fresh(fit):
    """Decorate an estimator's ``fit`` so that it runs under :func:`fresh_fit`."""
    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        with fresh_fit([self]):
            return fit(self, *args, **kwargs)
    return wrapper


def check_chunk_size(chunk_size) -> int:
    """``chunk_size`` as a positive int (bools and floats refused)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (numbers.Integral, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer (instances per chunk), got {chunk_size!r}.")
    return int(chunk_size)


def frame_columns(bags) -> list[str] | None:
    """Column names when every bag is a pandas DataFrame with the same columns."""
    import pandas as pd

    if _bag_sequence(bags) and len(bags) and all(isinstance(b, pd.DataFrame) for b in bags):
        return [str(c) for c in bags[0].columns]
    return None


def _bag_sequence(bags) -> bool:
    """A list, tuple or numpy object array of bags (``bags_array[train_index]``), not a lazy folder."""
    return isinstance(bags, (list, tuple)) or (isinstance(bags, np.ndarray) and bags.dtype == object)


def align_frames(bags, names: Sequence[str]) -> list[np.ndarray]:
    """DataFrame bags as arrays with their columns in ``names`` order (matched by name)."""
    import pandas as pd

    out = []
    for i, b in enumerate(bags):
        if not isinstance(b, pd.DataFrame):
            out.append(b)
            continue
        cols = [str(c) for c in b.columns]
        present, wanted = set(cols), set(names)
        missing = [n for n in names if n not in present]
        extra = [c for c in cols if c not in wanted]
        if missing:
            raise ValueError(f"bags[{i}] is missing feature column(s) {missing} the model was fitted with.")
        if extra:
            raise ValueError(f"bags[{i}] has column(s) {extra} the model was not fitted with.")
        out.append(b.set_axis(cols, axis=1)[list(names)].to_numpy())
    return out


def frames_in_model_order(bags, names: Sequence[str] | None):
    """DataFrame bags in a fitted model's column order (``feature_names_in_``), other bags unchanged.

    Every path that reads bags for a fitted model goes through this, so an explanation of a bag
    with its columns in another order explains the logit ``predict`` computes, not another one.
    """
    import pandas as pd

    # Every DataFrame among the bags, also in a list that mixes them with arrays (read by name, the
    # arrays by position); a lazy collection (a bag folder) is left to read its own files.
    if names is not None and _bag_sequence(bags) and any(isinstance(b, pd.DataFrame) for b in bags):
        return align_frames(list(bags), list(names))
    return bags


def check_named_bags(bags) -> tuple[list[np.ndarray], list[str] | None]:
    """:func:`check_bags` for a fit: DataFrame bags read by column name, and their names (None for
    arrays), which the fitted estimator keeps as ``feature_names_in_`` to read later bags by."""
    names = own_feature_names(bags)
    return check_bags(frames_in_model_order(bags, names)), names


def own_feature_names(bags, feature_names=None) -> list[str] | None:
    """The column names a fit records: DataFrame bags' own, else ``feature_names`` (checked
    against the bags' width). Naming DataFrame bags' columns otherwise is refused: the model
    would train on their order and read new frames by the other one."""
    own = frame_columns(bags)
    names = None if feature_names is None else [str(n) for n in feature_names]
    if own is not None and names is not None and names != own:
        raise ValueError(f"feature_names {names[:4]}... differ from the DataFrame bags' own columns {own[:4]}...; "
                         "leave feature_names out for DataFrame bags (their columns are read by name).")
    n_cols = np.shape(bags[0])[-1] if names is not None and len(bags) else None
    if n_cols is not None and len(names) != n_cols:
        raise ValueError(f"feature_names has {len(names)} names but the bags have {n_cols} features.")
    return own if own is not None else names


def _rescale_advice(standardization: str | None) -> str:
    return "rescale the features" + ("" if standardization == "feature" else " or use standardization='feature'")


def check_distance_range(std_bags: Sequence[np.ndarray], dtype, first: int = 0,
                         standardization: str | None = None) -> None:
    """Refuse standardised bags whose distances would overflow ``dtype`` (giving NaN scores).

    ``first``: the position of ``std_bags[0]`` in the whole collection (a group read from a folder),
    so the error names the bag by its own place. ``standardization``: the model's, so the advice
    does not suggest the setting it already has.
    """
    import torch

    limit = float(torch.finfo(dtype).max) / _RANGE_MARGIN
    for i, b in enumerate(std_bags, start=int(first)):
        sq = np.einsum("ij,ij->i", b, b)
        bad = ~(sq < limit)  # also true for inf and NaN
        if bad.any():
            j = int(np.argmax(bad))
            raise ValueError(
                f"bags[{i}] has values too large for {str(dtype).replace('torch.', '')} distances after "
                f"standardisation (instance {j}, norm {np.sqrt(sq[j]):.3g}); {_rescale_advice(standardization)}."
            )


def check_finite_scores(values, what: str, standardization: str | None = None) -> None:
    """Refuse non-finite scores (a torch tensor, one row per bag), naming the first bag."""
    import torch

    bad = ~torch.isfinite(values).reshape(len(values), -1).all(dim=1)
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise ValueError(
            f"bags[{i}] gets non-finite {what} ({int(bad.sum())} bag(s) in all); its features overflow the "
            f"model's arithmetic: {_rescale_advice(standardization)}."
        )
