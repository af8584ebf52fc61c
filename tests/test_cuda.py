"""The CUDA path: the tensor engine, the estimator and the streaming trainer on a GPU match the CPU.

Every test here skips on a machine without CUDA (CI is CPU-only). The bf16 autocast
option, which also runs on the CPU, is tested in tests/test_distributed.py.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from minitorch_proto.estimator import PrototypeMILClassifier
from minitorch_proto.model import PrototypeMILConfig
from minitorch_proto.training import TrainConfig, train_batched
from minitorch_proto.training.distributed import train_streaming

from .conftest import make_concept_bags

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

MODEL = PrototypeMILConfig(n_prototypes=4, pooling=("min", "mean"))
TRAIN = TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=2e-2, batch_size=2)


def _problem():
    return make_concept_bags(n_bags=24, n_features=6, seed=7, min_size=1, max_size=30)


def test_tensor_engine_cuda_equals_cpu():
    bags, y = _problem()
    # make_concept_bags alternates the labels, so halves by position hold both classes.
    train = [np.arange(0, 12), np.arange(12, 24), np.arange(24)]
    kw = dict(seeds=[0, 1, 2], model_config=MODEL, train_config=TRAIN, backend="tensor", dtype=torch.float64,
              eval_sets=[np.arange(24)] * 3)
    cpu = train_batched(bags, y, train, device="cpu", **kw)
    gpu = train_batched(bags, y, train, device="cuda", **kw)
    torch.testing.assert_close(gpu.prototypes.cpu(), cpu.prototypes, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(gpu.weight.cpu(), cpu.weight, rtol=1e-9, atol=1e-10)
    last = int(TRAIN.epochs)
    for a, b in zip(gpu.evaluations[last], cpu.evaluations[last]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_estimator_on_cuda_matches_cpu():
    bags, y = _problem()
    params = dict(n_prototypes=4, epochs=3, lr_prototypes=1e-2, lr_classifier=1e-2, backend="tensor", random_state=3)
    gpu = PrototypeMILClassifier(device="cuda", **params).fit(bags, y)
    cpu = PrototypeMILClassifier(device="cpu", **params).fit(bags, y)
    # float32 on two devices: reductions run in different orders.
    np.testing.assert_allclose(gpu.predict_proba(bags), cpu.predict_proba(bags), rtol=1e-3, atol=1e-4)
    assert (gpu.predict(bags) == cpu.predict(bags)).mean() >= 0.95


def test_streaming_trainer_on_cuda_matches_cpu_and_bf16_runs():
    bags, y = _problem()
    kw = dict(seed=1, dtype=torch.float64, chunk_size=7)
    gpu = train_streaming(bags, y, MODEL, TRAIN, device="cuda", **kw)
    cpu = train_streaming(bags, y, MODEL, TRAIN, device="cpu", **kw)
    for k, v in cpu.model.state_dict().items():
        torch.testing.assert_close(gpu.model.state_dict()[k], v, rtol=1e-9, atol=1e-10)
    bf16 = train_streaming(bags, y, MODEL, TRAIN, device="cuda", seed=1, autocast="bf16")
    assert torch.isfinite(bf16.model.prototypes).all()


def test_bf16_tensor_engine_on_cuda_is_close_to_float32():
    bags, y = _problem()
    kw = dict(seeds=[0], model_config=MODEL, train_config=TRAIN, backend="tensor", device="cuda")
    fp32 = train_batched(bags, y, [np.arange(24)], **kw)
    bf16 = train_batched(bags, y, [np.arange(24)], autocast="bf16", **kw)
    assert 0 < float((fp32.prototypes - bf16.prototypes).abs().max()) < 0.1


def test_recommended_model_on_cuda_pushes_onto_the_same_instances_as_on_the_cpu():
    bags, y = _problem()
    params = dict(n_prototypes=8, epochs=2, random_state=3)
    gpu = PrototypeMILClassifier.recommended(device="cuda", **params).fit(bags, y)
    cpu = PrototypeMILClassifier.recommended(device="cpu", **params).fit(bags, y)
    # k-means++ draws on the CPU either way; float32 training on two devices may move a prototype past a tie.
    agree = (gpu.prototype_sources_ == cpu.prototype_sources_).all(-1).mean()
    assert agree >= 0.95
    std = gpu.standardizer_.transform(bags)
    for p, (b, i) in zip(gpu.model_.prototypes.detach().cpu().numpy(), gpu.prototype_sources_[0]):
        np.testing.assert_allclose(p, std[b][i], rtol=1e-6, atol=1e-6)
    if agree == 1.0:  # same instances: the convex head (fitted on the CPU) sees the same features
        assert gpu.head_features_ == cpu.head_features_ and gpu.head_C_ == cpu.head_C_
        np.testing.assert_allclose(gpu.predict_proba(bags), cpu.predict_proba(bags), rtol=1e-3, atol=1e-4)
