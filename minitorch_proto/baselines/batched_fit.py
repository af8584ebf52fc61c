"""Train many copies of one neural MIL baseline at once (all folds and seeds together).

:func:`fit_many` takes one estimator (the settings) and a list of training sets with a
``random_state`` each - typically the training bags of every cross-validation fold, or of
every (fold, seed) pair of a seed ensemble - and returns one fitted estimator per set,
the same objects :meth:`fit` would give, with the same parameters up to rounding: every
model is built, initialised and fed by the estimator's own set-up code
(``TorchMILClassifier._setup_training``), so it starts from the same weights, visits its
own bags in the same order and draws the same dropout masks as when trained alone.

How the copies advance together
-------------------------------
Each model's parameters are one slice of a stacked tensor (models x ...). At step ``t``
model ``m`` takes one optimisation step on the ``t``-th bag of its own sequence (its
per-epoch permutations, one after another). The bags of a step are padded to a common
length and pushed through batched matrix products (``torch.baddbmm``); a boolean mask
keeps padded rows out of the pooling, so they get no gradient. Every step has one run over
all models, padded to a length chosen by :func:`plan_step`, in which each model reads its
parameter slice in place; where bag sizes differ a lot (Musk1: 2 to 40 instances, Musk2: 1
to 1,044), the models with longer bags also go to one or two overflow runs with gathered
parameter slices, and their outputs in the shared run get weight 0. The per-model losses
are summed, so each slice receives exactly its own model's gradient. Dropout masks are drawn
from each model's own generator, a whole epoch of rows at once on the CPU (the same numbers
as the per-bag draws of ``fit``).
The optimiser is the estimator's own (``torch.optim`` Adam or SGD with Nesterov momentum
and the learning-rate schedule), applied to the stacked tensors: all three are
element-wise, so a slice evolves exactly as the single model's parameters would. Models
with fewer steps (folds with fewer training bags) keep training on a repeated bag after
their last step, but their parameters are copied out at that step and the later,
meaningless updates touch only their own slice.

Only ``batch_size=1`` (the papers' setting and the default) is batched; other settings
fall back to fitting the models one after another.

Two backends
------------
``"tensor"`` is the stacked program above (CPU or CUDA). ``"compiled"``
(:mod:`minitorch_proto.baselines.compiled_fit`, numba, CPU only) runs each model's epoch as one
compiled loop, models in parallel over ``n_jobs`` threads, with the same initial weights, bag
orders and dropout masks; on the CPU it is several times faster, because nothing is padded
and each model's parameters stay in cache. ``"auto"`` (the default) takes the compiled
backend on the CPU and the tensor backend elsewhere.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from sklearn.base import clone
from torch import nn

from ..utils import resolve_device, torch_threads
from . import compiled_fit
from ._torch import POOL_FUNCTIONS, GeneratorDropout, TorchMILClassifier
from .attention import _AttentionNet
from .minet import _EPS, _MINetNet, _miNetNet

__all__ = ["fit_many", "is_batchable", "plan_step"]


def is_batchable(estimator) -> bool:
    """True when :func:`fit_many` trains copies of ``estimator`` together (not one by one)."""
    return isinstance(estimator, TorchMILClassifier) and int(getattr(estimator, "batch_size", 1)) == 1


# ------------------------------------------------------ which models share a padded run
def plan_step(sizes: np.ndarray, model_cost: float, group_cost: float) -> tuple[int, list[np.ndarray]]:
    """Padded length of the run over all models, and the models that need a run of their own.

    Every model takes part in one run padded to ``k`` rows, reading its own parameter slice
    in place. A model whose bag is longer than ``k`` also joins one of at most two overflow
    runs (its own bag, whole), whose parameters are gathered, and its output in the first run
    is given weight 0. The choice minimises ``n_models * k`` plus, per overflow run,
    ``members * (model_cost + its longest bag) + group_cost`` - all in padded-row units.

    Parameters
    ----------
    sizes : (n_models,) int
        Bag size of each model at this step.
    model_cost : float
        Cost of one model in an overflow run besides its rows (reading its parameters a second
        time, gathering them and adding the gradients back), in padded rows.
    group_cost : float
        Fixed cost of one more run (its Python and dispatch overhead), in padded rows.

    Returns
    -------
    k : int
        Rows of the run over all models.
    groups : list of index arrays
        The overflow runs (empty when ``k == sizes.max()``).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    m = len(sizes)
    order = np.argsort(sizes, kind="stable")
    s = sizes[order].astype(np.float64)
    # j models fit in the shared run (its length s[j-1]); overflow groups are order[j:c], order[c:].
    j = np.arange(1, m + 1)[:, None]
    c = np.arange(1, m + 1)[None, :]
    cost = (m * s[j - 1] + (c - j) * (model_cost + s[c - 1]) + group_cost * (c > j)
            + (m - c) * (model_cost + s[-1]) + group_cost * (c < m))
    cost = np.where(c >= j, cost, np.inf)
    if cost[-1, -1] <= cost.min():
        return int(s[-1]), []
    jj, cc = np.unravel_index(int(np.argmin(cost)), cost.shape)
    jj, cc = jj + 1, cc + 1
    groups = [order[jj:cc], order[cc:]]
    return int(s[jj - 1]), [g for g in groups if len(g)]


