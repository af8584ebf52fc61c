"""The model's arithmetic against NumPy and hand computations."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from minitorch_proto.bags import BagBatch, segment_pool
from minitorch_proto.distances import pairwise_distance, safe_sqrt
from minitorch_proto.model import (
    PrototypeMIL,
    PrototypeMILConfig,
    compat_config,
    init_prototypes,
    normalize_features,
)



@pytest.fixture(autouse=True)
def _float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def np_dist(X, P, metric):
    diff = X[:, None, :] - P[None, :, :]
    if metric == "euclidean":
        return np.sqrt((diff**2).sum(-1))
    if metric == "sqeuclidean":
        return (diff**2).sum(-1)
    if metric == "manhattan":
        return np.abs(diff).sum(-1)
    if metric == "cosine":
        return 1 - (X / np.linalg.norm(X, axis=1, keepdims=True)) @ (P / np.linalg.norm(P, axis=1, keepdims=True)).T
    if metric == "pseudo":
        v = np.linalg.norm(X, axis=1)[:, None] + np.linalg.norm(P, axis=1)[None, :] - 2 * X @ P.T
        return np.maximum(v, 0)
    raise AssertionError(metric)


@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean", "manhattan", "cosine", "pseudo"])
def test_distances_match_numpy(metric):
    rng = np.random.default_rng(1)
    X, P = rng.normal(size=(7, 5)), rng.normal(size=(3, 5))
    got = pairwise_distance(torch.tensor(X), torch.tensor(P), metric).numpy()
    np.testing.assert_allclose(got, np_dist(X, P, metric), rtol=1e-10, atol=1e-10)


def test_distances_broadcast_over_models():
    rng = np.random.default_rng(2)
    X, P = rng.normal(size=(3, 6, 4)), rng.normal(size=(3, 2, 4))
    got = pairwise_distance(torch.tensor(X), torch.tensor(P)).numpy()
    for m in range(3):
        np.testing.assert_allclose(got[m], np_dist(X[m], P[m], "euclidean"), rtol=1e-10)


def test_pseudo_distance_clamps_pairs_to_zero():
    # |x| + |p| - 2 x.p is negative for aligned vectors longer than 1: the published
    # code's "distance" clamps these to 0, which a metric would never do for x != p.
    X = torch.tensor([[2.0, 0.0]])
    P = torch.tensor([[3.0, 0.0]])
    assert float(pairwise_distance(X, P, "pseudo")) == 0.0
    assert float(pairwise_distance(X, P, "euclidean")) == pytest.approx(1.0)


def test_euclidean_gradient_finite_when_instance_equals_prototype():
    P = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]], requires_grad=True)
    X = torch.tensor([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]])
    d = pairwise_distance(X, P, "euclidean")
    assert d[0, 0] == 0
    d.sum().backward()
    assert torch.isfinite(P.grad).all()
    # Away from coincidence the gradient is the usual unit vector.
    x, p = X[1], P.detach()[1]
    expected_other = (p - x) / torch.linalg.norm(p - x)
    torch.testing.assert_close(P.grad[1], expected_other + (P.detach()[1] - X[0]) / torch.linalg.norm(P.detach()[1] - X[0]))


def test_safe_sqrt_gradient_zero_at_zero():
    x = torch.tensor([0.0, 4.0], requires_grad=True)
    safe_sqrt(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.25]


def test_segment_pool_matches_numpy_per_bag():
    rng = np.random.default_rng(3)
    sizes = [1, 4, 2, 7]
    values = rng.normal(size=(sum(sizes), 3))
    idx = torch.repeat_interleave(torch.arange(4), torch.tensor(sizes))
    starts = np.cumsum([0] + sizes)
    for how, fn in (("min", np.min), ("max", np.max), ("mean", np.mean)):
        got = segment_pool(torch.tensor(values), idx, 4, how).numpy()
        want = np.stack([fn(values[starts[i] : starts[i + 1]], axis=0) for i in range(4)])
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_batched_masked_pooling_ignores_padding():
    from minitorch_proto.training.tensor import _masked_pool

    dist = torch.tensor([[[1.0], [5.0], [-100.0]], [[2.0], [100.0], [100.0]]])  # padding holds extreme values
    mask = torch.tensor([[True, True, False], [True, False, False]])
    sizes = torch.tensor([2, 1])
    assert _masked_pool(dist, mask, sizes, "min")[:, 0].tolist() == [1.0, 2.0]
    assert _masked_pool(dist, mask, sizes, "max")[:, 0].tolist() == [5.0, 2.0]
    assert _masked_pool(dist, mask, sizes, "mean")[:, 0].tolist() == [3.0, 2.0]


def test_layer_norm_matches_eq4():
    phi = torch.tensor([[1.0, 2.0, 3.0, 10.0], [4.0, 4.0, 5.0, 7.0]])
    cfg = PrototypeMILConfig(n_prototypes=4, layer_norm_eps=0.0)
    z = normalize_features(phi, cfg).numpy()
    p = phi.numpy()
    want = (p - p.mean(1, keepdims=True)) / p.std(1, keepdims=True)  # population std, as Eq. 4a
    np.testing.assert_allclose(z, want, rtol=1e-12)
    assert normalize_features(phi, PrototypeMILConfig(n_prototypes=4, layer_norm=False)) is phi


def _tiny_model(config, n_features=3, seed=0):
    return PrototypeMIL(n_features, 2, config, generator=torch.Generator().manual_seed(seed)).double()


def test_loss_terms_by_hand():
    cfg = PrototypeMILConfig(n_prototypes=2, pooling=("min", "max"), lambda_w=0.1, lambda_p=0.2, lambda_d=0.3)
    model = _tiny_model(cfg)
    bags = [np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 1.0]]), np.array([[1.0, 1.0, 1.0]])]
    y = torch.tensor([1, 0])
    terms = model.loss_terms(BagBatch.from_bags(bags, dtype=torch.float64), y)

    P = model.prototypes.detach().numpy()
    w = model.weight.detach().numpy()[0]
    b = float(model.bias.detach())
    ce, dsum = [], []
    for bag, label in zip(bags, [1, 0]):
        d = np_dist(bag, P, "euclidean")
        phi = np.concatenate([d.min(0), d.max(0)])
        z = (phi - phi.mean()) / np.sqrt(phi.var() + cfg.layer_norm_eps)
        p1 = 1 / (1 + np.exp(-(z @ w + b)))
        ce.append(-np.log(p1 if label else 1 - p1))
        dsum.append(d.min(0).sum())  # paper: the min distances, before normalisation
    assert terms["cross_entropy"].item() == pytest.approx(np.mean(ce), rel=1e-10)
    assert terms["weight_penalty"].item() == pytest.approx(0.1 * np.abs(w).sum(), rel=1e-10)
    assert terms["prototype_penalty"].item() == pytest.approx(0.2 * np.linalg.norm(P, axis=1).sum(), rel=1e-10)
    assert terms["distance_penalty"].item() == pytest.approx(0.3 * np.mean(dsum), rel=1e-10)
    parts = sum(terms[k].item() for k in ("cross_entropy", "weight_penalty", "prototype_penalty", "distance_penalty"))
    assert terms["total"].item() == pytest.approx(parts)


def test_gradcheck_through_the_whole_objective():
    cfg = PrototypeMILConfig(n_prototypes=3, pooling=("min", "mean", "max"))
    model = _tiny_model(cfg, n_features=4)
    rng = np.random.default_rng(0)
    batch = BagBatch.from_bags([rng.normal(size=(3, 4)), rng.normal(size=(5, 4))], dtype=torch.float64)
    y = torch.tensor([0, 1])

    def objective(P, W, b):
        with torch.no_grad():
            model.prototypes.copy_(P)
        # Rebuild through the functional path so gradcheck sees the inputs.
        from minitorch_proto.model import head_logits, loss_terms, pooled_from_distances

        dist = pairwise_distance(batch.instances, P)
        phi, pen = pooled_from_distances(dist, lambda d, how: segment_pool(d, batch.bag_index, 2, how), cfg)
        logits = head_logits(normalize_features(phi, cfg), W, b)
        return sum(loss_terms(logits, y, W, P, pen, cfg).values())

    inputs = tuple(t.detach().clone().requires_grad_(True) for t in (model.prototypes, model.weight, model.bias))
    assert torch.autograd.gradcheck(objective, inputs, eps=1e-6, atol=1e-5)


def test_multiclass_uses_softmax():
    cfg = PrototypeMILConfig(n_prototypes=3)
    model = PrototypeMIL(2, 4, cfg).double()
    batch = BagBatch.from_bags([np.ones((2, 2)), np.zeros((3, 2))], dtype=torch.float64)
    logits = model(batch)
    assert logits.shape == (2, 4)
    proba = model.predict_proba_batch(batch)
    torch.testing.assert_close(proba.sum(1), torch.ones(2))
    terms = model.loss_terms(batch, torch.tensor([3, 0]))
    want = -torch.log_softmax(logits, 1)[[0, 1], [3, 0]].mean()
    torch.testing.assert_close(terms["cross_entropy"], want)


def test_bags_of_one_and_of_100000_instances():
    cfg = PrototypeMILConfig(n_prototypes=4, pooling=("min", "mean", "max"))
    model = PrototypeMIL(8, 2, cfg)
    rng = np.random.default_rng(0)
    big = rng.normal(size=(100_000, 8)).astype(np.float32)
    batch = BagBatch.from_bags([big[:1], big], dtype=torch.float32)
    with torch.no_grad():
        phi, _ = model.pooled(batch)
    d_big = np_dist(big.astype(np.float64), model.prototypes.detach().double().numpy(), "euclidean")
    np.testing.assert_allclose(phi[1, :4].numpy(), d_big.min(0), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(phi[1, 4:8].numpy(), d_big.mean(0), rtol=1e-4)
    np.testing.assert_allclose(phi[0, :4].numpy(), d_big[0], rtol=1e-4)  # single instance: min = that distance


def test_config_validation_errors():
    with pytest.raises(ValueError, match="pooling"):
        PrototypeMILConfig(pooling=())
    with pytest.raises(ValueError, match="pooling"):
        PrototypeMILConfig(pooling=("median",))
    with pytest.raises(ValueError, match="distance"):
        PrototypeMILConfig(distance="hamming")
    with pytest.raises(ValueError, match="Layer normalisation"):
        PrototypeMILConfig(n_prototypes=1)
    with pytest.raises(ValueError, match="lambda_w"):
        PrototypeMILConfig(lambda_w=float("nan"))
    assert PrototypeMILConfig(n_prototypes=1, layer_norm=False).n_features_out == 1


def test_initialisations():
    gen = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    X = torch.tensor(np.random.default_rng(0).normal(size=(50, 3)))
    normal = init_prototypes(PrototypeMILConfig(n_prototypes=4), 3, gen())
    assert normal.shape == (4, 3)
    torch.testing.assert_close(normal, init_prototypes(PrototypeMILConfig(n_prototypes=4), 3, gen()))
    for init in ("instances", "kmeans++"):
        P = init_prototypes(PrototypeMILConfig(n_prototypes=4, init=init), 3, gen(), X, dtype=torch.float64)
        # every prototype is one of the training instances, and they are distinct
        matches = [(X == p).all(1).any() for p in P]
        assert all(matches)
        assert len({tuple(p.tolist()) for p in P}) == 4
    with pytest.raises(ValueError, match="training instances"):
        init_prototypes(PrototypeMILConfig(init="kmeans++"), 3, gen())


def test_kmeans_seeding_of_a_large_set_is_the_seeding_of_a_uniform_sample(monkeypatch):
    import minitorch_proto.model as model_module

    X = torch.tensor(np.random.default_rng(1).normal(size=(300, 3)))
    config = PrototypeMILConfig(n_prototypes=4, init="kmeans++")
    whole = init_prototypes(config, 3, torch.Generator().manual_seed(2), X, dtype=torch.float64)
    first50 = init_prototypes(config, 3, torch.Generator().manual_seed(2), X[:50], dtype=torch.float64)
    monkeypatch.setattr(model_module, "KMEANS_SAMPLE", 50)
    # At or below the sample size nothing is drawn first: the same prototypes as without a sample.
    assert torch.equal(init_prototypes(config, 3, torch.Generator().manual_seed(2), X[:50], dtype=torch.float64),
                       first50)
    sampled = init_prototypes(config, 3, torch.Generator().manual_seed(2), X, dtype=torch.float64)
    gen = torch.Generator().manual_seed(2)
    rows = torch.randperm(300, generator=gen)[:50]
    # Above it: k-means++ on 50 instances drawn uniformly from the same generator, and nothing else.
    assert torch.equal(sampled, init_prototypes(config, 3, gen, X[rows], dtype=torch.float64))
    assert all((X[rows] == p).all(1).any() for p in sampled)
    assert not torch.equal(sampled, whole)
    # The sample never holds fewer than 8 instances per prototype.
    big = PrototypeMILConfig(n_prototypes=10, init="kmeans++")
    gen = torch.Generator().manual_seed(3)
    rows = torch.randperm(300, generator=gen)[:80]
    assert torch.equal(init_prototypes(big, 3, torch.Generator().manual_seed(3), X, dtype=torch.float64),
                       init_prototypes(big, 3, gen, X[rows], dtype=torch.float64))


class TestCompatibilityModel:
    """Each model-side deviation of the published code, one at a time."""

    def test_compat_config_rows(self):
        c = compat_config()
        assert c.distance == "pseudo"
        assert c.pooling == ("min", "max", "mean")
        assert c.layer_norm is False and c.bias is False
        assert c.prototype_penalty == "pairwise" and c.distance_penalty == "pooled"
        assert PrototypeMILConfig().distance == "euclidean"  # the default stays the paper's

    def test_no_bias_means_no_parameter(self):
        model = PrototypeMIL(3, 2, compat_config(PrototypeMILConfig(n_prototypes=2)))
        assert model.bias is None
        assert set(dict(model.named_parameters())) == {"prototypes", "weight"}

    def test_pairwise_prototype_penalty(self):
        """The published code's term: its pseudo-distance over all D x D pairs, the diagonal included.

        (It had been the sum of Euclidean distances, each pair once: 2.9 times smaller on standard
        normal prototypes, with another gradient.)
        """
        cfg = PrototypeMILConfig(n_prototypes=3, prototype_penalty="pairwise", lambda_p=1.0)
        model = _tiny_model(cfg, n_features=2)
        with torch.no_grad():  # one prototype inside the unit ball, so the diagonal's 2|P| - 2|P|^2 counts
            model.prototypes[0] *= 0.3 / model.prototypes[0].norm()
        P = model.prototypes.detach().numpy()
        n = np.linalg.norm(P, axis=1)
        want = sum(max(n[i] + n[j] - 2 * P[i] @ P[j], 0.0) for i in range(3) for j in range(3))
        assert 2 * n[0] - 2 * n[0] ** 2 > 0.1
        terms = model.loss_terms(BagBatch.from_bags([np.zeros((1, 2))], dtype=torch.float64), torch.tensor([1]))
        assert terms["prototype_penalty"].item() == pytest.approx(want, rel=1e-6)

    def test_distance_penalty_on_every_pooled_feature(self):
        bag = np.array([[0.0, 1.0], [3.0, 0.0]])
        for penalty in ("min", "pooled"):
            cfg = PrototypeMILConfig(n_prototypes=2, pooling=("min", "max", "mean"), distance_penalty=penalty, lambda_d=1.0)
            model = _tiny_model(cfg, n_features=2)
            d = np_dist(bag, model.prototypes.detach().numpy(), "euclidean")
            want = d.min(0).sum() if penalty == "min" else d.min(0).sum() + d.max(0).sum() + d.mean(0).sum()
            terms = model.loss_terms(BagBatch.from_bags([bag], dtype=torch.float64), torch.tensor([1]))
            assert terms["distance_penalty"].item() == pytest.approx(want, rel=1e-10)

    def test_l2_weight_penalty_option(self):
        cfg = PrototypeMILConfig(n_prototypes=2, weight_penalty="l2", lambda_w=1.0)
        model = _tiny_model(cfg, n_features=2)
        terms = model.loss_terms(BagBatch.from_bags([np.zeros((1, 2))], dtype=torch.float64), torch.tensor([1]))
        assert terms["weight_penalty"].item() == pytest.approx(torch.linalg.norm(model.weight.detach()).item(), rel=1e-6)

    def test_prototypes_are_in_state_dict(self):
        # The published code kept prototypes outside the state_dict (lost on save);
        # this implementation deliberately does not reproduce that.
        assert "prototypes" in PrototypeMIL(3, 2).state_dict()


def test_chunked_pooling_equals_unchunked_across_chunk_boundaries():
    cfg = PrototypeMILConfig(n_prototypes=3, pooling=("min", "mean", "max"))
    model = _tiny_model(cfg, n_features=4)
    rng = np.random.default_rng(0)
    bags = [rng.normal(size=(k, 4)) for k in (1, 7, 3, 12, 2)]
    batch = BagBatch.from_bags(bags, dtype=torch.float64)
    with torch.no_grad():
        want_phi, want_pen = model.pooled(batch)
    flat = np.concatenate(bags)
    for chunk in (1, 4, 5, 1000):  # 5 and 4 split bags across chunks
        phi, pen = model.pooled_chunked(flat, batch.bag_index.numpy(), 5, chunk_size=chunk)
        torch.testing.assert_close(phi, want_phi)
        torch.testing.assert_close(pen, want_pen)
    with pytest.raises(ValueError, match="no instances"):
        model.pooled_chunked(flat, batch.bag_index.numpy(), 6, chunk_size=4)


def test_features_chunked_is_features_in_one_pass_with_or_without_the_similarity_block():
    torch.manual_seed(0)
    model = PrototypeMIL(3, config=PrototypeMILConfig(n_prototypes=4, pooling=("min", "mean", "max")))
    bags = [torch.randn(k, 3) for k in (2, 5, 1, 4)]
    batch = BagBatch.from_bags(bags)
    flat, index = batch.instances.numpy(), batch.bag_index.numpy()
    for sigma2 in (None, 2.5):
        if sigma2 is not None:
            model.add_similarity(sigma2)
        for chunk in (1, 3, 100):  # bags spanning chunk boundaries
            torch.testing.assert_close(model.features_chunked(flat, index, 4, chunk_size=chunk), model.features(batch))
    assert model.features(batch).shape == (4, 16)


def test_the_scale_page_names_the_kmeans_sample_the_code_uses():
    from pathlib import Path

    from minitorch_proto.model import KMEANS_SAMPLE

    page = (Path(__file__).resolve().parents[1] / "book" / "scale.md").read_text()
    assert f"max({KMEANS_SAMPLE:,}, 8 x D)" in page
