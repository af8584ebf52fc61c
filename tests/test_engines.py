"""One engine contract: every registered engine trains the reference's models from the same Problem."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from minitorch_proto.model import PrototypeMILConfig
from minitorch_proto.training import TrainConfig
from minitorch_proto.training.engines import ENGINES, Fitted, Problem, fit, register_engine

from .conftest import make_concept_bags


def _problem(init: str = "normal") -> Problem:
    bags, y = make_concept_bags(n_bags=16, n_features=3, seed=4)
    train_sets = (np.arange(0, 12), np.arange(4, 16))
    # A start on an instance puts a prototype at Euclidean distance 0, where each engine guards the
    # square root's gradient in its own way: the squared distance has no kink there.
    distance = "euclidean" if init == "normal" else "sqeuclidean"
    config = PrototypeMILConfig(n_prototypes=3, pooling=("min", "mean"), init=init, distance=distance)
    return Problem(bags, y, train_sets, (3, 8), config,
                   TrainConfig(epochs=2, lr_prototypes=1e-2, lr_classifier=2e-2),
                   lr_classifier=(2e-2, 5e-3), dtype=torch.float64)


@pytest.fixture(scope="module")
def problem():
    return _problem()


@pytest.fixture(scope="module")
def reference(problem):
    return fit(problem, "sequential")


# The data-driven starts draw training instances: the streaming engine reads only the rows drawn,
# and must draw the same ones as the engines that hold every instance.
@pytest.mark.parametrize("init", ["normal", "instances", "kmeans++"])
@pytest.mark.parametrize("engine", sorted(set(ENGINES) - {"sequential"}))
def test_every_engine_gives_the_reference_models(problem, reference, engine, init, one_torch_thread):
    if init != "normal":
        problem = _problem(init)
        reference = fit(problem, "sequential")
    got = fit(problem, engine)
    assert len(got.models) == problem.n_models == len(got.standardizers) == len(got.histories)
    for m in range(problem.n_models):
        ref, mine = reference.models[m].state_dict(), got.models[m].state_dict()
        assert ref.keys() == mine.keys()
        for key in ref:
            np.testing.assert_allclose(mine[key].double().numpy(), ref[key].double().numpy(), atol=1e-5,
                                       err_msg=f"{engine}, model {m}, {key}")
        np.testing.assert_allclose(got.standardizers[m].mean_, reference.standardizers[m].mean_, rtol=1e-9)
        assert len(got.histories[m]) == problem.train_config.epochs


def test_per_model_rates_matter_and_the_problem_is_checked(problem, reference):
    # The two models differ only in data and their own classifier rate: a shared rate would change model 1.
    same_rate = Problem(**{**problem.__dict__, "lr_classifier": None})
    other = fit(same_rate, "sequential")
    assert not torch.allclose(other.models[1].weight, reference.models[1].weight)
    with pytest.raises(ValueError, match="one rate per model"):
        Problem(**{**problem.__dict__, "lr_classifier": (1e-2,)})
    with pytest.raises(ValueError, match="seeds"):
        Problem(**{**problem.__dict__, "seeds": (1,)})
    with pytest.raises(ValueError, match="unknown engine 'nope'"):
        fit(problem, "nope")


def test_a_registered_engine_is_reachable_by_name(problem, monkeypatch):
    calls = []

    def echo(p: Problem) -> Fitted:
        calls.append(p)
        return ENGINES["sequential"](p)

    monkeypatch.setitem(ENGINES, "echo", None)
    register_engine("echo")(echo)
    assert fit(problem, "echo").models and calls == [problem]
