"""How a :class:`~minitorch_proto.estimator.PrototypeMILClassifier` is trained.

Two routes, the same model: :func:`train_together` fits one or several estimators (a fit, a seed
list, a cross-validation's folds) as one batched program over one pool of bags
(:func:`~minitorch_proto.training.train_batched`); :func:`fit_streaming` reads the bags lazily,
in bounded memory, in one process or under ``torchrun``
(:func:`~minitorch_proto.training.distributed.train_streaming`). Both end the same way: each
member's prototypes pushed onto training instances and its convex head fitted, when asked
(:func:`~minitorch_proto.convex_head.refit_members`). The estimator's own module keeps its
parameters, its public methods and prediction.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from .bags import StackedInstances, shared_pool
from .convex_head import HeadWorkers, check_head_for_classes, refit_members
from .preprocessing import BagStandardizer
from .utils import resolve_device
from .validation import (align_frames, check_distance_range, check_labels, check_named_bags, check_shared_bags,
                         derived_seed, frame_columns, fresh_fit, seed_from)

__all__ = ["train_together", "fit_streaming"]


def train_together(template, sets, targets, on_epoch_end=None, n_jobs: int = 1) -> None:
    """Fit ``targets[t]`` on ``sets[t] = (bags, y)``, all in one batched program with ``template``'s settings.

    The targets' parameters may differ from ``template``'s at most in ``random_state`` and the two
    learning rates (each target's own are used). Nothing of an earlier fit survives; a fit that raises
    leaves every target unfitted.
    """
    from .training import train_batched

    with fresh_fit(targets):  # nothing of an earlier fit survives, nothing half-done is left
        mconf, tconf = template.model_config(), template.train_config()  # validates hyper-parameters first
        k = template._check_settings()
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
            standardizer = BagStandardizer(template.standardization).fit(bags)
            # Bag by bag (a generator): a standardised copy of every bag would only be thrown away.
            check_distance_range((standardizer.transform_instances(b) for b in bags), torch.float32,
                                 standardization=template.standardization)
            prepared.append((bags, y_enc, classes, names, standardizer))
        check_head_for_classes(template.head_threshold, template.class_weight, classes0)  # before training, not after
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
            model_seeds, mconf, tconf, n_classes=len(classes0), standardization=template.standardization,
            lr_prototypes=[float(e.lr_prototypes) for e in targets for _ in range(k)],
            lr_classifier=[float(e.lr_classifier) for e in targets for _ in range(k)],
            device=resolve_device(template.device), progress=template.verbose,
            on_epoch_end=None if on_epoch_end is None else (lambda epoch, f: on_epoch_end(epoch, f.module(0))),
            backend=template.backend, autocast=template.autocast,
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
            done = [_refit_after_training(est, StackedInstances(std.transform_stacked(bags), [len(b) for b in bags]),
                                          y_enc, classes, model_seeds[t * k:(t + 1) * k], workers)
                    for t, (est, (bags, y_enc, classes, _, std)) in enumerate(zip(targets, prepared))
                    if est.push or est.head == "logistic"]
            for finish in done:
                finish()


def _refit_after_training(est, source, y_enc, classes, seeds, workers) -> Callable[[], None]:
    """Push each of ``est``'s members' prototypes onto training instances (``source``, a row source) now;
    returns what stores its head once fitted."""
    pending = refit_members(
        est.models_, source, y_enc, classes, seeds, push=bool(est.push), head=est.head,
        penalty=est.head_penalty, class_weight=est.class_weight, threshold=est.head_threshold,
        similarity=bool(est.head_similarity), scoring=est.head_scoring, features=est.head_features,
        repeats=int(est.head_inner_repeats), chunk_size=int(est.chunk_size), workers=workers)

    def finish() -> None:
        sources, cs, chosen = pending()
        if sources is not None:
            est.prototype_sources_ = sources
        if cs is not None:
            est.head_C_, est.head_features_ = cs, chosen
    return finish


def fit_streaming(est, bags, y, *, dtype: torch.dtype = torch.float32) -> None:
    """Fit ``est`` reading ``bags`` lazily (see ``PrototypeMILClassifier.fit_streaming``)."""
    from .training.distributed import StreamedInstances, agree_across_ranks, train_streaming

    with fresh_fit([est]):
        mconf, tconf = est.model_config(), est.train_config()
        k = est._check_settings()
        names = None  # DataFrame bags: by column name, as fit reads them; a lazy dataset checks its own files
        if not hasattr(bags, "rows"):
            bags, names = check_named_bags(bags)
        y_enc, classes = check_labels(y, len(bags))
        check_head_for_classes(est.head_threshold, est.class_weight, classes)
        # Under torchrun: rank 0's seed (random_state=None draws one per process), one collection.
        seed = est.seed_ = agree_across_ranks(seed_from(est.random_state), bags, y_enc)
        fits, standardizer = [], None  # fitted by the first member's pass, shared by the others
        for j in range(k):  # member j is seeded seed + j, as fit seeds it
            fit = train_streaming(
                bags, y_enc, mconf, tconf, seed=derived_seed(seed + j), n_classes=len(classes),
                standardization=est.standardization,
                standardizer=standardizer, chunk_size=int(est.chunk_size), dtype=dtype,
                device=resolve_device(est.device), autocast=est.autocast, progress=est.verbose,
            )
            diverged = [h["epoch"] for h in fit.history if not np.isfinite(h.get("total", 0.0))]
            if diverged or not all(bool(torch.isfinite(p).all()) for p in fit.model.parameters()):
                where = f"at epoch {diverged[0]}" if diverged else "in its last steps"
                raise ValueError(f"training diverged {where}: the loss became NaN or infinite; lower the learning "
                                 "rates (--lr-prototypes, --lr-classifier), or rescale very large features "
                                 "(the streamed fit does not check their range first).")
            fits.append(fit)
            standardizer = fit.standardizer
        est.classes_, est.n_features_in_, est.standardizer_ = classes, fits[0].model.n_features, standardizer
        if names:
            est.feature_names_in_ = np.asarray(names, dtype=object)
        est.models_ = [f.model.float().eval() for f in fits]
        est.histories_ = [f.history for f in fits]
        est.model_, est.history_ = est.models_[0], est.histories_[0]
        if est.push or est.head == "logistic":
            source = StreamedInstances(bags, standardizer, int(est.chunk_size))
            with HeadWorkers(1) as workers:
                _refit_after_training(est, source, y_enc, classes, [derived_seed(seed + j) for j in range(k)],
                                      workers)()
