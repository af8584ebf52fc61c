"""The monotone variant (issue 14): the standard MIL assumption by construction, in every engine.

Property tests (Hypothesis) over random models and bags check, for the forward pass of
every engine (the module, the estimator's chunked path, the tensor engine, the compiled
engine) and both float dtypes, that

* adding instances to a bag never lowers its positive logit (monotonicity), and
* repeating an instance leaves the logit unchanged (frequency invariance);

and ``hypothesis.find`` shows that the same checks do fail for the paper's model (layer
norm, free head) and for mean pooling, so they can fail. The proofs are in
``book/monotone.md``.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from minitorch_proto import PrototypeMILClassifier, monotone_config
from minitorch_proto.bags import BagBatch
from minitorch_proto.model import PrototypeMIL, PrototypeMILConfig
from minitorch_proto.training import compiled
from minitorch_proto.training.batched import train_batched
from minitorch_proto.training.setup import BagPool
from minitorch_proto.training.tensor import _Stack

from .conftest import make_concept_bags

ENGINES = ["module", "chunked", "tensor"] + (["compiled"] if compiled.AVAILABLE else [])
DTYPES = {"float32": torch.float32, "float64": torch.float64}
# Distances are recomputed per bag; in float32 the same instance-prototype distance can
# differ in the last bits between bags of different sizes.
TOL = {torch.float32: 1e-4, torch.float64: 1e-10}
PROPERTY_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _model(config: PrototypeMILConfig, n_features: int, seed: int, dtype: torch.dtype, free_sign: bool = False):
    """A random model: prototypes and head drawn at scale 1 (the variant's head kept <= 0)."""
    g = torch.Generator().manual_seed(seed)
    model = PrototypeMIL(n_features, 2, config, generator=g).to(dtype)
    with torch.no_grad():
        model.weight.copy_(torch.randn(model.weight.shape, generator=g, dtype=dtype))
        if config.monotone and not free_sign:
            model.weight.copy_(-model.weight.abs())
        if model.bias is not None:
            model.bias.copy_(torch.randn(1, generator=g, dtype=dtype))
    return model.eval()


def _logits(engine: str, model: PrototypeMIL, bags: list[np.ndarray]) -> np.ndarray:
    """Positive-class logits of ``bags`` (already in the model's space) through one engine."""
    c, dtype = model.config, model.prototypes.dtype
    P, W = model.prototypes.detach(), model.weight.detach()
    b = None if model.bias is None else model.bias.detach()
    if engine == "module":
        with torch.no_grad():
            return model(BagBatch.from_bags(bags, dtype=dtype)).double().numpy()[:, 0]
    if engine == "chunked":  # the estimator's bounded-memory path; chunks of 3 split bags
        sizes = [len(x) for x in bags]
        phi, _ = model.pooled_chunked(np.concatenate(bags), np.repeat(np.arange(len(bags)), sizes), len(bags), 3)
        with torch.no_grad():
            return _head(phi, model).double().numpy()[:, 0]
    slots = np.zeros(len(bags), dtype=np.int64), np.arange(len(bags))
    if engine == "tensor":
        L = bags[0].shape[1]
        pool = BagPool(bags, torch.device("cpu"))
        zeros, ones = torch.zeros(1, L, dtype=torch.float64), torch.ones(1, L, dtype=torch.float64)
        stack = _Stack(P[None], W[None], None if b is None else b[None], c, pool, zeros, ones, dtype, 1 << 20)
        with torch.no_grad():
            return stack.logits(stack.pooled(*slots)[0], slots[0]).double().numpy()[:, 0]
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    X = np.ascontiguousarray(np.concatenate(bags), dtype=np_dtype)
    sizes = np.array([len(x) for x in bags], dtype=np.int64)
    start = (np.cumsum(sizes) - sizes)[None, :]
    bias = None if b is None else np.ascontiguousarray(b.numpy()[None], np_dtype)
    state = compiled.EpochState(np.ascontiguousarray(P.numpy()[None], np_dtype),
                                np.ascontiguousarray(W.numpy()[None], np_dtype), bias, False)
    return compiled.predict_logits(state, X, start, sizes, *slots, c, int(sizes.max()))[:, 0]


def _head(phi: torch.Tensor, model: PrototypeMIL) -> torch.Tensor:
    from minitorch_proto.model import head_logits, normalize_features

    return head_logits(normalize_features(phi, model.config), model.weight, model.bias)


@st.composite
def cases(draw):
    """A random model size, one bag, instances to add, and which instance to repeat."""
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    D, L = draw(st.integers(2, 4)), draw(st.integers(1, 5))  # layer norm needs two features
    K, n_add = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    bag = rng.normal(size=(K, L))
    added = rng.normal(scale=draw(st.sampled_from([0.5, 1.0, 2.0])), size=(n_add, L))
    repeat = draw(st.integers(0, K - 1))
    return seed, D, L, bag, added, repeat


def _three_bags(bag: np.ndarray, added: np.ndarray, repeat: int) -> list[np.ndarray]:
    """The bag, the bag with instances added (in shuffled positions), the bag with one instance twice."""
    grown = np.concatenate([added[:1], bag, added[1:]])
    repeated = np.concatenate([bag, bag[repeat : repeat + 1]])
    return [bag, grown, repeated]


def _violations(engine, config, case, dtype, free_sign=False) -> tuple[float, float]:
    """(how far adding instances lowered the logit, how far repeating one moved it)."""
    seed, D, L, bag, added, repeat = case
    model = _model(PrototypeMILConfig(**{**config.to_dict(), "n_prototypes": D, "pooling": config.pooling}),
                   L, seed, dtype, free_sign)
    base, grown, repeated = _logits(engine, model, _three_bags(bag, added, repeat))
    return float(base - grown), float(abs(repeated - base))


# ------------------------------------------------------------------ the variant obeys
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("engine", ENGINES)
@PROPERTY_SETTINGS
@given(case=cases())
def test_variant_is_monotone_and_frequency_invariant(engine, dtype, case):
    dt = DTYPES[dtype]
    drop, moved = _violations(engine, monotone_config(), case, dt)
    scale = 1.0 + abs(float(_logits("module", _model(monotone_config(n_prototypes=case[1]), case[2], case[0], dt),
                                     [case[3]])[0]))
    assert drop <= TOL[dt] * scale, f"adding instances lowered the logit by {drop}"
    assert moved <= TOL[dt] * scale, f"repeating an instance moved the logit by {moved}"


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_give_the_same_logits(engine):
    rng = np.random.default_rng(0)
    bags = [rng.normal(size=(k, 3)) for k in (1, 4, 9)]
    model = _model(monotone_config(n_prototypes=5), 3, 1, torch.float64)
    np.testing.assert_allclose(_logits(engine, model, bags), _logits("module", model, bags), rtol=1e-10, atol=1e-10)


# ------------------------------------------------------ the checks can fail: the paper model
def _find_violation(engine, config, which, free_sign=False):
    """A case where ``which`` ("monotone" or "frequency") fails, found by Hypothesis, or None."""
    k = 0 if which == "monotone" else 1
    try:
        return find(cases(), lambda c: _violations(engine, config, c, torch.float64, free_sign)[k] > 1e-6,
                    settings=settings(max_examples=300, deadline=None, database=None))
    except Exception as err:  # hypothesis.errors.NoSuchExample
        if type(err).__name__ == "NoSuchExample":
            return None
        raise


@pytest.mark.parametrize("engine", ENGINES)
def test_paper_model_violates_monotonicity(engine):
    # Per-bag layer norm and a head of either sign: adding an instance can lower the score.
    assert _find_violation(engine, PrototypeMILConfig(), "monotone") is not None


def test_each_constraint_is_needed_for_monotonicity():
    free_head = monotone_config()  # layer norm off, but weights of either sign
    assert _find_violation("module", free_head, "monotone", free_sign=True) is not None
    layer_norm_only = PrototypeMILConfig(layer_norm=True)  # head drawn <= 0 below, layer norm on
    seed_cases = [_violations("module", layer_norm_only, c, torch.float64) for c in _example_cases(200)]
    assert max(d for d, _ in seed_cases) > 1e-6


def _example_cases(n: int):
    rng = np.random.default_rng(7)
    for seed in range(n):
        D, L, K = int(rng.integers(2, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 6))
        yield seed, D, L, rng.normal(size=(K, L)), rng.normal(size=(2, L)), 0


@pytest.mark.parametrize("engine", ENGINES)
def test_mean_pooling_violates_frequency_invariance(engine):
    # The paper's min-only pooling is frequency invariant even with layer norm; mean pooling
    # (an option of the paper, always on in its published code) is not.
    assert _find_violation(engine, PrototypeMILConfig(), "frequency") is None
    assert _find_violation(engine, PrototypeMILConfig(pooling=("min", "mean")), "frequency") is not None


# ----------------------------------------------------------------- configuration and training
def test_variant_configuration_is_checked():
    c = monotone_config()
    assert (c.pooling, c.layer_norm, c.monotone) == (("min",), False, True)
    assert PrototypeMILConfig().monotone is False  # the paper's model stays the default
    with pytest.raises(ValueError, match="pooling=\\('min',\\) and layer_norm=False"):
        PrototypeMILConfig(monotone=True)  # layer norm on by default
    with pytest.raises(ValueError, match="pooling"):
        monotone_config(pooling=("min", "mean"))
    with pytest.raises(ValueError, match="two classes only"):
        PrototypeMIL(3, 3, monotone_config())
    bags, y = make_concept_bags(n_bags=9, seed=0)
    with pytest.raises(ValueError, match="two classes only"):
        PrototypeMILClassifier(pooling=("min",), layer_norm=False, monotone=True, epochs=1).fit(bags, np.arange(9) % 3)


@pytest.mark.parametrize("backend", ["tensor"] + (["compiled"] if compiled.AVAILABLE else []))
def test_training_keeps_the_weights_nonpositive(backend):
    bags, y = make_concept_bags(n_bags=20, n_features=3, seed=4)
    fit = train_batched(bags, y, [np.arange(20)] * 2, [0, 1], monotone_config(n_prototypes=4),
                        __import__("minitorch_proto").TrainConfig(epochs=4, lr_prototypes=1e-2, lr_classifier=0.2),
                        device="cpu", dtype=torch.float64, backend=backend)
    assert (fit.weight <= 0).all()
    assert (fit.weight == 0).any(), "the projection never bound: the test would not see it missing"


def test_streaming_engine_projects_like_the_reference_trainer(one_torch_thread):
    from minitorch_proto.training import TrainConfig, train_model
    from minitorch_proto.training.distributed import train_streaming

    bags, y = make_concept_bags(n_bags=16, n_features=3, seed=4)
    config, tconf = monotone_config(n_prototypes=4), TrainConfig(epochs=3, batch_size=4, lr_prototypes=1e-2,
                                                                  lr_classifier=0.2)
    fit = train_streaming(bags, y, config, tconf, seed=1, dtype=torch.float64, chunk_size=5)
    model = PrototypeMIL(3, 2, config, generator=torch.Generator().manual_seed(1)).double()
    train_model(model, [torch.as_tensor(fit.standardizer.transform_instances(b)) for b in bags], torch.as_tensor(y),
                tconf, seed=1)
    torch.testing.assert_close(fit.model.weight, model.weight.detach(), rtol=1e-9, atol=1e-11)
    assert (fit.model.weight <= 0).all() and (fit.model.weight == 0).any()


def test_explanation_names_one_instance_per_prototype():
    from minitorch_proto.evaluation.explain import explain_bag

    bags, y = make_concept_bags(n_bags=30, n_features=3, seed=2)
    clf = PrototypeMILClassifier(n_prototypes=3, pooling=("min",), layer_norm=False, monotone=True, epochs=5,
                                 lr_prototypes=1e-2, lr_classifier=1e-2, device="cpu").fit(bags, y)
    assert (clf.model_.weight <= 0).all()
    table = explain_bag(clf, bags[1])
    named = table[table["share"] != 0]
    assert len(named) <= 3  # at most one instance per prototype carries the decision
    attained = sorted(p for lst in table["attains_min"] for p in lst)
    assert len(attained) == 3 and len(set(attained)) == 3  # each prototype names exactly one instance
    assert float(table["share"].sum() + table.attrs["bias"]) == pytest.approx(table.attrs["decision_value"], abs=1e-5)


def test_reproduce_method_builds_the_variant_and_keeps_overrides():
    from dataclasses import replace
    from types import SimpleNamespace

    from minitorch_proto import cli, cli_models
    from minitorch_proto.paper import paper_configs

    assert cli._parse_methods("prototype,prototype-monotone") == [cli.PROTOTYPE, cli.PROTOTYPE_MONOTONE]
    mconf, tconf = paper_configs("musk1")
    tconf = replace(tconf, epochs=7)  # as cli_models.configs_from leaves it after --epochs 7
    args = SimpleNamespace(prototypes=None, lambda_p=None, lambda_d=None, epochs=7, lr_prototypes=None,
                           lr_classifier=None)
    m, t = cli_models.monotone_configs(args, mconf, tconf)
    assert (m.monotone, m.pooling, m.layer_norm, m.n_prototypes, m.init) == (True, ("min",), False, 32, "kmeans++")
    assert (t.epochs, t.lr_prototypes, t.batch_size) == (7, 1e-2, 4)  # the command line's epochs win


def test_with_the_witness_class_sorting_first_the_variant_learns_the_poison():
    """book/monotone.md's warning: the guarantee is for ``classes_[1]``. Named the other way round, the
    single-concept test's poison (in negative training bags only) becomes admissible presence evidence:
    the training bags are fitted and the test bags, whose poison sits in the positives, all misread."""
    from minitorch_proto.book import default_mil_unit_test_models
    from minitorch_proto.data import make_single_concept_test

    factory = default_mil_unit_test_models(include_baselines=False)["prototype (monotone)"]
    (train, test) = make_single_concept_test(random_state=0, n_train=100, n_test=100)
    right = factory(0).fit(train.bags, train.y)
    assert right.score(test.bags, test.y) >= 0.95
    flipped = factory(0).fit(train.bags, 1 - train.y)
    assert flipped.score(train.bags, 1 - train.y) >= 0.95 and flipped.score(test.bags, 1 - test.y) <= 0.05
