"""The neural baselines compute the published equations: a NumPy forward pass written from the
papers (Ilse et al. 2018 for (gated) attention, Wang et al. 2018 for mi-Net / MI-Net), fed the
fitted package model's weights, gives the same bag probabilities, attention weights and
instance scores on random bags. Shares no code with ``minitorch_proto.baselines``."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, softmax

from minitorch_proto.baselines import BASELINES


def _weights(est) -> dict[str, np.ndarray]:
    return {k: v.detach().double().numpy() for k, v in est.network_.state_dict().items()}


def _embed(w: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """h = ReLU(W3 ReLU(W2 ReLU(W1 x + b1) + b2) + b3): the Linear layers of ``embed``, in order."""
    layers = sorted({int(k.split(".")[1]) for k in w if k.startswith("embed.")})
    assert len(layers) == 3, "expected the 256-128-64 embedding (three Linear layers)"
    h = x
    for i in layers:
        h = np.maximum(h @ w[f"embed.{i}.weight"].T + w[f"embed.{i}.bias"], 0.0)
    return h


def _attention_reference(w, bag, gated):
    """Ilse et al. (2018), eqs. 8-9: a_k = softmax_k(w^T (tanh(V h_k) [* sigm(U h_k)])), z = sum a_k h_k."""
    h = _embed(w, bag)
    e = np.tanh(h @ w["att_v.weight"].T + w["att_v.bias"])
    if gated:
        e = e * expit(h @ w["att_u.weight"].T + w["att_u.bias"])
    a = softmax((e @ w["att_w.weight"].T).ravel() + w["att_w.bias"][0])
    z = a @ h
    return expit(z @ w["classifier.weight"][0] + w["classifier.bias"][0]), a


def _minet_reference(w, bag, pooling):
    """Wang et al. (2018): MI-Net pools the embedding, then a sigmoid unit."""
    h = _embed(w, bag)
    z = h.max(axis=0) if pooling == "max" else h.mean(axis=0)
    return expit(z @ w["classifier.weight"][0] + w["classifier.bias"][0])


def _mi_net_reference(w, bag, pooling):
    """Wang et al. (2018): mi-Net scores each instance with a sigmoid unit, then pools the scores."""
    p = expit(_embed(w, bag) @ w["scorer.weight"][0] + w["scorer.bias"][0])
    return (p.max() if pooling == "max" else p.mean()), p


@pytest.fixture(scope="module")
def bags():
    rng = np.random.default_rng(7)
    train = [rng.normal(size=(int(rng.integers(1, 9)), 6)) for _ in range(16)]
    y = np.arange(16) % 2
    for b, label in zip(train, y):
        b[0] += 2.0 * label
    test = [rng.normal(scale=1.5, size=(k, 6)) for k in (1, 2, 5, 9, 13)]
    return train, y, test


def _fit(name, bags):
    train, y, _ = bags
    # A few epochs so the weights are trained, not just initialised; float64 for tight tolerances.
    return BASELINES[name](0).set_params(n_epochs=3, dtype="float64").fit(train, y)


@pytest.mark.parametrize("name", ["attention", "gated_attention"])
def test_attention_models_follow_ilse_equations(name, bags):
    est = _fit(name, bags)
    w = _weights(est)
    assert ("att_u.weight" in w) == (name == "gated_attention")
    test = bags[2]
    proba = est.predict_proba(test)[:, 1]
    for bag, p in zip(test, proba):
        ref_p, ref_a = _attention_reference(w, bag, gated=name == "gated_attention")
        np.testing.assert_allclose(p, ref_p, rtol=0, atol=1e-12)
        np.testing.assert_allclose(est.attention_weights(bag), ref_a, rtol=0, atol=1e-12)
    # The check is not vacuous: attention is far from uniform on some bag.
    assert max(np.ptp(est.attention_weights(b)) for b in test) > 1e-3


@pytest.mark.parametrize("name", ["MI_net_max", "MI_net_mean", "mi_net_max", "mi_net_mean"])
def test_mi_nets_follow_wang_equations(name, bags):
    est = _fit(name, bags)
    w = _weights(est)
    pooling = name.split("_")[-1]
    test = bags[2]
    proba = est.predict_proba(test)[:, 1]
    for bag, p in zip(test, proba):
        if name.startswith("MI"):
            np.testing.assert_allclose(p, _minet_reference(w, bag, pooling), rtol=0, atol=1e-12)
        else:
            ref_p, ref_inst = _mi_net_reference(w, bag, pooling)
            np.testing.assert_allclose(p, ref_p, rtol=0, atol=1e-12)
            np.testing.assert_allclose(est.instance_scores(bag), ref_inst, rtol=0, atol=1e-12)
    assert np.ptp(proba) > 1e-3
