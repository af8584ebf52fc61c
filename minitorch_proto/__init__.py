"""minitorch_proto: learning maximally predictive prototypes for multiple instance learning.

Data flow, one way: ``data`` -> ``bags`` -> ``model`` -> ``training`` -> ``estimator``
-> ``evaluation`` -> ``plots`` -> ``book`` -> ``cli`` (checked by ``tests/test_layout.py``).
"""
from .about import __version__
from .bags import BagBatch
from .training import BatchedFit, train_batched
from .evaluation.cv import (
    cross_validate,
    split_file_folds,
    stratified_folds,
    summarize,
)
from .data import BagDataset, from_dataframe, load_bags_csv, load_benchmark, read_split_files
from .estimator import PrototypeMILClassifier, load_model
from .methods import METHODS
from .methods import make as make_method
from .model import (
    PrototypeMIL,
    PrototypeMILConfig,
    compat_config,
    head_logits,
    loss_terms,
    monotone_config,
    normalize_features,
)
from .preprocessing import BagStandardizer
from .paper import MI_NET_PLAIN, PAPER_TABLE2, REPORTED_BASELINES, REPORTED_COUNTERPARTS, paper_configs
from .training import TrainConfig, compat_train_config, train_model

__all__ = [
    "__version__",
    "BagBatch",
    "BagDataset",
    "BagStandardizer",
    "BatchedFit",
    "PrototypeMIL",
    "PrototypeMILClassifier",
    "PrototypeMILConfig",
    "TrainConfig",
    "compat_config",
    "monotone_config",
    "compat_train_config",
    "cross_validate",
    "head_logits",
    "loss_terms",
    "normalize_features",
    "PAPER_TABLE2",
    "REPORTED_BASELINES",
    "REPORTED_COUNTERPARTS",
    "MI_NET_PLAIN",
    "from_dataframe",
    "load_bags_csv",
    "load_benchmark",
    "load_model",
    "make_method",
    "METHODS",
    "paper_configs",
    "read_split_files",
    "split_file_folds",
    "stratified_folds",
    "summarize",
    "train_batched",
    "train_model",
]
