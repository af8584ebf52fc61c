"""The neural baselines' training, compiled (numba): one loop per model, models in parallel (CPU).

Why this exists: with one bag per step (the papers' setting) a step of these networks
is a handful of small matrix products - a bag of five instances through a 256-128-64
network - and an optimiser update of every parameter. Written as stacked tensor operations
(the tensor path of :func:`minitorch_proto.baselines.batched_fit.fit_many`), every step pads
each model's bag to a common length, pays about a hundred framework calls and streams all
models' parameters, gradients and optimiser state through main memory. Here one compiled
loop runs a model's whole epoch: its bags unpadded, the backward pass written out by hand and
the optimiser update in one pass while the model's parameters are still in the core's cache.
Models are independent, so they run in parallel over cores, and a model comes out the same,
bit for bit, whatever other models or how many threads share the run.

Two details make the loops fast and are easy to lose in an edit (``_kernels.py``): the
products of small bags (up to ``SMALL_BAG`` instances) run in blocked loops that reuse every
loaded row four times (BLAS is 1.5-3x slower on such thin matrices; larger bags go to BLAS),
and every element-wise loop runs over a whole slice, ``range(len)``, without a branch inside:
with bounds read from an array the compiler does not vectorise it (the SGD step was 7x slower).

The arithmetic is that of the torch modules (``attention.py``, ``minet.py``) and of
``torch.optim``'s SGD (momentum, Nesterov, per-group L2) and Adam; each step's learning
rate comes from the estimator's own scheduler. ``tests/test_baselines_batched.py`` checks
that every baseline trained here ends with the parameters of ``fit`` (float64, 1e-10). One
harmless difference from the stacked path: when instances tie for a bag's maximum the first
takes the whole gradient (as autograd's ``max(dim)`` does in ``fit``); ``amax`` splits it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..training.compiled import AVAILABLE, threads
from ._kernels import _ADAM, _HEADS, _POOLS, _SGD, _epoch_all
from ._torch import POOL_FUNCTIONS, GeneratorDropout, TorchMILClassifier
from .attention import _AttentionNet
from .minet import _MINetNet, _miNetNet

if AVAILABLE:
    import numba

__all__ = ["AVAILABLE", "supports", "train_models"]


# -------------------------------------------------------------------- the driver
def _spec(net: nn.Module, est: TorchMILClassifier, n_steps: int):
    """Kernel description of ``net`` and its optimiser, or None when the kernels do not cover it."""
    embed = list(net.embed)
    linears = [m for m in embed if isinstance(m, nn.Linear)]
    drops = [i for i, m in enumerate(embed) if isinstance(m, GeneratorDropout) and m.p > 0]
    if not linears or any(not isinstance(m, (nn.Linear, nn.ReLU, GeneratorDropout)) for m in embed):
        return None
    if drops and drops != [len(embed) - 1]:  # dropout between hidden layers is not written out here
        return None
    offsets, at = {}, 0
    for name, p in net.named_parameters():
        offsets[name] = at
        at += p.numel()
    woff = np.array([offsets[f"embed.{embed.index(m)}.weight"] for m in linears], dtype=np.int64)
    boff = np.array([offsets[f"embed.{embed.index(m)}.bias"] for m in linears], dtype=np.int64)
    dims = np.array([linears[0].in_features] + [m.out_features for m in linears], dtype=np.int64)
    hoff = np.full(8, -1, dtype=np.int64)
    d, pool = 0, 0
    if isinstance(net, _AttentionNet):
        head = _HEADS["gated" if net.att_u is not None else "attention"]
        d = net.att_v.out_features
        names = ["att_v.weight", "att_v.bias", "att_u.weight", "att_u.bias", "att_w.weight", "att_w.bias",
                 "classifier.weight", "classifier.bias"]
    elif isinstance(net, (_MINetNet, _miNetNet)):
        if isinstance(net, _MINetNet):
            head = _HEADS["MI-Net"]
            pool_name = {fn: name for name, fn in POOL_FUNCTIONS.items()}[net.pool]
            last = "classifier"
        else:
            head, pool_name, last = _HEADS["mi-Net"], net.pooling, "scorer"
        pool = _POOLS[pool_name]
        names = [None] * 6 + [f"{last}.weight", f"{last}.bias"]
    else:
        return None
    for q, name in enumerate(names):
        if name is not None and name in offsets:
            hoff[q] = offsets[name]
    opt, sched = est._make_optimizer(net)
    seg = np.array([[offsets[n], offsets[n] + p.numel()] for n, p in net.named_parameters()], dtype=np.int64)
    seg_wd = np.zeros(len(seg))
    index = {id(p): k for k, (_, p) in enumerate(net.named_parameters())}
    lrs = {g["lr"] for g in opt.param_groups}
    if len(lrs) != 1 or any(g.get("maximize") for g in opt.param_groups):
        return None
    for group in opt.param_groups:
        for p in group["params"]:
            seg_wd[index[id(p)]] = float(group["weight_decay"])
    g0 = opt.param_groups[0]
    if type(opt) is torch.optim.SGD and not g0["dampening"]:
        kind, hp = _SGD, [g0["momentum"], float(g0["nesterov"]), 0.0, 0.0, 0.0, 0.0]
    elif type(opt) is torch.optim.Adam and not g0["amsgrad"] and not g0.get("decoupled_weight_decay", False):
        beta1, beta2 = g0["betas"]
        kind, hp = _ADAM, [0.0, 0.0, 1.0 - beta1, beta2, 1.0 - beta2, g0["eps"]]
    else:
        return None
    if sched is None:
        lr = np.full(n_steps, float(g0["lr"]))
    elif isinstance(sched, torch.optim.lr_scheduler.LambdaLR) and len(sched.lr_lambdas) == len(opt.param_groups):
        # what LambdaLR.get_lr computes before step t
        base, lam = sched.base_lrs[0], sched.lr_lambdas[0]
        lr = np.array([base * lam(t) for t in range(n_steps)], dtype=np.float64)
    else:
        return None
    # Per step: SGD's learning rate; Adam's step size and bias correction, computed in double
    # as torch.optim does in Python, then used in the parameters' dtype.
    step = np.arange(1, n_steps + 1, dtype=np.float64)
    if kind == _ADAM:
        lr_table = np.stack([lr, lr / (1.0 - beta1 ** step), np.sqrt(1.0 - beta2 ** step)])
    else:
        lr_table = np.stack([lr, lr, lr])
    keep = 1.0 - embed[drops[0]].p if drops else 1.0
    return dict(dims=dims, woff=woff, boff=boff, head=head, pool=pool, hoff=hoff, d=int(d), opt=kind,
                hp=np.array(hp + [keep], dtype=np.float64), seg=seg, seg_wd=seg_wd, lrs=lr_table)


def supports(estimator: TorchMILClassifier, n_features: int = 3) -> bool:
    """True when the compiled kernels can train ``estimator``'s network and optimiser (CPU, one bag per step)."""
    if not AVAILABLE or not isinstance(estimator, TorchMILClassifier) or int(estimator.batch_size) != 1:
        return False
    with torch.random.fork_rng(devices=[]):
        net = estimator._build_network(n_features)
    return _spec(net, estimator, 1) is not None


