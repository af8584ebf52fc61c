"""The streaming trainer: chunked distances, single-process equality with the reference trainer,
and two-process gloo training equal to single-process training with the same global batch."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from sklearn.base import clone

from minitorch_proto.bags import BagBatch
from minitorch_proto.model import PrototypeMIL, PrototypeMILConfig
from minitorch_proto.training import TrainConfig, train_model
from minitorch_proto.training.distributed import chunked_pool, train_streaming

from .conftest import make_concept_bags

REPO = Path(__file__).resolve().parents[1]
CONFIGS = {
    "paper": PrototypeMILConfig(n_prototypes=3),
    "min+mean+max, sqeuclidean": PrototypeMILConfig(n_prototypes=3, pooling=("min", "mean", "max"),
                                                    distance="sqeuclidean"),
    "cosine, pooled penalty": PrototypeMILConfig(n_prototypes=3, pooling=("max", "mean"), distance="cosine",
                                                 distance_penalty="pooled"),
    "monotone variant": PrototypeMILConfig(n_prototypes=3, pooling=("min",), layer_norm=False, monotone=True),
}
TRAIN = TrainConfig(epochs=3, batch_size=4, lr_prototypes=1e-2, lr_classifier=2e-2)


def _problem():
    return make_concept_bags(n_bags=16, n_features=4, seed=5, min_size=1, max_size=11)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_chunked_pool_matches_autograd_on_the_whole_bag(name):
    config = CONFIGS[name]
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.normal(size=(23, 4)))
    model = PrototypeMIL(4, 2, config, generator=torch.Generator().manual_seed(1)).double()
    phi, pen = model.pooled(BagBatch.from_bags([X], dtype=torch.float64))
    g_phi, g_pen = torch.randn_like(phi), torch.randn_like(pen)
    ref = torch.autograd.grad((phi * g_phi).sum() + (pen * g_pen).sum(), model.prototypes)[0]
    phi_c, pen_c = chunked_pool(model.prototypes, lambda a, b: X[a:b], len(X), config, chunk_size=5)
    got = torch.autograd.grad((phi_c * g_phi).sum() + (pen_c * g_pen).sum(), model.prototypes)[0]
    torch.testing.assert_close(phi_c, phi.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(pen_c, pen.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)


def _reference(bags, y, config, tconf, seed, standardizer):
    """The sequential trainer on the same standardised bags, from the same initial parameters."""
    tb = [torch.as_tensor(standardizer.transform_instances(b)) for b in bags]
    model = PrototypeMIL(bags[0].shape[1], 2, config, generator=torch.Generator().manual_seed(seed)).double()
    train_model(model, tb, torch.as_tensor(y), tconf, seed=seed)
    return {k: v.detach() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_single_process_streaming_equals_the_reference_trainer(name, one_torch_thread):
    bags, y = _problem()
    fit = train_streaming(bags, y, CONFIGS[name], TRAIN, seed=2, dtype=torch.float64, chunk_size=3)
    ref = _reference(bags, y, CONFIGS[name], TRAIN, 2, fit.standardizer)
    for k, v in ref.items():
        torch.testing.assert_close(fit.model.state_dict()[k], v, rtol=1e-9, atol=1e-11)


def test_chunk_size_and_bf16_autocast(one_torch_thread):
    bags, y = _problem()
    config = CONFIGS["paper"]
    small = train_streaming(bags, y, config, TRAIN, seed=1, dtype=torch.float64, chunk_size=2)
    large = train_streaming(bags, y, config, TRAIN, seed=1, dtype=torch.float64, chunk_size=10_000)
    for k, v in large.model.state_dict().items():
        torch.testing.assert_close(small.model.state_dict()[k], v, rtol=1e-10, atol=1e-12)
    bf16 = train_streaming(bags, y, config, TRAIN, seed=1, autocast="bf16")
    fp32 = train_streaming(bags, y, config, TRAIN, seed=1)
    diff = (bf16.model.prototypes - fp32.model.prototypes).abs().max()
    # bf16 products round to ~3 significant digits: close to float32, but not equal.
    assert 0 < float(diff) < 0.1
    with pytest.raises(ValueError, match="autocast"):
        train_streaming(bags, y, config, TRAIN, autocast="fp8")


class _CountingBags(list):
    """Array bags that count the instances read through ``rows`` (as a bag folder is read)."""

    read = 0

    @property
    def sizes(self):
        return [len(b) for b in self]

    def rows(self, i, start, stop):
        self.read += stop - start
        return self[i][start:stop]


def test_streamed_instances_are_the_stacked_instances_read_when_needed():
    from minitorch_proto.bags import StackedInstances
    from minitorch_proto.preprocessing import BagStandardizer
    from minitorch_proto.training.distributed import StreamedInstances

    bags, _ = _problem()
    std = BagStandardizer("feature").fit(bags)
    stacked = StackedInstances(std.transform_stacked(bags), [len(b) for b in bags])
    lazy = _CountingBags(bags)
    streamed = StreamedInstances(lazy, std, chunk_size=2)
    assert len(streamed) == len(stacked) == sum(len(b) for b in bags)
    idx = np.random.default_rng(0).permutation(len(stacked))[:9]  # unsorted, across bags and chunks
    np.testing.assert_array_equal(streamed[idx], stacked[idx])
    assert lazy.read < len(stacked)  # chunks without a drawn row are not read
    rebuilt = np.zeros_like(stacked.instances)
    ends = np.cumsum(stacked.sizes) - stacked.sizes
    for b, first, rows in streamed.pieces():
        assert len(rows) <= 2
        rebuilt[ends[b] + first: ends[b] + first + len(rows)] = rows
    np.testing.assert_array_equal(rebuilt, stacked.instances)
    groups = list(streamed.groups())
    assert len(groups) > 1
    np.testing.assert_array_equal(np.concatenate([g[0] for g in groups]), np.arange(len(bags)))
    np.testing.assert_array_equal(np.concatenate([g[1] for g in groups]), stacked.instances)
    for ids, rows, local in groups:
        np.testing.assert_array_equal(np.bincount(local, minlength=len(ids)), stacked.sizes[ids])
    with pytest.raises(IndexError, match="out of range"):
        streamed[[len(stacked)]]


def test_a_data_driven_start_reads_only_the_instances_it_draws(monkeypatch):
    import minitorch_proto.model as model_module
    from minitorch_proto.distances import median_pairwise_distance
    from minitorch_proto.model import init_prototypes
    from minitorch_proto.preprocessing import BagStandardizer
    from minitorch_proto.training.distributed import StreamedInstances

    bags, _ = make_concept_bags(n_bags=30, n_features=4, seed=3, min_size=5, max_size=12)
    std = BagStandardizer("feature").fit(bags)
    stacked = std.transform_stacked(bags)
    monkeypatch.setattr(model_module, "KMEANS_SAMPLE", 24)  # the sampled path, on a small set
    for init in ("instances", "kmeans++"):
        config = PrototypeMILConfig(n_prototypes=3, init=init)
        lazy = _CountingBags(bags)
        got = init_prototypes(config, 4, torch.Generator().manual_seed(5), StreamedInstances(lazy, std, 4))
        want = init_prototypes(config, 4, torch.Generator().manual_seed(5), stacked)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert 0 < lazy.read < len(stacked)
    assert median_pairwise_distance(StreamedInstances(bags, std), max_samples=50, random_state=2) == \
        median_pairwise_distance(stacked, max_samples=50, random_state=2)


@pytest.mark.parametrize("chunk_size", [3, 65_536])
def test_fit_streaming_gives_fits_recommended_model(tmp_path, chunk_size, one_torch_thread):
    from minitorch_proto.data.disk import DiskBagDataset, write_bag_folder
    from minitorch_proto.estimator import PrototypeMILClassifier

    bags, y = make_concept_bags(n_bags=30, n_features=5, seed=7)
    data = DiskBagDataset(tmp_path, write_bag_folder(tmp_path, bags, y, fmt="npy"))
    settings = dict(n_prototypes=6, epochs=3, n_seeds=2, random_state=3, chunk_size=chunk_size)
    held = PrototypeMILClassifier.recommended(**settings).fit(bags, y)
    streamed = PrototypeMILClassifier.recommended(**settings).fit_streaming(data, data.y)
    assert len(streamed.models_) == 2
    # The same instances drawn, pushed onto and chosen as the head's features and strength.
    np.testing.assert_array_equal(streamed.prototype_sources_, held.prototype_sources_)
    assert streamed.head_C_ == held.head_C_ and streamed.head_features_ == held.head_features_
    np.testing.assert_allclose(streamed.predict_proba(bags), held.predict_proba(bags), atol=1e-6)
    for j in range(2):  # each pushed prototype is its source instance, as fit's are
        b, i = streamed.prototype_sources_[j, 0]
        np.testing.assert_allclose(streamed.models_[j].prototypes[0].double().numpy(),
                                   streamed.standardizer_.transform_instances(bags[b])[i], rtol=1e-6)
    # The paper's model honours n_seeds too: one member per seed, each the fit alone of its seed.
    paper = PrototypeMILClassifier(n_prototypes=3, epochs=2, n_seeds=2, random_state=1)
    members = clone(paper).fit_streaming(bags, y).models_
    assert len(members) == 2
    alone = clone(paper).set_params(n_seeds=1, random_state=2).fit_streaming(bags, y)
    torch.testing.assert_close(members[1].prototypes, alone.model_.prototypes, rtol=0, atol=0)


def _recommended():
    from minitorch_proto.estimator import PrototypeMILClassifier

    return PrototypeMILClassifier.recommended(n_prototypes=4, batch_size=5, chunk_size=4, random_state=1)


def _rank_main(rank: int, world: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        bags, y = _problem()
        # Global minibatches of 5, 5, 5 and 1 bags: uneven shards (3 + 2), and a last step in
        # which rank 1 holds no bag and contributes only zeros to the all-reduce.
        tconf = TrainConfig(epochs=3, batch_size=5, lr_prototypes=1e-2, lr_classifier=2e-2)
        fit = train_streaming(bags, y, CONFIGS["min+mean+max, sqeuclidean"], tconf, seed=2, dtype=torch.float64,
                              chunk_size=4)
        # The recommended model: every rank draws the same k-means++ start, pushes onto the same
        # instances and fits the same heads, so all hold the one-process model.
        rec = _recommended().fit_streaming(bags, y, dtype=torch.float64)
        # Bags 1 and 2 are equal and nearest; process 0 reads bags 0 and 2, process 1 bag 1: the tie
        # goes to bag 1, as in one process, not to the first process's.
        from minitorch_proto.convex_head import nearest_instances
        from minitorch_proto.preprocessing import BagStandardizer
        from minitorch_proto.training.distributed import StreamedInstances

        twins = StreamedInstances([np.full((2, 3), 5.0), np.ones((2, 3)), np.ones((2, 3))], BagStandardizer("none"))
        _, twin_sources = twins.nearest_across(*nearest_instances(np.zeros((1, 3)), twins.pieces()))
        torch.save({"state": fit.model.state_dict(), "mean": fit.standardizer.mean_, "scale": fit.standardizer.scale_,
                    "history": fit.history, "rec_proba": rec.predict_proba(bags),
                    "rec_sources": rec.prototype_sources_, "rec_C": rec.head_C_, "twin_sources": twin_sources},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_two_gloo_processes_equal_single_process_training(tmp_path, one_torch_thread):
    # fork: the children inherit the imported package instead of importing it again (seconds each);
    # building one optimizer first imports what torch.optim pulls in lazily (torch._dynamo, ~3 s).
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    mp.start_processes(_rank_main, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True, start_method="fork")
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    bags, y = _problem()
    config = CONFIGS["min+mean+max, sqeuclidean"]
    tconf = TrainConfig(epochs=3, batch_size=5, lr_prototypes=1e-2, lr_classifier=2e-2)
    single = train_streaming(bags, y, config, tconf, seed=2, dtype=torch.float64, chunk_size=4)
    # Statistics merged from the two ranks' shards equal the single pass.
    np.testing.assert_allclose(ranks[0]["mean"], single.standardizer.mean_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ranks[0]["scale"], single.standardizer.scale_, rtol=1e-12)
    ref = _reference(bags, y, config, tconf, 2, single.standardizer)
    for k, v in single.model.state_dict().items():
        torch.testing.assert_close(ranks[0]["state"][k], ranks[1]["state"][k], rtol=0, atol=0)
        torch.testing.assert_close(ranks[0]["state"][k], v, rtol=1e-9, atol=1e-11)
        torch.testing.assert_close(ranks[0]["state"][k], ref[k], rtol=1e-9, atol=1e-11)
    for a, b in zip(ranks[0]["history"], single.history):
        assert a["total"] == pytest.approx(b["total"], rel=1e-9)
    rec = _recommended().fit_streaming(bags, y, dtype=torch.float64)
    for r in range(2):
        np.testing.assert_array_equal(ranks[r]["twin_sources"], [[1, 0]])
        np.testing.assert_array_equal(ranks[r]["rec_sources"], rec.prototype_sources_)
        assert ranks[r]["rec_C"] == rec.head_C_
        np.testing.assert_allclose(ranks[r]["rec_proba"], rec.predict_proba(bags), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("model_flags", [[], ["--recommended", "--chunk-size", "4"]], ids=["paper", "recommended"])
def test_torchrun_launches_the_cli(tmp_path, model_flags):
    from minitorch_proto.data.disk import DiskBagDataset, write_bag_folder
    from minitorch_proto.estimator import PrototypeMILClassifier, load_model

    bags, y = _problem()
    folder = tmp_path / "bags"
    labels = write_bag_folder(folder, bags, y, fmt="npy")
    model = tmp_path / "model.safetensors"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
           "-m", "minitorch_proto", "train", "--bags-dir", str(folder), "--labels", str(labels), "--epochs", "2",
           "--prototypes", "3", "--batch-size", "4", "--device", "cpu", *model_flags, "--out", str(model)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "2 processes" in out.stdout and model.exists()
    clf = load_model(model)
    assert clf.predict_proba(bags).shape == (len(bags), 2)
    if model_flags:  # the model one process streams, pushed onto the same instances
        data = DiskBagDataset(folder, labels)
        one = PrototypeMILClassifier.recommended(n_prototypes=3, epochs=2, batch_size=4, chunk_size=4,
                                                 random_state=0).fit_streaming(data, data.y)
        np.testing.assert_array_equal(clf.prototype_sources_, one.prototype_sources_)
        np.testing.assert_allclose(clf.predict_proba(bags), one.predict_proba(bags), atol=1e-5)


def test_bf16_autocast_in_the_tensor_engine(one_torch_thread):
    from minitorch_proto.training import train_batched

    bags, y = _problem()
    kw = dict(seeds=[0], model_config=PrototypeMILConfig(n_prototypes=3), train_config=TRAIN, device="cpu")
    fp32 = train_batched(bags, y, [np.arange(len(bags))], backend="tensor", **kw)
    bf16 = train_batched(bags, y, [np.arange(len(bags))], autocast="bf16", **kw)  # "auto" picks the tensor engine
    diff = float((fp32.prototypes - bf16.prototypes).abs().max())
    assert 0 < diff < 0.1
    with pytest.raises(ValueError, match="tensor engine"):
        train_batched(bags, y, [np.arange(len(bags))], autocast="bf16", backend="compiled", **kw)


# ------------------------------------------------------------- from the large-data audit (2026-11-27)
def _rank_disagree(rank: int, world: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    from minitorch_proto.estimator import PrototypeMILClassifier

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        bags, y = _problem()
        # random_state=None draws a seed per process: rank 0's is taken, so both hold one model.
        fresh = PrototypeMILClassifier(n_prototypes=3, epochs=2, batch_size=4, random_state=None,
                                       device="cpu").fit_streaming(bags, y, dtype=torch.float64)
        # Each process passing its own shard (the DistributedSampler habit) is refused on every process.
        try:
            PrototypeMILClassifier(n_prototypes=3, epochs=1, batch_size=4, device="cpu").fit_streaming(
                bags[: 9 - rank], y[: 9 - rank])
            refused = ""
        except ValueError as exc:
            refused = str(exc)
        torch.save({"prototypes": fresh.model_.prototypes.detach(), "seed": fresh.seed_, "refused": refused},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_processes_take_rank_0s_seed_and_refuse_different_collections(tmp_path, one_torch_thread):
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    mp.start_processes(_rank_disagree, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True,
                       start_method="fork")
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    assert ranks[0]["seed"] == ranks[1]["seed"]  # they drew 3.47 apart with a seed each
    torch.testing.assert_close(ranks[0]["prototypes"], ranks[1]["prototypes"], rtol=0, atol=0)
    for r in ranks:
        assert "process 1 holds 8 bags" in r["refused"] and "whole collection" in r["refused"]


def test_auto_under_torchrun_takes_a_gpu_per_process_or_the_cpu_for_all(monkeypatch):
    from minitorch_proto.training.distributed import process_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    # One GPU, two processes: the second found no device ("invalid device ordinal") with auto.
    assert process_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match="needs 2 GPUs; it has 1"):
        process_device("cuda")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert process_device("auto") == torch.device("cuda", 1)
    assert process_device("cpu") == torch.device("cpu")


def test_other_commands_refuse_to_run_once_per_process(tmp_path, capsys, monkeypatch):
    from minitorch_proto.cli import main

    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun sets it: predict printed its CSV twice
    assert main(["predict", "--model", str(tmp_path / "m.safetensors"), "--csv", str(tmp_path / "x.csv")]) == 2
    assert "predict runs as one process; only train shares its work under torchrun" in capsys.readouterr().err


def test_the_streaming_engine_keeps_a_bag_folder_lazy(tmp_path, monkeypatch):
    from minitorch_proto.data.disk import DiskBagDataset, write_bag_folder
    from minitorch_proto.training import distributed, engines

    bags, y = _problem()
    labels = write_bag_folder(tmp_path / "bags", bags, y, fmt="npy")
    data = DiskBagDataset(tmp_path / "bags", labels)
    seen = []
    real = distributed.train_streaming
    monkeypatch.setattr(distributed, "train_streaming", lambda b, *a, **k: seen.append(b) or real(b, *a, **k))
    problem = engines.Problem(data, np.asarray(y), (np.arange(10),), (0,), CONFIGS["paper"], TRAIN, device="cpu")
    fitted = engines.fit(problem, "streaming")
    assert hasattr(seen[0], "rows") and len(seen[0]) == 10  # it read all 16 bags into a list first
    in_memory = engines.fit(engines.Problem(list(bags), np.asarray(y), (np.arange(10),), (0,), CONFIGS["paper"],
                                            TRAIN, device="cpu"), "streaming")
    torch.testing.assert_close(fitted.models[0].prototypes, in_memory.models[0].prototypes)


def test_a_feature_far_from_zero_is_centred_as_fit_centres_it(one_torch_thread):
    # Centred in float32, 1e5 + N(0, 1) kept 2 digits: the streamed prototypes were 6e-3 from fit's.
    from minitorch_proto.estimator import PrototypeMILClassifier

    rng = np.random.default_rng(0)
    bags = [rng.normal(size=(5, 2)) + 1e5 for _ in range(12)]
    y = np.arange(12) % 2
    for bag, label in zip(bags, y):
        bag[0] += 3.0 * label
    params = dict(n_prototypes=2, epochs=3, batch_size=4, random_state=0, device="cpu", lr_prototypes=1e-2,
                  lr_classifier=1e-2)
    held = PrototypeMILClassifier(**params).fit(bags, y)
    streamed = PrototypeMILClassifier(**params).fit_streaming(bags, y)
    gap = (held.model_.prototypes.detach().double() - streamed.model_.prototypes.detach().double()).abs().max()
    assert float(gap) < 1e-5
