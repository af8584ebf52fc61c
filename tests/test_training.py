"""Trainers: the batched trainer equals the sequential one; the published loop's switches; determinism."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from minitorch_proto.training import compiled, train_batched
from minitorch_proto.training.setup import size_groups
from minitorch_proto.model import PrototypeMIL, PrototypeMILConfig, compat_config, monotone_config
from minitorch_proto.preprocessing import BagStandardizer
from minitorch_proto.training import TrainConfig, compat_train_config, epoch_batches, train_model

from .conftest import make_concept_bags


def _sequential(bags, y, train, seed, mconf, tconf, std):
    st = BagStandardizer(std).fit([bags[i] for i in train])
    tb = [torch.as_tensor(st.transform_instances(bags[i])) for i in train]
    init = np.concatenate([st.transform_instances(bags[i]) for i in train]) if mconf.init != "normal" else None
    model = PrototypeMIL(bags[0].shape[1], 2, mconf, generator=torch.Generator().manual_seed(seed),
                         init_instances=init).double()
    history = train_model(model, tb, torch.as_tensor(y[train]), tconf, seed=seed)
    return model, history


CASES = {
    "paper default (sparse min backward)": (PrototypeMILConfig(n_prototypes=3),
                                            TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=2e-2), "feature"),
    "paper": (PrototypeMILConfig(n_prototypes=3, pooling=("min", "mean")),
              TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=2e-2), "feature"),
    "minibatch+kmeans": (PrototypeMILConfig(n_prototypes=3, init="kmeans++", distance="manhattan"),
                         TrainConfig(epochs=2, lr_prototypes=1e-2, lr_classifier=1e-2, batch_size=4), "feature"),
    "published code": (compat_config(PrototypeMILConfig(n_prototypes=3)),
                       compat_train_config(TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=1e-2,
                                                       batch_size=2), lr_halving_every=2), "instance"),
    "cosine, max+mean, l2, no layer norm": (
        PrototypeMILConfig(n_prototypes=3, distance="cosine", pooling=("max", "mean"), weight_penalty="l2",
                           layer_norm=False),
        TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=2e-2), "none"),
    # The recommended model's training: the cosine mean-pooling gradient takes the compiled kernel's
    # shortcut through the bag's sum of unit instances.
    "cosine, min+mean+max, k-means++, minibatch": (
        PrototypeMILConfig(n_prototypes=6, distance="cosine", pooling=("min", "mean", "max"), init="kmeans++",
                           lambda_p=0.0, lambda_d=1e-2),
        TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=2e-2, batch_size=4), "feature"),
    "sqeuclidean, mean only (extra min block penalised), no bias": (
        PrototypeMILConfig(n_prototypes=4, distance="sqeuclidean", pooling=("mean",), bias=False),
        TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=2e-2), "feature"),
    "monotone variant (weights projected onto <= 0), minibatch": (
        monotone_config(PrototypeMILConfig(n_prototypes=3)),
        TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=5e-2, batch_size=2), "feature"),
}
BACKENDS = ["tensor", "compiled"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_batched_equals_sequential(case, backend):
    mconf, tconf, std = CASES[case]
    # Very different bag sizes (1..60) so several size groups form in each tick.
    bags, y = make_concept_bags(n_bags=30, n_features=5, seed=3, min_size=1, max_size=60)
    train_sets = [np.arange(0, 20), np.arange(4, 30), np.arange(9, 26)]  # unequal sizes: idle ticks
    seeds = [11, 12, 13]
    fit = train_batched(bags, y, train_sets, seeds, mconf, tconf, standardization=std,
                        dtype=torch.float64, device="cpu", eval_sets=[np.arange(30)] * 3, backend=backend)
    for m in range(3):
        model, history = _sequential(bags, y, train_sets[m], seeds[m], mconf, tconf, std)
        torch.testing.assert_close(fit.prototypes[m], model.prototypes.detach(), rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(fit.weight[m], model.weight.detach(), rtol=1e-9, atol=1e-9)
        for k in ("cross_entropy", "distance_penalty", "total"):
            assert fit.history[m][-1][k] == pytest.approx(history[-1][k], rel=1e-8)
        st = BagStandardizer(std).fit([bags[i] for i in train_sets[m]])
        from minitorch_proto.bags import BagBatch

        proba = model.predict_proba_batch(BagBatch.from_bags(st.transform(bags), dtype=torch.float64)).numpy()
        np.testing.assert_allclose(fit.evaluations[tconf.epochs][m], proba, rtol=1e-8, atol=1e-10)


def test_size_groups_cover_everything_and_minimise_cost():
    import itertools

    rng = np.random.default_rng(0)
    for sizes in (np.array([1, 1044, 3, 17, 40, 200, 12, 911, 2]), rng.integers(1, 1000, 12), np.full(7, 5)):
        groups = size_groups(sizes, group_cost=400)
        assert sorted(np.concatenate(groups).tolist()) == list(range(len(sizes)))
        assert len(groups) <= 3
        cost = lambda gs: sum(len(g) * sizes[g].max() + 400 for g in gs)  # noqa: E731
        # brute force over every split of the sorted order into at most 3 runs
        order = np.argsort(sizes, kind="stable")
        best = min(cost(np.split(order, list(cut))) for k in range(3)
                   for cut in itertools.combinations(range(1, len(sizes)), k))
        assert cost(groups) == best
    assert len(size_groups(np.full(7, 5))) == 1  # equal sizes: nothing to gain from a split
    big = size_groups(np.array([1] * 40 + [1000] * 10))
    assert len(big) == 2  # the many small bags are not padded to 1,000


def test_epoch_batches_shuffle_vs_replacement():
    cfg = TrainConfig()
    order = np.concatenate(epoch_batches(50, cfg, np.random.default_rng(0)))
    assert sorted(order.tolist()) == list(range(50))  # a permutation: each bag once
    rep = np.concatenate(epoch_batches(50, compat_train_config(cfg), np.random.default_rng(0)))
    assert len(rep) == 50 and len(np.unique(rep)) < 50  # with replacement: repeats, some bags missed
    batches = epoch_batches(10, TrainConfig(batch_size=4), np.random.default_rng(0))
    assert [len(b) for b in batches] == [4, 4, 2]


def test_lr_halving_schedule():
    cfg = compat_train_config(TrainConfig())
    assert [cfg.lr_factor(e) for e in (0, 39, 40, 79, 80)] == [1.0, 1.0, 0.5, 0.5, 0.25]
    assert TrainConfig().lr_factor(99) == 1.0


def test_gradients_accumulate_without_zero_grad():
    # With accumulate_gradients the optimiser sees the running sum of gradients.
    bags, y = make_concept_bags(n_bags=4, n_features=2, seed=0)
    tb = [torch.as_tensor(b) for b in bags]
    grads = {}
    for accumulate in (False, True):
        model = PrototypeMIL(2, 2, PrototypeMILConfig(n_prototypes=2), generator=torch.Generator().manual_seed(0)).double()
        cfg = TrainConfig(epochs=1, batch_size=1, accumulate_gradients=accumulate, lr_prototypes=1e-12, lr_classifier=1e-12)
        train_model(model, tb, torch.as_tensor(y), cfg, seed=0)
        grads[accumulate] = model.prototypes.grad.clone()
    # Reconstruct: gradient of the last bag alone vs the sum over the epoch's bags.
    model = PrototypeMIL(2, 2, PrototypeMILConfig(n_prototypes=2), generator=torch.Generator().manual_seed(0)).double()
    order = np.concatenate(epoch_batches(4, TrainConfig(), np.random.default_rng(0)))
    from minitorch_proto.bags import BagBatch

    per_bag = []
    for i in order:
        model.zero_grad()
        model.loss_terms(BagBatch.from_bags([bags[i]], dtype=torch.float64), torch.as_tensor(y[[i]]))["total"].backward()
        per_bag.append(model.prototypes.grad.clone())
    torch.testing.assert_close(grads[False], per_bag[-1], rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(grads[True], sum(per_bag), rtol=1e-6, atol=1e-9)


def test_training_is_deterministic_and_seed_dependent():
    bags, y = make_concept_bags(n_bags=20, seed=1)
    sets = [np.arange(20)] * 2
    a = train_batched(bags, y, sets, [5, 6], PrototypeMILConfig(n_prototypes=3), TrainConfig(epochs=2), device="cpu")
    b = train_batched(bags, y, sets, [5, 6], PrototypeMILConfig(n_prototypes=3), TrainConfig(epochs=2), device="cpu")
    torch.testing.assert_close(a.prototypes, b.prototypes, rtol=0, atol=0)
    assert not torch.allclose(a.prototypes[0], a.prototypes[1])


def test_history_records_every_term_each_epoch():
    bags, y = make_concept_bags(n_bags=10, seed=2)
    model = PrototypeMIL(4, 2, PrototypeMILConfig(n_prototypes=3))
    hist = train_model(model, [torch.as_tensor(b, dtype=torch.float32) for b in bags], torch.as_tensor(y),
                       TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=1e-2))
    assert [h["epoch"] for h in hist] == [1, 2, 3]
    for h in hist:
        assert {"cross_entropy", "weight_penalty", "prototype_penalty", "distance_penalty", "total", "seconds"} <= set(h)
        assert h["total"] == pytest.approx(h["cross_entropy"] + h["weight_penalty"] + h["prototype_penalty"]
                                           + h["distance_penalty"], rel=1e-6)


def test_batched_rejects_bad_training_sets():
    bags, y = make_concept_bags(n_bags=10, seed=2)
    with pytest.raises(ValueError, match="single class"):
        train_batched(bags, y, [np.array([0, 2, 4])], [0], device="cpu")
    with pytest.raises(ValueError, match="empty"):
        train_batched(bags, y, [np.array([], dtype=int)], [0], device="cpu")
    with pytest.raises(ValueError, match="seeds"):
        train_batched(bags, y, [np.arange(10)], [0, 1], device="cpu")


def test_train_config_validation():
    with pytest.raises(ValueError, match="lr_prototypes"):
        TrainConfig(lr_prototypes=0)
    with pytest.raises(ValueError, match="sampling"):
        TrainConfig(sampling="bootstrap")
    with pytest.raises(ValueError, match="epochs"):
        TrainConfig(epochs=0)


def test_cuda_request_without_cuda_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    from minitorch_proto.utils import resolve_device

    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda")
    assert resolve_device("auto").type == "cpu"


def test_precomputed_table_and_on_the_fly_standardisation_agree():
    bags, y = make_concept_bags(n_bags=24, n_features=5, seed=4, min_size=1, max_size=40)
    sets, seeds = [np.arange(0, 18), np.arange(6, 24)], [1, 2]
    mconf, tconf = CASES["paper"][0], CASES["paper"][1]
    kw = dict(dtype=torch.float64, device="cpu", eval_sets=[np.arange(24)] * 2)
    with_table = train_batched(bags, y, sets, seeds, mconf, tconf, backend="tensor", **kw)
    without = train_batched(bags, y, sets, seeds, mconf, tconf, table_limit_bytes=0, backend="tensor", **kw)
    torch.testing.assert_close(with_table.prototypes, without.prototypes, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(with_table.evaluations[tconf.epochs][1], without.evaluations[tconf.epochs][1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_three_classes_match_the_sequential_trainer(backend):
    bags, _ = make_concept_bags(n_bags=24, n_features=4, seed=5, min_size=2, max_size=9)
    y = np.arange(24) % 3
    mconf = PrototypeMILConfig(n_prototypes=3, pooling=("min", "max"))
    tconf = TrainConfig(epochs=2, lr_prototypes=1e-2, lr_classifier=2e-2)
    train = np.arange(20)
    fit = train_batched(bags, y, [train], [7], mconf, tconf, dtype=torch.float64, device="cpu",
                        eval_sets=[np.arange(24)], backend=backend)
    st = BagStandardizer("feature").fit([bags[i] for i in train])
    model = PrototypeMIL(4, 3, mconf, generator=torch.Generator().manual_seed(7)).double()
    train_model(model, [torch.as_tensor(st.transform_instances(bags[i])) for i in train], torch.as_tensor(y[train]),
                tconf, seed=7)
    torch.testing.assert_close(fit.weight[0], model.weight.detach(), rtol=1e-9, atol=1e-9)
    from minitorch_proto.bags import BagBatch

    proba = model.predict_proba_batch(BagBatch.from_bags(st.transform(bags), dtype=torch.float64)).numpy()
    assert proba.shape == (24, 3)
    np.testing.assert_allclose(fit.evaluations[2][0], proba, rtol=1e-8, atol=1e-10)


def test_backends_agree_in_float32_and_unknown_backend_is_an_error():
    bags, y = make_concept_bags(n_bags=40, n_features=6, seed=6, min_size=1, max_size=30)
    sets, seeds = [np.arange(0, 30), np.arange(10, 40)], [3, 4]
    mconf, tconf = PrototypeMILConfig(n_prototypes=5), TrainConfig(epochs=5, lr_prototypes=1e-2, lr_classifier=1e-2)
    fits = {b: train_batched(bags, y, sets, seeds, mconf, tconf, device="cpu", eval_sets=[np.arange(40)] * 2,
                             backend=b) for b in BACKENDS}
    assert fits["compiled"].prototypes.dtype == torch.float32
    torch.testing.assert_close(fits["compiled"].prototypes, fits["tensor"].prototypes, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fits["compiled"].evaluations[5][1], fits["tensor"].evaluations[5][1], atol=1e-4)
    with pytest.raises(ValueError, match="backend"):
        train_batched(bags, y, sets, seeds, mconf, tconf, device="cpu", backend="fortran")


def test_auto_backend_falls_back_to_tensors_without_numba(monkeypatch):
    from minitorch_proto.training import compiled

    bags, y = make_concept_bags(n_bags=12, n_features=3, seed=8)
    kw = dict(device="cpu", eval_sets=[np.arange(12)], dtype=torch.float64)
    mconf, tconf = PrototypeMILConfig(n_prototypes=2), TrainConfig(epochs=2, lr_prototypes=1e-2, lr_classifier=1e-2)
    reference = train_batched(bags, y, [np.arange(12)], [1], mconf, tconf, backend="tensor", **kw)
    monkeypatch.setattr(compiled, "AVAILABLE", False)
    fallback = train_batched(bags, y, [np.arange(12)], [1], mconf, tconf, **kw)
    torch.testing.assert_close(fallback.prototypes, reference.prototypes, rtol=0, atol=0)
    with pytest.raises(ValueError, match="numba"):
        train_batched(bags, y, [np.arange(12)], [1], mconf, tconf, backend="compiled", **kw)


# --------------------------------------------------------------------------------------
# The engines held to one contract: configurations drawn from the cross product of every
# option of the model and the trainer. A field added to either config must be listed here
# (as an option to vary or as a plain number), so it cannot be forgotten by an engine.
# --------------------------------------------------------------------------------------
from itertools import combinations, product  # noqa: E402

from minitorch_proto.bags import POOLINGS  # noqa: E402
from minitorch_proto.distances import DISTANCES  # noqa: E402

POOLING_SUBSETS = [c for r in range(1, len(POOLINGS) + 1) for c in combinations(POOLINGS, r)]
MODEL_OPTIONS = {
    "distance": DISTANCES,
    "pooling": POOLING_SUBSETS,
    "layer_norm": (True, False),
    "bias": (True, False),
    "weight_penalty": ("l1", "l2"),
    "prototype_penalty": ("norm", "pairwise"),
    "distance_penalty": ("min", "pooled"),
    "init": ("normal", "instances", "kmeans++"),
}
TRAIN_OPTIONS = {
    "batch_size": (1, 3),
    "sampling": ("shuffle", "replacement"),
    "lr_halving_every": (None, 2),
    "accumulate_gradients": (False, True),
}
STANDARDIZATIONS = ("feature", "instance", "none")
# Fields that are plain numbers every engine reads the same way (checked by every drawn case).
# Switches that constrain other fields, each checked in every engine by its own entry in CASES.
CONSTRAINED_FIELDS = {"monotone"}
NUMERIC_FIELDS = {"n_prototypes", "lambda_w", "lambda_p", "lambda_d", "layer_norm_eps",
                  "epochs", "lr_prototypes", "lr_classifier", "betas", "eps"}
N_DRAWN = 10


def _drawn_cases():
    rng = np.random.default_rng(20261123)
    space = list(product(*MODEL_OPTIONS.values(), *TRAIN_OPTIONS.values(), STANDARDIZATIONS))
    cases = []
    for i in rng.choice(len(space), size=N_DRAWN, replace=False):
        values = space[int(i)]
        m = dict(zip(MODEL_OPTIONS, values[: len(MODEL_OPTIONS)]))
        t = dict(zip(TRAIN_OPTIONS, values[len(MODEL_OPTIONS): -1]))
        cases.append((m, t, values[-1]))
    return cases


def test_option_space_lists_every_config_field():
    import dataclasses

    listed = set(MODEL_OPTIONS) | set(TRAIN_OPTIONS) | NUMERIC_FIELDS | CONSTRAINED_FIELDS
    fields = {f.name for f in dataclasses.fields(PrototypeMILConfig)} | {f.name for f in dataclasses.fields(TrainConfig)}
    assert fields - listed == set(), "add the new option to MODEL_OPTIONS/TRAIN_OPTIONS so every engine is checked"
    assert listed - fields == set()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", range(N_DRAWN))
def test_engines_agree_on_drawn_configurations(k, backend):
    m, t, std = _drawn_cases()[k]
    mconf = PrototypeMILConfig(n_prototypes=3, lambda_w=1e-2, lambda_p=1e-2, lambda_d=1e-2, **m)
    tconf = TrainConfig(epochs=2, lr_prototypes=1e-2, lr_classifier=2e-2, **t)
    bags, y = make_concept_bags(n_bags=24, n_features=4, seed=5 + k, min_size=1, max_size=30)
    train_sets = [np.arange(0, 16), np.arange(5, 24)]
    seeds = [21 + k, 31 + k]
    fit = train_batched(bags, y, train_sets, seeds, mconf, tconf, standardization=std,
                        dtype=torch.float64, device="cpu", backend=backend)
    for i in range(2):
        model, history = _sequential(bags, y, train_sets[i], seeds[i], mconf, tconf, std)
        torch.testing.assert_close(fit.prototypes[i], model.prototypes.detach(), rtol=1e-8, atol=1e-9)
        torch.testing.assert_close(fit.weight[i], model.weight.detach(), rtol=1e-8, atol=1e-9)
        assert fit.history[i][-1]["total"] == pytest.approx(history[-1]["total"], rel=1e-8)


@pytest.mark.parametrize("mode", ["feature", "instance", "none"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transform_stacked_equals_the_concatenated_transform(mode, dtype):
    rng = np.random.default_rng(3)
    bags = [(rng.normal(size=(k, 5)) * [1, 10, 1e-3, 1, 4] + 2).astype(dtype) for k in (3, 1, 7)]
    st = BagStandardizer(mode).fit(bags)
    stacked = st.transform_stacked(bags)
    assert stacked.dtype == np.float64 and stacked.shape == (11, 5)
    assert np.array_equal(stacked, np.concatenate(st.transform(bags)))  # bit for bit, not to rounding
    with pytest.raises(RuntimeError, match="fitted"):
        BagStandardizer("feature").transform_stacked(bags)


@pytest.mark.parametrize("width", [1, 5, 230])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_standardiser_fit_equals_numpys_mean_and_std_bit_for_bit(width, dtype):
    # The fit centres and squares one float64 copy in place (no second copy of the data): the same
    # values as X.mean(0) and X.std(0), not merely close, and the caller's bags are left alone.
    rng = np.random.default_rng(width)
    bags = [(rng.normal(size=(k, width)) * 7 + 3).astype(dtype) for k in (40, 1, 300, 9)]
    before = [b.copy() for b in bags]
    st = BagStandardizer("feature").fit(bags)
    X = np.concatenate([b.astype(np.float64) for b in bags])
    assert np.array_equal(st.mean_, X.mean(axis=0)) and np.array_equal(st.scale_, X.std(axis=0))
    assert all(np.array_equal(a, b) for a, b in zip(bags, before))


def test_an_ensembles_seeds_share_one_standardiser_fit(monkeypatch):
    from minitorch_proto import preprocessing

    bags, y = make_concept_bags(n_bags=24, seed=6)
    train, other = np.arange(20), np.arange(4, 24)
    fits = []
    real = preprocessing.BagStandardizer.fit
    monkeypatch.setattr(preprocessing.BagStandardizer, "fit", lambda self, b: fits.append(len(b)) or real(self, b))
    out = train_batched(bags, y, [train, train, other], [0, 1, 2], PrototypeMILConfig(n_prototypes=3, init="kmeans++"),
                        TrainConfig(epochs=1), backend="tensor")
    assert fits == [20, 20]  # one per distinct set, not one per model
    assert out.standardizers[0] is out.standardizers[1] and out.standardizers[2] is not out.standardizers[0]


def test_check_bags_can_keep_float32():
    from minitorch_proto.validation import check_bags

    f32, ints = np.ones((2, 3), np.float32), np.arange(6).reshape(2, 3)
    kept = check_bags([f32, ints], dtype=None)
    assert kept[0] is f32 and kept[1].dtype == np.float64  # float32 as it is; anything else as float64
    assert check_bags([f32])[0].dtype == np.float64  # the default still converts


@pytest.mark.skipif(not compiled.AVAILABLE, reason="numba not installed")
def test_compiled_engine_standardises_in_slices_with_the_same_result(monkeypatch):
    """The compiled engine fills its copy of the bags a slice of rows at a time; any slice gives one result."""
    from minitorch_proto.training import batched

    bags, y = make_concept_bags(n_bags=24, seed=5)
    sets = [np.arange(0, 16), np.arange(8, 24)]
    mconf, tconf = PrototypeMILConfig(n_prototypes=3, init="kmeans++"), TrainConfig(epochs=2)

    def fit():
        out = train_batched(bags, y, sets, [0, 1], mconf, tconf, backend="compiled")
        return out.prototypes.clone(), out.weight.clone()

    whole = fit()
    monkeypatch.setattr(batched, "_SLICE_ROWS", 7)  # several slices per model, one crossing each bag
    sliced = fit()
    assert all(torch.equal(a, b) for a, b in zip(whole, sliced))


@pytest.mark.skipif(not compiled.AVAILABLE, reason="numba not installed")
def test_seeds_on_the_same_bags_share_one_copy_and_train_as_apart(monkeypatch):
    """An ensemble's members (same bags, same standardisation) read one standardised copy of the bags."""
    bags, y = make_concept_bags(n_bags=24, seed=6)
    train, other = np.arange(20), np.arange(4, 24)
    mconf, tconf = PrototypeMILConfig(n_prototypes=3, init="kmeans++"), TrainConfig(epochs=2)
    rows = []
    shipped = compiled.train_epoch
    monkeypatch.setattr(compiled, "train_epoch",
                        lambda state, X, *a, **k: rows.append(len(X)) or shipped(state, X, *a, **k))
    together = train_batched(bags, y, [train, train, other], [0, 1, 2], mconf, tconf, backend="compiled")
    n_train, n_other = (sum(len(bags[i]) for i in t) for t in (train, other))
    assert set(rows) == {n_train + n_other}  # not 2 n_train + n_other: the two seeds on `train` share a copy
    for m, (t, seed) in enumerate([(train, 0), (train, 1), (other, 2)]):
        alone = train_batched(bags, y, [t], [seed], mconf, tconf, backend="compiled")
        assert torch.equal(alone.prototypes[0], together.prototypes[m])
        assert torch.equal(alone.weight[0], together.weight[m])