def train_models(ests: Sequence[TorchMILClassifier], data, n_threads: int | None = None) -> None:
    """Fit ``ests`` (one setting, validated) on ``data`` = [(bags, encoded y)] in place, as ``fit`` would.

    Each estimator gets ``network_``, ``device_`` (the CPU) and ``loss_curve_``. ``n_threads``
    models train at once (None: every core). Raises ValueError when :func:`supports` is False.
    """
    device = torch.device("cpu")
    dtype = ests[0]._torch_dtype()
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    setups = [est._setup_training(device) for est in ests]
    nets = [s[0] for s in setups]
    n_bags = np.array([len(bags) for bags, _ in data], dtype=np.int64)
    n_epochs = int(ests[0].n_epochs)
    spec = _spec(nets[0], ests[0], int(n_bags.max()) * n_epochs)
    if spec is None or int(ests[0].batch_size) != 1:
        raise ValueError(f"the compiled trainer does not cover {type(ests[0]).__name__} with these settings.")
    M = len(ests)
    theta = np.stack([torch.cat([p.detach().reshape(-1) for p in net.parameters()]).numpy() for net in nets])
    theta = np.ascontiguousarray(theta, dtype=np_dtype)
    s1, s2 = np.zeros_like(theta), np.zeros_like(theta)
    # the optimiser's scalars in the parameters' dtype, as torch applies them
    seg_wd, lrs, hp = (spec[k].astype(np_dtype) for k in ("seg_wd", "lrs", "hp"))
    sizes_of = [np.array([b.shape[0] for b in bags], dtype=np.int64) for bags, _ in data]
    firsts, row = [], 0
    for s in sizes_of:
        firsts.append(row + np.concatenate([[0], np.cumsum(s)[:-1]]).astype(np.int64))
        row += int(s.sum())
    X = np.ascontiguousarray(np.concatenate([b for bags, _ in data for b in bags], axis=0), dtype=np_dtype)
    kmax = np.array([int(s.max()) for s in sizes_of], dtype=np.int64)
    epoch_rows = np.array([int(s.sum()) for s in sizes_of], dtype=np.int64)
    width = int(spec["dims"][-1])
    keep = float(spec["hp"][-1])
    B = int(n_bags.max())
    curves = np.zeros((M, n_epochs))
    epochs = range(n_epochs)
    if ests[0].verbose:
        from tqdm.auto import tqdm

        epochs = tqdm(epochs, desc=type(ests[0]).__name__, leave=False)
    from threadpoolctl import threadpool_limits

    previous = numba.set_parallel_chunksize(1)
    try:
        # one model per thread, each with single-threaded BLAS
        with threads(n_threads), threadpool_limits(1):
            for epoch in epochs:
                rows = np.zeros((M, B), dtype=np.int64)
                sizes = np.ones((M, B), dtype=np.int64)
                ys = np.zeros((M, B), dtype=np.float64)
                for m, ((_, y_enc), (_, rng, _)) in enumerate(zip(data, setups)):
                    order = rng.permutation(n_bags[m])  # the same draw as fit's, epoch by epoch
                    rows[m, : n_bags[m]] = firsts[m][order]
                    sizes[m, : n_bags[m]] = sizes_of[m][order]
                    ys[m, : n_bags[m]] = np.asarray(y_enc, dtype=np.float64)[order]
                if keep < 1.0:
                    # a whole epoch of masks in visiting order: the numbers of fit's per-bag draws
                    blocks = [torch.empty((int(epoch_rows[m]), width), dtype=dtype)
                              .bernoulli_(keep, generator=setups[m][2]).numpy() for m in range(M)]
                    mask = np.ascontiguousarray(np.concatenate(blocks, axis=0))
                    mrow = np.concatenate([[0], np.cumsum(epoch_rows)[:-1]]).astype(np.int64)
                else:
                    mask, mrow = np.zeros((1, width), dtype=np_dtype), np.zeros(M, dtype=np.int64)
                losses = np.zeros(M)
                _epoch_all(theta, s1, s2, spec["seg"], seg_wd, lrs, epoch * n_bags, X, rows, sizes, ys, n_bags, mask, mrow,
                           kmax, spec["dims"], spec["woff"], spec["boff"], spec["head"], spec["pool"], spec["hoff"],
                           spec["d"], spec["opt"], hp, losses)
                curves[:, epoch] = losses / n_bags
    finally:
        numba.set_parallel_chunksize(previous)
    for m, (est, net) in enumerate(zip(ests, nets)):
        at = 0
        with torch.no_grad():
            for p in net.parameters():
                p.copy_(torch.from_numpy(theta[m, at: at + p.numel()].reshape(tuple(p.shape))))
                at += p.numel()
        net.eval()
        est.loss_curve_ = curves[m].tolist()
        est.network_ = net
        est.device_ = device