# ------------------------------------------------------------------ batched forwards
def _linear(params: Mapping[str, torch.Tensor], name: str, x: torch.Tensor) -> torch.Tensor:
    # Weights are stacked transposed, (G, in, out): the gradient of a transposed view would be
    # non-contiguous and copied on every step by autograd's accumulation.
    w, b = params[f"{name}.weight"], params.get(f"{name}.bias")
    if b is None:  # pragma: no cover - every layer here has a bias
        return torch.bmm(x, w)
    return torch.baddbmm(b.unsqueeze(1), x, w)


def _mlp(template: nn.Sequential, prefix: str, params, x, drop: torch.Tensor | None) -> torch.Tensor:
    for i, layer in enumerate(template):
        if isinstance(layer, nn.Linear):
            x = _linear(params, f"{prefix}.{i}", x)
        elif isinstance(layer, nn.ReLU):
            x = torch.relu(x)
        elif isinstance(layer, GeneratorDropout):
            if drop is not None:
                x = x * drop / (1.0 - layer.p)
        else:  # pragma: no cover - make_mlp builds only these
            raise TypeError(f"unexpected layer {type(layer).__name__}")
    return x


def _masked_max(v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return v.masked_fill(~mask.unsqueeze(-1), -torch.inf).amax(dim=1)


def _masked_mean(v: torch.Tensor, mask: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    return (v * mask.unsqueeze(-1).to(v.dtype)).sum(dim=1) / counts.unsqueeze(-1)


def _masked_lse(v: torch.Tensor, mask: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    m = _masked_max(v.detach(), mask)
    e = torch.exp((v - m.unsqueeze(1)).masked_fill(~mask.unsqueeze(-1), -torch.inf))
    return m + torch.log(e.sum(dim=1) / counts.unsqueeze(-1))


def _pool(name: str, v, mask, counts):
    if name == "max":
        return _masked_max(v, mask)
    if name == "mean":
        return _masked_mean(v, mask, counts)
    return _masked_lse(v, mask, counts)


def batched_logits(template: nn.Module, params, x, mask, drop) -> torch.Tensor:
    """Bag logits of a group of models: ``x`` (G, K, F) padded bags, ``mask`` (G, K) real rows.

    ``params`` maps the template's parameter names to stacked (G, ...) tensors, weight matrices
    transposed to (G, in, out); ``drop`` is
    the (G, K, H) dropout mask of the embedding's last layer, or None (no dropout).
    """
    counts = mask.sum(dim=1).to(x.dtype)
    h = _mlp(template.embed, "embed", params, x, drop)
    if isinstance(template, _AttentionNet):
        a = torch.tanh(_linear(params, "att_v", h))
        if template.att_u is not None:
            a = a * torch.sigmoid(_linear(params, "att_u", h))
        scores = _linear(params, "att_w", a).squeeze(-1).masked_fill(~mask, -torch.inf)
        weights = torch.softmax(scores, dim=1)
        z = torch.bmm(weights.unsqueeze(1), h).squeeze(1)
        return _linear(params, "classifier", z.unsqueeze(1)).reshape(-1)
    if isinstance(template, _MINetNet):
        name = {v: k for k, v in POOL_FUNCTIONS.items()}[template.pool]
        z = _pool(name, h, mask, counts)
        return _linear(params, "classifier", z.unsqueeze(1)).reshape(-1)
    if isinstance(template, _miNetNet):
        s = _linear(params, "scorer", h)  # (G, K, 1)
        if template.pooling == "max":
            return _masked_max(s, mask).reshape(-1)
        p = _pool(template.pooling, torch.sigmoid(s), mask, counts).reshape(-1)
        return torch.logit(p.clamp(_EPS, 1 - _EPS))
    raise TypeError(f"no batched forward for {type(template).__name__}")


# --------------------------------------------------------------------- the trainer
_VARYING = {"random_state", "verbose"}


def _check_same_settings(estimators: Sequence[TorchMILClassifier]) -> None:
    first = {k: v for k, v in estimators[0].get_params(deep=False).items() if k not in _VARYING}
    for est in estimators[1:]:
        other = {k: v for k, v in est.get_params(deep=False).items() if k not in _VARYING}
        diff = sorted(k for k in first if repr(first[k]) != repr(other.get(k)))
        if type(est) is not type(estimators[0]) or diff:
            raise ValueError(
                "fit_many trains copies of one setting together; these differ in "
                f"{diff or 'class'}. Call it once per setting."
            )


def fit_many(
    estimator: TorchMILClassifier,
    train_sets: Sequence[tuple[Sequence[np.ndarray], np.ndarray]],
    random_states: Sequence[int],
    *,
    params: Sequence[Mapping[str, Any]] | None = None,
    models_per_batch: int | None = None,
    n_threads: int | None = None,
    n_jobs: int = 1,
    backend: str = "auto",
    group_cost: float = 64.0,
    model_cost: float = 48.0,
) -> list[TorchMILClassifier]:
    """Fit one clone of ``estimator`` per training set, training them together.

    Parameters
    ----------
    estimator : AttentionMIL, GatedAttentionMIL, MINet or miNet (unfitted; the settings)
    train_sets : list of (bags, y)
        Each model's own training bags (already standardised as the caller wants) and labels.
    random_states : list of int
        Each model's ``random_state`` (what ``clone(estimator).set_params(random_state=s).fit``
        would use).
    params : list of dict, optional
        Per-model settings applied with ``set_params`` before fitting (e.g. a tuning grid
        point). Models whose settings differ are trained in separate batched programs.
    models_per_batch : int, optional
        Most models advanced together (default: all of one setting); memory grows with it.
    n_threads : int, optional
        torch CPU threads of the tensor backend (default: the estimator's ``n_threads``).
    n_jobs : int
        Parallel workers: threads of the compiled backend (models train in parallel), and
        processes for estimators that are fitted one by one (MILES, mi-SVM, ...; joblib).
        The tensor backend ignores it.
    backend : {"auto", "compiled", "tensor"}
        How neural baselines train together (module docstring). ``"auto"``: compiled on the
        CPU when it covers the settings, tensor otherwise.
    group_cost, model_cost : float
        Cost model of :func:`plan_step` (tensor backend), in padded-row units.

    Returns
    -------
    list of fitted estimators, in the order of ``train_sets``; each also has
    ``fit_seconds_`` (its share of the wall time of its batched program).
    """
    if len(train_sets) != len(random_states):
        raise ValueError(
            f"train_sets and random_states differ in length ({len(train_sets)} vs {len(random_states)})."
        )
    if params is not None and len(params) != len(train_sets):
        raise ValueError(f"params has {len(params)} entries for {len(train_sets)} training sets.")
    if int(n_jobs) < 1:
        raise ValueError(f"n_jobs must be >= 1, got {n_jobs}.")
    if models_per_batch is not None and int(models_per_batch) < 1:
        raise ValueError(f"models_per_batch must be >= 1, got {models_per_batch}.")
    if backend not in ("auto", "compiled", "tensor"):
        raise ValueError(f"backend must be 'auto', 'compiled' or 'tensor', got {backend!r}.")
    ests = []
    for k, rs in enumerate(random_states):
        est = clone(estimator).set_params(random_state=int(rs), **(dict(params[k]) if params is not None else {}))
        ests.append(est)
    # One batched program per distinct setting.
    keys = [repr(sorted((k, repr(v)) for k, v in e.get_params(deep=False).items() if k not in _VARYING))
            for e in ests]
    by_key: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        by_key.setdefault(key, []).append(i)
    # Batched programs run one after another: two in parallel processes were measured slower
    # than one on the two-core machine (memory-bound steps, plus shipping the bags to workers).
    for members in by_key.values():
        size = int(models_per_batch or len(members))
        for start in range(0, len(members), size):
            chunk = members[start : start + size]
            done = _fit_group([ests[i] for i in chunk], [train_sets[i] for i in chunk], n_threads, n_jobs,
                              backend, group_cost, model_cost)
            for i, est in zip(chunk, done):
                ests[i] = est
    return ests


def _fit_one(est, bags, y):
    t1 = time.perf_counter()
    est.fit(bags, y)
    est.fit_seconds_ = time.perf_counter() - t1
    return est


def _fit_group(ests, train_sets, n_threads, n_jobs, backend, group_cost, model_cost) -> list:
    t0 = time.perf_counter()
    if not is_batchable(ests[0]) or len(ests) == 1:
        if int(n_jobs) == 1 or len(ests) == 1:
            return [_fit_one(est, bags, y) for est, (bags, y) in zip(ests, train_sets)]
        from joblib import Parallel, delayed

        return Parallel(n_jobs=int(n_jobs))(delayed(_fit_one)(est, bags, y) for est, (bags, y) in zip(ests, train_sets))
    _check_same_settings(ests)
    if backend == "compiled" and not compiled_fit.supports(ests[0]):
        raise ValueError(f"backend='compiled' does not cover {type(ests[0]).__name__} with these settings "
                         "(numba missing, batch_size > 1 or an unsupported network); use backend='tensor'.")
    data = []
    for est, (bags, y) in zip(ests, train_sets):
        bags, y_enc = est._validate_fit_data(bags, y)
        est._check_common_params()
        data.append((bags, y_enc))
    device = resolve_device(ests[0].device)
    if backend == "compiled" and device.type != "cpu":
        raise ValueError(f"backend='compiled' trains on the CPU; the estimator asks for {device}.")
    if device.type == "cpu" and backend != "tensor" and compiled_fit.supports(ests[0]):
        compiled_fit.train_models(ests, data, n_threads=int(n_jobs))
    else:
        threads = n_threads if n_threads is not None else ests[0].n_threads
        with torch_threads(threads if device.type == "cpu" else None):
            _train_stacked(ests, data, device, group_cost, model_cost)
    per_model = (time.perf_counter() - t0) / len(ests)
    for est in ests:
        est.fit_seconds_ = per_model
    return ests


def _train_stacked(ests, data, device, group_cost, model_cost) -> None:
    n_models = len(ests)
    dtype = ests[0]._torch_dtype()
    nets, rngs, gens = [], [], []
    for est in ests:
        net, rng, gen = est._setup_training(device)
        nets.append(net)
        rngs.append(rng)
        gens.append(gen)
    template = nets[0]
    # The stacked parameters live in a module with the template's parameter names, so the
    # estimator's own optimiser factory (weight-decay groups by name) applies unchanged.
    holder = nn.Module()
    for n, _ in template.named_parameters():
        value = torch.stack([_stored(n, dict(net.named_parameters())[n].detach()) for net in nets])
        _set_nested(holder, n, nn.Parameter(value))
    stacked = dict(holder.named_parameters())
    # One fused kernel per tensor: the stacked tensors are large, and the per-element loop
    # of the default implementation made the optimiser as slow as the forward pass.
    optimizer, scheduler = ests[0]._make_optimizer(holder, fused=True)
    drop_layers = [m for m in template.modules() if isinstance(m, GeneratorDropout) and m.p > 0]
    keep = 1.0 - drop_layers[0].p if drop_layers else 1.0
    drop_width = [m for m in template.embed if isinstance(m, nn.Linear)][-1].out_features

    # Flat storage: every model's bags, one after another.
    n_epochs = int(ests[0].n_epochs)
    starts, sizes, seqs, targets = [], [], [], []
    chunks, row = [], 0
    for (bags, y_enc), rng in zip(data, rngs):
        s = np.array([b.shape[0] for b in bags], dtype=np.int64)
        starts.append(row + np.concatenate([[0], np.cumsum(s)[:-1]]))
        row += int(s.sum())
        sizes.append(s)
        chunks.extend(bags)
        # the same permutations, drawn in the same order, as the single-model loop
        seqs.append(np.concatenate([rng.permutation(len(bags)) for _ in range(n_epochs)]))
        targets.append(np.asarray(y_enc, dtype=np.float64))
    x_all = torch.as_tensor(np.concatenate(chunks, axis=0), dtype=dtype).to(device)
    n_bags = np.array([len(s) for s in sizes])
    n_steps = n_bags * n_epochs
    total = int(n_steps.max())
    # After its last step a model repeats its last bag (those updates are discarded).
    seq_mat = np.stack([np.concatenate([q, np.full(total - len(q), q[-1])]) for q in seqs])
    bag_rows = np.stack([starts[m][seq_mat[m]] for m in range(n_models)])  # (M, T)
    bag_sizes = np.stack([sizes[m][seq_mat[m]] for m in range(n_models)])
    y_all = torch.as_tensor(np.stack([targets[m][seq_mat[m]] for m in range(n_models)]).T.copy(),
                            dtype=dtype, device=device)  # (T, M)
    # Dropout masks: one block of rows per model holding the masks of its current epoch, in
    # visiting order. On the CPU, bernoulli_ draws element by element from the generator, so
    # one draw of a whole epoch's rows gives exactly the masks of the per-bag draws of fit
    # (tests/test_baselines_batched.py checks it); elsewhere the rows are drawn step by step.
    epoch_rows = np.array([int(s.sum()) for s in sizes])
    base = np.concatenate([[0], np.cumsum(epoch_rows)[:-1]])
    drop_rows = np.zeros((n_models, total), dtype=np.int64)
    for m in range(n_models):
        within = bag_sizes[m, : n_steps[m]].reshape(n_epochs, n_bags[m])
        offsets = np.cumsum(within, axis=1) - within
        drop_rows[m, : n_steps[m]] = base[m] + offsets.reshape(-1)
        drop_rows[m, n_steps[m]:] = base[m]
    masks = torch.zeros((int(epoch_rows.sum()), drop_width), dtype=dtype, device=device) if drop_layers else None
    per_epoch = device.type == "cpu"
    finals: list[dict[str, torch.Tensor] | None] = [None] * n_models
    losses = torch.zeros((total, n_models), dtype=dtype, device=device)
    loss_fn = nn.BCEWithLogitsLoss(reduction="none")

    for t in range(total):
        sz = bag_sizes[:, t]
        if masks is not None:
            for m in np.flatnonzero((n_steps > t) & ((t % n_bags == 0) if per_epoch else True)):
                first, count = (base[m], epoch_rows[m]) if per_epoch else (drop_rows[m, t], sz[m])
                masks[first : first + count].bernoulli_(keep, generator=gens[m])
        k, groups = plan_step(sz, model_cost, group_cost)
        runs = [(slice(None), k)] + [(g, int(sz[g].max())) for g in groups]
        loss, leaves = 0.0, []
        for members, k_run in runs:
            s_run = sz[members]
            # rows past a bag's end repeat its last row: finite, masked out of the pooling
            rows = np.minimum(np.arange(k_run)[None, :], s_run[:, None] - 1)
            x = x_all[torch.from_numpy(bag_rows[members, t][:, None] + rows)]
            mask = torch.from_numpy(np.arange(k_run)[None, :] < s_run[:, None])
            drop = None if masks is None else masks[torch.from_numpy(drop_rows[members, t][:, None] + rows)]
            if isinstance(members, slice):
                out = loss_fn(batched_logits(template, stacked, x, mask, drop), y_all[t])
                losses[t] = out.detach()
                # a model that overflows this run counts only in its own run
                if groups:
                    weight = torch.ones(n_models, dtype=dtype, device=device)
                    weight[torch.from_numpy(np.concatenate(groups)).to(device)] = 0.0
                    out = out * weight
                loss = loss + out.sum()
            else:
                # Gathered copies as leaves: their gradients are added into the stacked ones
                # below, instead of autograd scattering each into a zero tensor of full size.
                gi = torch.from_numpy(members).to(device)
                p = {n: v.detach().index_select(0, gi).requires_grad_() for n, v in stacked.items()}
                out = loss_fn(batched_logits(template, p, x, mask, drop), y_all[t, gi])
                losses[t, gi] = out.detach()
                loss = loss + out.sum()
                leaves.append((gi, p))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        for gi, p in leaves:
            for n, v in stacked.items():
                v.grad.index_add_(0, gi, p[n].grad)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        for m in np.flatnonzero(n_steps == t + 1):
            finals[m] = {n: v.detach()[m].clone() for n, v in stacked.items()}

    losses = losses.cpu().numpy().T
    for m, (est, net) in enumerate(zip(ests, nets)):
        with torch.no_grad():
            for n, v in net.named_parameters():
                v.copy_(_stored(n, finals[m][n]))
        net.eval()
        est.loss_curve_ = losses[m, : n_steps[m]].reshape(n_epochs, n_bags[m]).mean(axis=1).tolist()
        est.network_ = net
        est.device_ = device


def _stored(name: str, value: torch.Tensor) -> torch.Tensor:
    """A linear layer's weight in the stacked layout (transposed, contiguous); other tensors as they are."""
    return value.t().contiguous() if name.endswith("weight") and value.dim() == 2 else value


def _set_nested(root: nn.Module, dotted: str, value: nn.Parameter) -> None:
    *path, leaf = dotted.split(".")
    mod = root
    for part in path:
        if not hasattr(mod, part):
            mod.add_module(part, nn.Module())
        mod = getattr(mod, part)
    mod.register_parameter(leaf, value)