def test_parameter_reach_measures_where_training_starts_and_how_far_it_goes(shared_mil):
    from minitorch_proto.data import load_benchmark
    from minitorch_proto.evaluation import REACH_PROBES, parameter_reach, stratified_folds

    d = load_benchmark("musk1", data_dir=shared_mil)
    fold = stratified_folds(d.y, n_repeats=1, n_folds=3, random_state=0)[0]
    reach, penalty = parameter_reach("musk1", d.bags, d.y, fold, epochs=2)
    assert list(reach.index) == [label for label, _, _ in REACH_PROBES]
    start = reach["start: prototype to nearest instance"]
    # k-means++ starts every prototype on a training instance; the paper's normal start does not.
    assert start["init=kmeans++"] == pytest.approx(0.0, abs=1e-5) and start["paper-faithful"] > 1.0
    moved = reach["prototype moved (mean)"]
    assert moved["rates 1e-2"] > moved["paper-faithful"] > 0  # larger rates travel further
    assert set(penalty) == {"max_logit_change", "flips"} and 0 <= penalty["flips"] <= len(fold.test)


def test_the_trainers_take_class_codes_only():
    # -1 had trained a cross-entropy without a lower bound (it went negative), 0.5/1.5 were read as 0/1 by three
    # engines and as 0.5/1.5 by the sequential one, and a code past n_classes was read out of bounds by numba.
    from minitorch_proto.evaluation.tuning import fit_ensembles, sample_candidates
    from minitorch_proto.training.distributed import train_streaming
    from minitorch_proto.training.engines import Problem
    from minitorch_proto.validation import check_codes

    bags, y = make_concept_bags(n_bags=10, seed=2)
    sets = [np.arange(10)]
    for labels, n_classes, message in ((2 * y - 1, None, r"codes 0..\d+; got values from -1 to 1"),
                                       (y + 0.5, None, r"whole numbers\); got float64 values"),
                                       (np.arange(10) % 4, 3, r"codes 0..2; got values from 0 to 3")):
        with pytest.raises(ValueError, match=message):
            train_batched(bags, labels, sets, [0], n_classes=n_classes, device="cpu")
        with pytest.raises(ValueError, match=message):
            Problem(bags, labels, tuple(sets), (0,), n_classes=n_classes)
        with pytest.raises(ValueError, match=message):
            train_streaming(bags, labels, n_classes=n_classes, train_config=TrainConfig(epochs=1))
        model = PrototypeMIL(bags[0].shape[1], n_classes or 2, PrototypeMILConfig(n_prototypes=2))
        with pytest.raises(ValueError, match=message):
            train_model(model, [torch.as_tensor(b, dtype=torch.float32) for b in bags], torch.as_tensor(labels),
                        TrainConfig(epochs=1))
    with pytest.raises(ValueError, match="whole numbers"):  # the tuner had cast 0.5 to 0 before the check
        fit_ensembles(bags, y + 0.5, sets, sets, sample_candidates(1, 0), [0], n_seeds=1, device="cpu")
    assert Problem(bags, y.astype(float), tuple(sets), (0,)).y.dtype == np.int64  # whole floats become codes
    assert check_codes(np.array([0, 1], dtype=object))[0].tolist() == [0, 1]  # whole numbers held as objects
    with pytest.raises(ValueError, match="codes from 0 up; got values from -2 to -1"):
        check_codes([-2, -1])


