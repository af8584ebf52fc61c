"""The bag containers: :class:`BagDataset` (read from files) and :class:`SyntheticBags` (generated).

A *bag* is a 2-D array (instances x features) with one label for the whole bag.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..validation import check_bags, check_labels, check_same_length

__all__ = ["BagDataset", "SyntheticBags"]


# --------------------------------------------------------------------------- #
# The data container
# --------------------------------------------------------------------------- #
# eq=False: the fields hold arrays, for which the generated ``==`` would be ambiguous.
def _plain_value(value):
    return value.item() if isinstance(value, np.generic) else value


def plain_labels(y: np.ndarray, where: str) -> np.ndarray:
    """Labels as the user gave them: whole numbers as int64, booleans as bool, anything else unchanged."""
    if y.dtype.kind in "iu":
        return y.astype(np.int64)
    if y.dtype.kind == "f":
        if np.all(y == np.round(y)) and np.all(np.abs(y) <= 2 ** 53):  # beyond, int64 would wrap or round
            return y.astype(np.int64)
        return y
    if y.dtype.kind in "bUS":
        return y
    values = [_plain_value(v) for v in y]
    kinds = {type(v) for v in values}
    if kinds <= {int, bool} and bool in kinds and int in kinds:
        raise ValueError(f"{where}: bag labels mix booleans and numbers; use one kind.")
    if kinds == {bool}:
        return np.asarray(values, dtype=bool)
    if kinds <= {int}:
        too_large = [v for v in values if abs(v) > 2 ** 63 - 1]
        if too_large:
            raise ValueError(f"{where}: label {too_large[0]} is too large for a class label (is it an id column?).")
        return np.asarray(values, dtype=np.int64)
    return np.asarray([str(v) for v in values]) if kinds <= {str} else y


@dataclass(eq=False)
class BagDataset:
    """Bags of instances with one label per bag.

    Parameters
    ----------
    name : str
        Short name, e.g. ``"musk1"``.
    bags : list of ndarray
        One float64 array of shape (n_instances_i, n_features) per bag.
    y : ndarray, shape (n_bags,)
        Bag labels as given (0/1 for the benchmarks; the user's own classes otherwise:
        strings, -1/+1, booleans). Whole numbers are stored as int64.
    bag_ids : ndarray, shape (n_bags,)
        The bag ids as found in the source (integers for the benchmarks,
        whatever the bag column held for the user's data).
    source : str
        File path or URL the data were read from ("" when built in memory).
    feature_names : ndarray of str, optional
        The feature columns' names when the source had them (a CSV's header): pass them on as
        ``fit(data.bags, data.y, feature_names=data.feature_names)``, so a saved model matches a
        CSV's columns by name when it predicts.

    Notes
    -----
    The constructor validates its inputs with
    :func:`minitorch_proto.validation.check_bags`, so every bag is a finite,
    2-D, C-contiguous float64 array and all bags share the number of features.
    """

    name: str
    bags: list[np.ndarray]
    y: np.ndarray
    bag_ids: np.ndarray
    source: str = ""
    feature_names: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.bags = check_bags(self.bags, name=f"{self.name} bags")
        n = len(self.bags)
        y = np.asarray(self.y)
        # check_labels rejects 2-D and NaN labels; its encoding is not used because it
        # would renumber a single-class subset such as "only positives" to 0.
        check_labels(y, n_bags=n, min_classes=1)
        self.y = plain_labels(y.reshape(-1), self.name)
        self.bag_ids = np.asarray(self.bag_ids).reshape(-1)
        if len(self.bag_ids) != n:
            raise ValueError(
                f"{self.name}: {n} bags but {len(self.bag_ids)} bag ids: they must match."
            )
        if self.feature_names is not None:
            self.feature_names = np.asarray([str(n) for n in self.feature_names], dtype=object)
            if len(self.feature_names) != self.n_features:
                raise ValueError(f"{self.name}: {self.n_features} features but {len(self.feature_names)} feature names.")
        repeated = pd.Index(self.bag_ids)[pd.Index(self.bag_ids).duplicated()].unique()
        if len(repeated):
            # Predictions, explanations and split files name bags by id: two bags under one id would mix.
            raise ValueError(f"{self.name}: bag ids repeat ({', '.join(map(repr, repeated[:3].tolist()))}); "
                             "each bag needs its own id.")

    @property
    def n_bags(self) -> int:
        """Number of bags."""
        return len(self.bags)

    @property
    def n_instances(self) -> int:
        """Total number of instances over all bags."""
        return int(sum(b.shape[0] for b in self.bags))

    @property
    def n_features(self) -> int:
        """Number of features per instance."""
        return int(self.bags[0].shape[1])

    @property
    def bag_sizes(self) -> np.ndarray:
        """Number of instances in each bag, as an int64 array."""
        return np.array([b.shape[0] for b in self.bags], dtype=np.int64)

    def __len__(self) -> int:
        return self.n_bags

    def __repr__(self) -> str:
        s = self.summary()
        if set(s["classes"]) <= {0, 1}:
            counts = f"{s['positive']} positive, {s['negative']} negative"
        else:
            counts = ", ".join(f"{c!r}: {k}" for c, k in s["classes"].items())
        return (
            f"BagDataset(name={self.name!r}, bags={s['bags']} ({counts}), "
            f"instances={s['instances']}, features={s['features']})"
        )

    def summary(self) -> dict:
        """Counts describing the data set.

        Returns
        -------
        dict
            Keys ``name``, ``bags``, ``positive`` (bags with label 1),
            ``negative`` (bags with label 0), ``classes`` (bags per label, for labels
            of any kind), ``instances``, ``features``,
            ``min_bag_size`` and ``max_bag_size``; values are plain Python
            ``str``/``int``.
        """
        sizes = self.bag_sizes
        return {
            "name": self.name,
            "bags": self.n_bags,
            "positive": int(np.sum(self.y == 1)),
            "negative": int(np.sum(self.y == 0)),
            "classes": {_plain_value(c): int(k) for c, k in zip(*np.unique(self.y, return_counts=True))},
            "instances": int(sizes.sum()),
            "features": self.n_features,
            "min_bag_size": int(sizes.min()),
            "max_bag_size": int(sizes.max()),
        }

    def subset(self, indices) -> "BagDataset":
        """Return the bags at ``indices`` as a new :class:`BagDataset`.

        Parameters
        ----------
        indices : array-like of int, boolean mask of length ``n_bags``, or slice
            Positions of the bags to keep, each at most once (positions, not bag ids; to turn ids
            into positions use ``pd.Index(ds.bag_ids).get_indexer(ids)`` and refuse the -1 it
            gives an id the data set does not hold: ``np.searchsorted`` would take a neighbour).

        Returns
        -------
        BagDataset
            Same name and source; the bag arrays are shared, not copied.

        Raises
        ------
        IndexError
            If an index is out of range or a mask has the wrong length.
        ValueError
            If the selection is empty or names a bag twice (a bootstrap sample: index ``bags`` itself).
        """
        positions = np.arange(self.n_bags)[indices]
        positions = np.atleast_1d(positions)
        return BagDataset(
            name=self.name,
            bags=[self.bags[i] for i in positions],
            y=self.y[positions],
            bag_ids=self.bag_ids[positions],
            source=self.source,
            feature_names=self.feature_names,
        )

    def to_dataframe(self, bag_col: str = "bag", label_col: str = "label") -> pd.DataFrame:
        """The bags as one table, a row per instance: what :func:`~minitorch_proto.data.from_dataframe` reads.

        Columns: ``bag_col`` (the bag ids), ``label_col`` (each bag's label on every row) and the
        features, named by ``feature_names`` (``feature_1``, ... when there are none). So
        ``ds.to_dataframe().to_csv(path, index=False)`` writes a CSV that
        :func:`~minitorch_proto.data.load_bags_csv` reads back as the same bags, labels and
        features, with the ids as text (a CSV reader keeps ids as written: ``1`` comes back
        ``"1"``); an empty id or label cannot be read back (the reader refuses blank cells).

        Parameters
        ----------
        bag_col : str, default="bag"
            Name of the bag-id column (the first).
        label_col : str, default="label"
            Name of the label column (the second).

        Returns
        -------
        pandas.DataFrame
            ``n_instances`` rows, bag after bag in the data set's order, instances in their bag's order.

        Raises
        ------
        ValueError
            If ``bag_col`` and ``label_col`` are the same, or either names a feature column.
        """
        names = ([str(n) for n in self.feature_names] if self.feature_names is not None
                 else [f"feature_{j + 1}" for j in range(self.n_features)])
        clash = {bag_col, label_col} & set(names)
        if bag_col == label_col or clash:
            raise ValueError(f"bag_col, label_col and the feature names must differ; {sorted(clash) or [bag_col]} "
                             "is used twice.")
        sizes = self.bag_sizes
        table = pd.DataFrame(np.concatenate(self.bags), columns=names)
        table.insert(0, label_col, np.repeat(self.y, sizes))
        table.insert(0, bag_col, np.repeat(self.bag_ids, sizes))
        return table


@dataclass
class SyntheticBags:
    """A generated multiple-instance data set.

    Parameters
    ----------
    bags : list of ndarray
        One ``float64`` array of shape ``(n_instances_i, n_features)`` per bag.
    y : ndarray of int64, shape (n_bags,)
        Bag labels.
    name : str
        Short description of the data set (used in reports and by :meth:`to_dataset`).
    instance_labels : list of ndarray, optional
        Per bag, one ``int64`` label per instance (1 for concept / target instances).
    info : dict
        Generator-specific facts: the label rule, the distribution parameters, the true concept
        locations, per-instance kinds, and so on.
    """

    bags: list[np.ndarray]
    y: np.ndarray
    name: str
    instance_labels: list[np.ndarray] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.bags = check_bags(self.bags, name=f"{self.name} bags")
        self.y = np.asarray(self.y, dtype=np.int64).reshape(-1)
        check_same_length(bags=self.bags, y=self.y)
        if self.instance_labels is not None:
            self.instance_labels = [np.asarray(lab, dtype=np.int64).reshape(-1) for lab in self.instance_labels]
            check_same_length(bags=self.bags, instance_labels=self.instance_labels)
            for i, (bag, lab) in enumerate(zip(self.bags, self.instance_labels)):
                if len(lab) != len(bag):
                    raise ValueError(
                        f"instance_labels[{i}] has {len(lab)} entries but bag {i} has {len(bag)} instances."
                    )

    def __len__(self) -> int:
        return len(self.bags)

    @property
    def n_features(self) -> int:
        """Number of features per instance."""
        return int(self.bags[0].shape[1])

    def to_dataset(self, source: str | None = None):
        """Wrap the bags in a :class:`minitorch_proto.data.BagDataset`.

        Parameters
        ----------
        source : str, optional
            Provenance string; defaults to ``info["source"]`` or ``"synthetic"``.

        Returns
        -------
        BagDataset
        """
        return BagDataset(
            name=self.name,
            bags=self.bags,
            y=self.y,
            bag_ids=np.arange(len(self.bags), dtype=np.int64),
            source=source if source is not None else str(self.info.get("source", "synthetic")),
        )
