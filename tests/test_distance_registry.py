"""A distance added in one place (``register_distance``) reaches every engine.

The toy distance is the L1.5 "norm" of the difference, which no engine knows by name:
the sequential trainer, the tensor engine, the streaming/distributed trainer and the
estimator must all train with it and agree with the reference, and the compiled engine,
which has kernels for the built-in distances only, must step aside (``backend="auto"``)
or say so in one line (``backend="compiled"``).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from minitorch_proto import distances
from minitorch_proto.estimator import PrototypeMILClassifier
from minitorch_proto.model import PrototypeMIL, PrototypeMILConfig
from minitorch_proto.preprocessing import BagStandardizer
from minitorch_proto.training import TrainConfig, train_batched, train_model
from minitorch_proto.training.distributed import train_streaming

from .conftest import make_concept_bags

TOY = "toy_l15"


def _l15(X: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    diff = X.unsqueeze(-2) - P.unsqueeze(-3)
    return (diff.abs() + 1e-12).pow(1.5).sum(-1).pow(1.0 / 1.5)


@pytest.fixture
def toy_distance(monkeypatch):
    monkeypatch.setitem(distances._REGISTERED, TOY, _l15)
    yield
    # monkeypatch removes the entry again: the registry is as it was for other tests


CONFIG_FIELDS = dict(n_prototypes=3, distance=TOY, pooling=("min", "mean"))
TRAIN = TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=2e-2, batch_size=2)


def _reference(bags, y, seed):
    CONFIG = PrototypeMILConfig(**CONFIG_FIELDS)
    st = BagStandardizer("feature").fit(bags)
    model = PrototypeMIL(bags[0].shape[1], 2, CONFIG, generator=torch.Generator().manual_seed(seed)).double()
    train_model(model, [torch.as_tensor(st.transform_instances(b)) for b in bags], torch.as_tensor(y), TRAIN,
                seed=seed)
    return model


def test_registration_rules():
    with pytest.raises(ValueError, match="built-in"):
        distances.register_distance("euclidean", _l15)
    with pytest.raises(ValueError, match="Unknown distance 'toy_l15'"):
        PrototypeMILConfig(distance=TOY)


def test_the_model_computes_the_registered_distance(toy_distance):
    X, P = torch.randn(5, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    by_hand = torch.tensor([[float(np.sum(np.abs(x - p) ** 1.5) ** (1 / 1.5)) for p in P.numpy()] for x in X.numpy()],
                           dtype=torch.float64)
    torch.testing.assert_close(distances.pairwise_distance(X, P, TOY), by_hand, rtol=1e-6, atol=1e-8)


def test_every_engine_trains_with_a_distance_added_in_one_place(toy_distance, one_torch_thread):
    bags, y = make_concept_bags(n_bags=16, n_features=4, seed=5, min_size=1, max_size=9)
    everything = np.arange(len(bags))
    CONFIG = PrototypeMILConfig(**CONFIG_FIELDS)
    ref = _reference(bags, y, seed=4)
    for backend in ("tensor", "auto"):  # auto on the CPU: the compiled engine steps aside
        fit = train_batched(bags, y, [everything], [4], CONFIG, TRAIN, dtype=torch.float64, device="cpu",
                            backend=backend)
        torch.testing.assert_close(fit.prototypes[0], ref.prototypes.detach(), rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(fit.weight[0], ref.weight.detach(), rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="no kernel for distance 'toy_l15'"):
        train_batched(bags, y, [everything], [4], CONFIG, TRAIN, device="cpu", backend="compiled")
    streamed = train_streaming(bags, y, CONFIG, TRAIN, seed=4, dtype=torch.float64, chunk_size=3)
    torch.testing.assert_close(streamed.model.prototypes.detach(), ref.prototypes.detach(), rtol=1e-8, atol=1e-10)
    clf = PrototypeMILClassifier(n_prototypes=3, distance=TOY, pooling=("min", "mean"), epochs=3, batch_size=2,
                                 lr_prototypes=1e-2, lr_classifier=2e-2, random_state=4).fit(bags, y)
    assert clf.predict_proba(bags).shape == (len(bags), 2)
    assert np.isfinite(clf.predict_proba(bags)).all()


def test_every_engine_of_the_contract_picks_up_the_distance(toy_distance, one_torch_thread):
    # Through the one engine contract: the same Problem, every registered engine by name.
    from minitorch_proto.training.engines import ENGINES, Problem, fit

    bags, y = make_concept_bags(n_bags=12, n_features=3, seed=6, min_size=1, max_size=7)
    problem = Problem(bags, y, (np.arange(len(bags)),), (4,), PrototypeMILConfig(**CONFIG_FIELDS), TRAIN,
                      dtype=torch.float64)
    ref = fit(problem, "sequential").models[0]
    assert ref.config.distance == TOY
    for engine in ENGINES:
        if engine == "compiled":  # kernels for the built-in distances only, and it says so
            with pytest.raises(ValueError, match="no kernel for distance 'toy_l15'"):
                fit(problem, engine)
            continue
        got = fit(problem, engine).models[0]
        torch.testing.assert_close(got.prototypes.detach(), ref.prototypes.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got.weight.detach(), ref.weight.detach(), rtol=1e-5, atol=1e-6)