@pytest.mark.skipif(not compiled.AVAILABLE, reason="numba not installed")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_pairwise_penalty_is_the_published_term_with_its_gradient(dtype):
    """The hand-written gradient of the published code's prototype penalty equals autograd's, where it
    matters: some prototypes inside the unit ball (their diagonal term counts) and some pairs clamped."""
    from minitorch_proto.model import penalty_terms

    rng = np.random.default_rng(3)
    P = rng.normal(size=(6, 4)) * np.array([0.2, 0.4, 1.0, 1.5, 2.0, 0.1])[:, None]
    P[5] = 3 * P[4]  # a pair far along one direction: its pseudo-distance is clamped at 0
    cfg = PrototypeMILConfig(n_prototypes=6, prototype_penalty="pairwise", lambda_p=0.7)
    Pt = torch.tensor(P, requires_grad=True)
    value = penalty_terms(torch.zeros(1, 1, dtype=torch.float64), Pt, cfg)["prototype_penalty"]
    value.backward()
    n = np.linalg.norm(P, axis=1)
    pseudo = n[:, None] + n[None, :] - 2 * P @ P.T
    assert (pseudo < 0).any() and (np.diag(pseudo) > 0).any()  # both cases are exercised
    Pm = P.astype(dtype)
    gP, gW = np.zeros_like(Pm), np.zeros((1, 1), dtype=dtype)
    psq = (Pm.astype(np.float64) ** 2).sum(1)
    _, p_pen = compiled._penalties(Pm, np.zeros((1, 1), dtype=dtype), gP, gW, 0.0, 0.7, True, False,
                                   np.zeros((6, 6), dtype=dtype), psq)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert p_pen == pytest.approx(value.item(), rel=tol)
    np.testing.assert_allclose(gP, Pt.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.skipif(not compiled.AVAILABLE, reason="numba not installed")
def test_a_first_compile_is_said_before_the_bar_sits_at_zero(monkeypatch, capsys):
    # The first training on a machine compiles the kernels for about half a minute at 0 %: a note says why.
    bags, y = make_concept_bags(n_bags=12, seed=1)
    run = dict(model_config=PrototypeMILConfig(n_prototypes=3), train_config=TrainConfig(epochs=1), device="cpu",
               backend="compiled")
    train_batched(bags, y, [np.arange(12)], [0], **run)  # compiled and cached now, as numba writes its cache
    assert compiled.first_compile() is False
    missing = type("Kernel", (), {"_cache": type("C", (), {"_cache_file": type("F", (), {"_index_path": "/nope.nbi"})})})
    assert compiled.first_compile(missing) is True and compiled.first_compile(object()) is False
    capsys.readouterr()
    monkeypatch.setattr(compiled, "first_compile", lambda kernel=None: True)
    train_batched(bags, y, [np.arange(12)], [0], **run, progress=True)
    assert "compiling the training kernels" in capsys.readouterr().err
    train_batched(bags, y, [np.arange(12)], [0], **run, progress=False)  # quiet: no note
    assert "compiling" not in capsys.readouterr().err
