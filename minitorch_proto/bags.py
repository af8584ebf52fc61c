"""Variable-size bags as one flat tensor plus offsets.

A batch of bags is stored the way a ragged array is stored on disk: every
instance of every bag stacked into one ``(n_instances, n_features)`` tensor, and
a ``bag_index`` vector saying which bag each row belongs to. Pooling is then a
segment reduction (``scatter_reduce``), so a bag of 1 instance and a bag of
100,000 instances cost exactly their own size: there is no padding to ignore.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

__all__ = ["BagBatch", "segment_pool", "shared_pool", "bag_groups", "StackedInstances", "POOLINGS"]

POOLINGS = ("min", "mean", "max")


@dataclass
class BagBatch:
    """A batch of bags in flat form.

    Attributes
    ----------
    instances : Tensor of shape (n_instances, n_features)
    bag_index : LongTensor of shape (n_instances,)
        Bag number (0..n_bags-1) of each instance; instances of a bag are contiguous.
    n_bags : int
    """

    instances: torch.Tensor
    bag_index: torch.Tensor
    n_bags: int

    @classmethod
    def from_bags(
        cls,
        bags: Sequence[np.ndarray | torch.Tensor],
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> "BagBatch":
        """Stack a sequence of 2-D bags (instances x features) into one batch."""
        if len(bags) == 0:
            raise ValueError("A batch needs at least one bag.")
        tensors = [torch.as_tensor(b, dtype=dtype) for b in bags]
        sizes = torch.tensor([t.shape[0] for t in tensors], dtype=torch.long)
        if (sizes == 0).any():
            raise ValueError(f"Bag {int(torch.nonzero(sizes == 0)[0])} is empty.")
        instances = torch.cat(tensors, dim=0)
        bag_index = torch.repeat_interleave(torch.arange(len(tensors)), sizes)
        return cls(instances.to(device), bag_index.to(device), len(tensors))

    @property
    def sizes(self) -> torch.Tensor:
        """Number of instances in each bag."""
        return torch.bincount(self.bag_index, minlength=self.n_bags)

    @property
    def n_features(self) -> int:
        return int(self.instances.shape[1])

    def to(self, device) -> "BagBatch":
        return BagBatch(self.instances.to(device), self.bag_index.to(device), self.n_bags)


def segment_pool(values: torch.Tensor, bag_index: torch.Tensor, n_bags: int, how: str) -> torch.Tensor:
    """Reduce per-instance rows to per-bag rows.

    Parameters
    ----------
    values : Tensor of shape (n_instances, D)
    bag_index : LongTensor of shape (n_instances,)
    n_bags : int
    how : {"min", "mean", "max"}

    Returns
    -------
    Tensor of shape (n_bags, D)
    """
    index = bag_index.unsqueeze(1).expand_as(values)
    out = values.new_zeros((n_bags, values.shape[1]))
    if how == "min":
        return out.scatter_reduce(0, index, values, reduce="amin", include_self=False)
    if how == "max":
        return out.scatter_reduce(0, index, values, reduce="amax", include_self=False)
    if how == "mean":
        return out.scatter_reduce(0, index, values, reduce="mean", include_self=False)
    raise ValueError(f"Unknown pooling {how!r}; choose from {POOLINGS}.")


def shared_pool(sets: Sequence[tuple[Sequence[np.ndarray], np.ndarray]]) -> tuple[list, np.ndarray, list]:
    """One pool of bags for several training sets that share bags (a cross-validation's folds).

    ``sets`` holds ``(bags, encoded_labels)`` pairs. A bag object that appears in several sets
    with the same label is stored once, so 50 folds of a data set cost one copy of it, not 45.

    Returns
    -------
    pool : list of the distinct bags
    labels : int64 array, the label of each pooled bag
    index_sets : one int64 array per set: the positions of its bags in ``pool``, in its order
    """
    pool: list = []
    labels: list[int] = []
    slot: dict[tuple[int, int], int] = {}
    index_sets = []
    for bags, y in sets:
        rows = []
        for bag, label in zip(bags, np.asarray(y).tolist()):
            key = (id(bag), int(label))
            if key not in slot:
                slot[key] = len(pool)
                pool.append(bag)
                labels.append(int(label))
            rows.append(slot[key])
        index_sets.append(np.asarray(rows, dtype=np.int64))
    return pool, np.asarray(labels, dtype=np.int64), index_sets


def bag_groups(sizes: Sequence[int], chunk_size: int) -> list[tuple[int, int]]:
    """Runs ``(a, b)`` of consecutive bags holding about ``chunk_size`` instances each (at least one bag).

    How a collection too large to hold is read: a group at a time, so memory is bounded by
    ``chunk_size`` instances or the largest bag, whichever is larger.
    """
    ends = np.cumsum(np.asarray(sizes, dtype=np.int64))
    cuts, start = [0], 0
    for i, end in enumerate(ends):
        if end - start > chunk_size and i > cuts[-1]:
            cuts.append(i)
            start = ends[i - 1]
    cuts.append(len(ends))
    return list(zip(cuts[:-1], cuts[1:]))


class StackedInstances:
    """The standardised training instances of a set of bags, held in memory as one (N, L) array.

    A *row source*: what the steps after training (the push, the similarity width, the convex
    head's features; :func:`~minitorch_proto.convex_head.refit_members`) and a data-driven start
    (:func:`~minitorch_proto.model.init_prototypes`) read. Its twin for bags too large to hold,
    :class:`~minitorch_proto.training.distributed.StreamedInstances`, reads them when needed and
    has the same members:

    * ``sizes``: instances per bag; ``len(source)``: all instances;
    * ``source[idx]``: the rows at global positions ``idx`` (bag after bag), float64;
    * ``pieces()``: ``(bag, first_row, rows)`` covering every bag in order;
    * ``groups()``: ``(bag_ids, rows, local_bag_index)`` for runs of consecutive bags;
    * ``nearest_across(pushed, sources, best)`` and ``gather(ids, rows)``: what several processes,
      each reading its share of the bags, combine (here, one holds them all: the first is the
      identity, the second concatenates in bag order).
    """

    def __init__(self, instances: np.ndarray, sizes: Sequence[int]) -> None:
        self.instances = instances
        self.sizes = np.asarray(sizes, dtype=np.int64)
        if int(self.sizes.sum()) != len(instances):
            raise ValueError(f"the bag sizes add up to {int(self.sizes.sum())} instances, not {len(instances)}.")

    def __len__(self) -> int:
        return len(self.instances)

    def __getitem__(self, idx) -> np.ndarray:
        return self.instances[idx]

    def pieces(self):
        for b, rows in enumerate(np.split(self.instances, np.cumsum(self.sizes)[:-1])):  # views
            yield b, 0, rows

    def groups(self):
        yield np.arange(len(self.sizes)), self.instances, np.repeat(np.arange(len(self.sizes)), self.sizes)

    def nearest_across(self, pushed: np.ndarray, sources: np.ndarray, best: np.ndarray):
        return pushed, sources

    def gather(self, ids: list[np.ndarray], rows: list[np.ndarray]) -> np.ndarray:
        return rows[0]  # groups() yields one group, every bag in order
