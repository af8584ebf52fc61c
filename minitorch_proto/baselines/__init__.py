"""Baseline multiple-instance classifiers that the prototype model is compared against.

Every class follows the scikit-learn estimator contract for bags: ``fit(bags, y)``,
``predict``, ``predict_proba`` (n_bags, 2), ``decision_function``, ``classes_``,
``get_params``/``set_params``/``clone``, and a ``random_state`` argument. A bag is a 2-D
array (instances x features); ``bags`` is a list of them. Inputs are validated with
:func:`minitorch_proto.validation.check_bags` / :func:`~minitorch_proto.validation.check_labels`.
The estimators do not standardise features themselves, and neither does
:func:`~minitorch_proto.evaluation.cross_validate`: :func:`minitorch_proto.methods.make` (and
:func:`~minitorch_proto.make_method`) wraps each baseline in
:class:`~minitorch_proto.meta_estimators.StandardizedMIL`, which fits the standardisation on the
bags given to ``fit``. Use that wrapper when calling a baseline directly on raw features.

Families
--------
* :class:`AttentionMIL`, :class:`GatedAttentionMIL` - Ilse, Tomczak & Welling (ICML 2018).
* :class:`MINet` (embedding-space MI-Net), :class:`miNet` (instance-space mi-Net) -
  Wang et al. (Pattern Recognition 2018).
* :class:`MILES` - Chen, Bi & Wang (TPAMI 2006).
* :class:`MISVM` - mi-SVM, Andrews, Tsochantaridis & Hofmann (NIPS 2002).
* :class:`BagStatistics` - per-bag mean/min/max + logistic regression.

Speed and budget: :func:`minitorch_proto.baselines.batched_fit.fit_many` trains many copies of a
neural baseline (all folds, seeds and inner fits) together and gives the same models as
fitting them one by one (on the CPU in compiled loops, :mod:`minitorch_proto.baselines.compiled_loops`); :mod:`minitorch_proto.evaluation.baseline_cv` runs the
cross-validation at the package defaults or with the common budget (seed ensemble + inner
tuning over a fixed grid).

``BASELINES`` maps a method name to a factory ``(random_state: int) -> estimator`` with
the default hyper-parameters. ``REPORTED_TABLE2`` holds accuracies *quoted* in the
prototype paper's Table 2 - reported by others, never measured by this package.
"""
from __future__ import annotations

from typing import Callable

from ..paper import REPORTED_BASELINES as _REPORTED_BASELINES
from ..utils import EstimatorFactory
from .attention import AttentionMIL, GatedAttentionMIL
from .bag_stats import BagStatistics, bag_statistics
from .miles import MILES, miles_embedding
from .minet import MINet, miNet
from .misvm import MISVM

__all__ = [
    "AttentionMIL",
    "GatedAttentionMIL",
    "MINet",
    "miNet",
    "MILES",
    "MISVM",
    "BagStatistics",
    "bag_statistics",
    "miles_embedding",
    "BASELINES",
    "REPORTED_TABLE2",
    "REPORTED_TABLE2_SE",
    "REPORTED_TABLE2_STATUS",
]


#: name -> factory(random_state) returning an unfitted estimator with default settings.
#: "mi_net_*" are the instance-space mi-Net, "MI_net_*" the embedding-space MI-Net.
BASELINES: dict[str, Callable[[int], object]] = {
    "attention": EstimatorFactory(AttentionMIL, gated=False),
    "gated_attention": EstimatorFactory(GatedAttentionMIL, gated=True),
    "mi_net_max": EstimatorFactory(miNet, pooling="max"),
    "mi_net_mean": EstimatorFactory(miNet, pooling="mean"),
    "MI_net_max": EstimatorFactory(MINet, pooling="max"),
    "MI_net_mean": EstimatorFactory(MINet, pooling="mean"),
    "miles": EstimatorFactory(MILES),
    "mi_svm": EstimatorFactory(MISVM),
    "bag_stats": EstimatorFactory(BagStatistics),
}

#: Marks every number in REPORTED_TABLE2 as quoted, not reproduced.
REPORTED_TABLE2_STATUS = (
    "reported, not measured: accuracies of 5x10-fold CV as quoted in Table 2 of "
    "Yuksekgonul, Sivrikaya & Baydogan (2019), themselves taken from the original papers"
)

#: Mean accuracy quoted in the prototype paper's Table 2 (REPORTED, NOT MEASURED here), for the
#: methods of NOTES.md's anchor table; the numbers live once, in ``minitorch_proto.paper``.
REPORTED_TABLE2: dict[str, dict[str, float]] = {
    name: dict(_REPORTED_BASELINES[name])
    for name in ("mi-SVM", "MI-Kernel", "mi-Graph", "miFV", "MI-Net", "Attention", "Gated attention")
}

#: The "+-" spread printed next to each REPORTED_TABLE2 entry (None where the table says N/A).
#: The paper does not say whether it is a standard deviation or a standard error.
REPORTED_TABLE2_SE: dict[str, dict[str, float | None]] = {
    "mi-SVM": {"musk1": None, "musk2": None, "fox": None, "tiger": None, "elephant": None},
    "MI-Kernel": {"musk1": 0.031, "musk2": 0.015, "fox": 0.028, "tiger": 0.010, "elephant": 0.016},
    "mi-Graph": {"musk1": 0.033, "musk2": 0.039, "fox": 0.044, "tiger": 0.037, "elephant": 0.035},
    "miFV": {"musk1": 0.040, "musk2": 0.042, "fox": 0.049, "tiger": 0.037, "elephant": 0.036},
    "MI-Net": {"musk1": 0.042, "musk2": 0.043, "fox": 0.037, "tiger": 0.039, "elephant": 0.032},
    "Attention": {"musk1": 0.040, "musk2": 0.048, "fox": 0.043, "tiger": 0.022, "elephant": 0.022},
    "Gated attention": {"musk1": 0.050, "musk2": 0.042, "fox": 0.029, "tiger": 0.018, "elephant": 0.027},
}
