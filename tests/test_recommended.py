"""The recommended model's ingredients: pushed prototypes that are real instances, a convex head, class weights."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.base import clone

from minitorch_proto.convex_head import HEAD_CS, HeadWorkers, fit_convex_head, push_prototypes
from minitorch_proto.estimator import RECOMMENDED, PrototypeMILClassifier, load_model

from .conftest import make_concept_bags

FAST = dict(n_prototypes=6, epochs=3, n_seeds=1)  # one model unless a test asks for members


@pytest.fixture
def data():
    return make_concept_bags(n_bags=40, n_features=5, seed=7)


def test_push_copies_the_nearest_instance():
    rng = np.random.default_rng(0)
    bags = [rng.normal(size=(k, 3)) for k in (4, 1, 6)]
    P = rng.normal(size=(5, 3))
    pushed, src = push_prototypes(P, bags)
    everything = np.concatenate(bags)
    for d in range(5):
        nearest = everything[np.argmin(((everything - P[d]) ** 2).sum(1))]
        np.testing.assert_array_equal(pushed[d], nearest)
        np.testing.assert_array_equal(pushed[d], bags[src[d, 0]][src[d, 1]])


def test_push_goes_by_the_models_own_distance():
    # The prototype [10, 0] is nearest to [5, 0.5] as a point and to [1, 0] as a direction.
    bags = [np.array([[1.0, 0.0], [5.0, 0.5]]), np.array([[-3.0, 4.0]])]
    P = np.array([[10.0, 0.0], [-2.0, 3.0]])
    assert push_prototypes(P, bags)[1].tolist() == [[0, 1], [1, 0]]
    pushed, src = push_prototypes(P, bags, metric="cosine")
    assert src.tolist() == [[0, 0], [1, 0]]
    np.testing.assert_array_equal(pushed, [[1.0, 0.0], [-3.0, 4.0]])


def test_the_estimator_pushes_by_its_distance(data):
    """The trained prototypes (the last epoch's, before the push) go to their nearest instance in cosine
    distance, the recommended model's; a rate large enough to move them makes the Euclidean choice differ."""
    from minitorch_proto.distances import pairwise_distance

    bags, y = data
    last = {}
    clf = PrototypeMILClassifier.recommended(random_state=0, **{**FAST, "lr_prototypes": 0.3})
    clf.fit(bags, y, on_epoch_end=lambda epoch, model: last.update(P=model.prototypes.detach().double().clone()))
    X = torch.as_tensor(np.concatenate(clf.standardizer_.transform(bags)))
    first = np.cumsum([0] + [len(b) for b in bags])[clf.prototype_sources_[0][:, 0]]
    chosen = first + clf.prototype_sources_[0][:, 1]
    assert clf.distance == "cosine"
    np.testing.assert_array_equal(chosen, pairwise_distance(X, last["P"], "cosine").numpy().argmin(0))
    assert (chosen != pairwise_distance(X, last["P"], "euclidean").numpy().argmin(0)).any()


def test_every_pushed_prototype_is_the_training_instance_its_source_names(data):
    bags, y = data
    clf = PrototypeMILClassifier.recommended(random_state=3, **{**FAST, "n_seeds": 2}).fit(bags, y)
    assert clf.prototype_sources_.shape == (2, 6, 2)
    std = clf.standardizer_.transform(bags)
    for j, model in enumerate(clf.models_):
        P = model.prototypes.detach().numpy()
        for d, (b, k) in enumerate(clf.prototype_sources_[j]):
            np.testing.assert_array_equal(P[d], std[b][k].astype(P.dtype))
    assert all(c in HEAD_CS for c in clf.head_C_)


def test_recommended_is_an_ordinary_estimator(data, tmp_path):
    bags, y = data
    small = dict(n_prototypes=6, epochs=3)  # the shipped member count: a seed ensemble
    clf = PrototypeMILClassifier.recommended(**small)
    assert clone(clf).get_params() == clf.get_params()
    for key, value in RECOMMENDED.items():
        if key not in small:
            assert clf.get_params()[key] == value
    clf.fit(bags, y)
    assert len(clf.models_) == RECOMMENDED["n_seeds"] > 1
    again = PrototypeMILClassifier.recommended(**small).fit(bags, y)
    np.testing.assert_array_equal(clf.predict_proba(bags), again.predict_proba(bags))  # same seed, same model
    path = clf.save(tmp_path / "rec.safetensors")
    loaded = load_model(path)
    np.testing.assert_allclose(loaded.predict_proba(bags), clf.predict_proba(bags), rtol=1e-6)
    np.testing.assert_array_equal(loaded.prototype_sources_, clf.prototype_sources_)


def test_class_weights_equal_duplicated_bags():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 4))
    y = (X[:, 0] + 0.5 * rng.normal(size=30) > 0.3).astype(int)
    w, b, *_ = fit_convex_head(X, y, 2, Cs=[1.0], class_weight={1: 2.0})
    twice = np.concatenate([X, X[y == 1]]), np.concatenate([y, y[y == 1]])
    # Duplicating moves the standardisation statistics; feed the weighted fit the same ones.
    mean, scale = twice[0].mean(0), twice[0].std(0)
    w2, b2, *_ = fit_convex_head(*twice, 2, Cs=[1.0])
    Z = (X - mean) / scale
    from sklearn.linear_model import LogisticRegression

    ref = LogisticRegression(C=1.0, solver="liblinear", class_weight={1: 2.0}, max_iter=5000).fit(Z, y)
    dup = LogisticRegression(C=1.0, solver="liblinear", max_iter=5000).fit((twice[0] - mean) / scale, twice[1])
    np.testing.assert_allclose(ref.coef_, dup.coef_, rtol=1e-4, atol=1e-6)
    # and the package's head is that weighted fit, with its scaling folded into the weights
    np.testing.assert_allclose(w2 @ X.T + b2, (dup.coef_ @ Z.T + dup.intercept_), rtol=1e-6, atol=1e-8)
    # The package's weighted head is scikit-learn's weighted fit on its own standardisation of X (the weights
    # reach the solver), and differs from the unweighted head on these bags.
    assert w.shape == (1, 4) and b.shape == (1,)
    Zx = (X - X.mean(0)) / X.std(0)
    own = LogisticRegression(C=1.0, solver="liblinear", class_weight={1: 2.0}, max_iter=5000).fit(Zx, y)
    np.testing.assert_allclose(w @ X.T + b, own.coef_ @ Zx.T + own.intercept_, rtol=1e-6, atol=1e-8)
    w0, b0, *_ = fit_convex_head(X, y, 2, Cs=[1.0])
    assert np.abs((w @ X.T + b) - (w0 @ X.T + b0)).max() > 0.05


def test_head_options_are_checked(data):
    bags, y = data
    with pytest.raises(ValueError, match="class_weight needs head='logistic'"):
        PrototypeMILClassifier(class_weight="balanced", **FAST).fit(bags, y)
    with pytest.raises(ValueError, match="head must be"):
        PrototypeMILClassifier(head="svm", **FAST).fit(bags, y)
    with pytest.raises(ValueError, match="not in y"):
        PrototypeMILClassifier.recommended(class_weight={"x": 2.0}, **FAST).fit(bags, y)
    balanced = PrototypeMILClassifier.recommended(class_weight="balanced", **FAST).fit(bags, y)
    assert balanced.predict_proba(bags).shape == (len(bags), 2)


def test_best_cut_takes_the_best_accuracy_and_moves_no_further_than_needed():
    from minitorch_proto.convex_head import best_cut

    # Positives above -1.5 except one: every cut in (-2, -1) misclassifies that one bag only.
    scores = np.array([-3.0, -2.5, -2.0, -1.0, 0.5, 1.0, -2.8])
    y = np.array([0, 0, 0, 1, 1, 1, 1])
    assert best_cut(scores, y) == -1.5
    # Separable around 0: the head's own cut (0) is among the best, so it stays.
    assert best_cut(np.array([-2.0, -1.0, 1.0, 2.0]), np.array([0, 0, 1, 1])) == 0.0
    # Ties between two equally good plateaus go to the one nearer 0.
    assert best_cut(np.array([-3.0, -1.0, 0.4, 2.0]), np.array([0, 1, 0, 1])) == pytest.approx(1.2)
    # Balanced accuracy weighs the rare class up: one positive among five negatives.
    s, t = np.array([-2.0, -1.0, 0.0, 1.0, 2.0, 0.5]), np.array([0, 0, 0, 0, 0, 1])
    assert best_cut(s, t) > 2.0 and best_cut(s, t, balanced=True) == pytest.approx(0.25)


def test_inner_threshold_moves_the_bias_only(data):
    bags, y = data
    fixed = PrototypeMILClassifier.recommended(**FAST, random_state=2).fit(bags, y)
    inner = PrototypeMILClassifier.recommended(**FAST, random_state=2, head_threshold="inner").fit(bags, y)
    np.testing.assert_array_equal(inner.model_.weight.detach().numpy(), fixed.model_.weight.detach().numpy())
    np.testing.assert_array_equal(inner.model_.prototypes.detach().numpy(), fixed.model_.prototypes.detach().numpy())
    pf, pi = fixed.predict_proba(bags)[:, 1], inner.predict_proba(bags)[:, 1]
    np.testing.assert_array_equal(np.argsort(pf, kind="stable"), np.argsort(pi, kind="stable"))  # AUC unchanged
    assert inner.model_.bias.item() != pytest.approx(fixed.model_.bias.item())  # here the inner folds move it
    assert inner.get_params()["head_threshold"] == "inner" and clone(inner).head_threshold == "inner"
    with pytest.raises(ValueError, match="head_threshold='inner' needs head='logistic'"):
        PrototypeMILClassifier(head_threshold="inner", **FAST).fit(bags, y)
    with pytest.raises(ValueError, match="head_threshold must be 'fixed' or 'inner'"):
        PrototypeMILClassifier.recommended(head_threshold="0.3", **FAST).fit(bags, y)
    three = np.arange(len(bags)) % 3
    with pytest.raises(ValueError, match="needs two classes, got 3"):
        PrototypeMILClassifier.recommended(head_threshold="inner", **FAST).fit(bags, three)


def test_leave_one_dataset_out_never_reads_the_held_out_set():
    import pandas as pd

    from minitorch_proto.evaluation import leave_one_dataset_out

    rng = np.random.default_rng(0)
    scores = pd.DataFrame(rng.uniform(0.5, 0.9, size=(6, 5)), index=[f"c{i}" for i in range(6)],
                          columns=["musk1", "musk2", "fox", "tiger", "elephant"])
    base = leave_one_dataset_out(scores).set_index("held_out")
    for held in scores.columns:
        # By hand: best mean over the other columns.
        assert base.loc[held, "chosen"] == scores.drop(columns=held).mean(axis=1).idxmax()
        # Whatever the held-out column says, its own choice does not move.
        poisoned = scores.copy()
        poisoned[held] = rng.uniform(0.0, 1.0, size=len(scores))
        poisoned.loc[scores.drop(columns=held).mean(axis=1).idxmin(), held] = 10.0
        again = leave_one_dataset_out(poisoned).set_index("held_out")
        assert again.loc[held, "chosen"] == base.loc[held, "chosen"]
        assert again.loc[held, "score"] == poisoned.loc[base.loc[held, "chosen"], held]
    with pytest.raises(ValueError, match="two data sets"):
        leave_one_dataset_out(scores[["fox"]])
    # A candidate run on fewer sets: judged on fewer, and with none at all, NaN had won the argmax.
    partial = scores.copy()
    partial.loc["c5", ["musk1", "fox"]] = np.nan
    with pytest.raises(ValueError, match="missing: c5 on musk1, c5 on fox"):
        leave_one_dataset_out(partial)


def test_a_development_set_joins_every_choice_and_is_never_reported():
    import pandas as pd

    from minitorch_proto.book import candidate_scores, recommended_candidates_table, recommended_lodo_rows
    from minitorch_proto.evaluation import leave_one_dataset_out

    scores = pd.DataFrame({"musk1": [0.90, 0.80], "fox": [0.60, 0.70], "mnist-bags": [0.50, 0.95]}, index=["a", "b"])
    without = leave_one_dataset_out(scores[["musk1", "fox"]]).set_index("held_out")["chosen"]
    assert dict(without) == {"musk1": "b", "fox": "a"}
    with_dev = leave_one_dataset_out(scores, development=["mnist-bags"]).set_index("held_out")
    assert list(with_dev.index) == ["musk1", "fox"]  # the development set gets no row
    # Held-out Fox: mean over Musk1 and MNIST-bags, a .70 against b .875: the development set moved the choice.
    assert with_dev.loc["fox", "chosen"] == "b" and with_dev.loc["fox", "score"] == 0.70
    with pytest.raises(ValueError, match="not columns"):
        leave_one_dataset_out(scores, development=["tiger"])
    with pytest.raises(ValueError, match="no development set"):
        leave_one_dataset_out(scores[["mnist-bags"]].assign(x=1.0), development=["mnist-bags", "x"])

    # Through the book's helpers: per-fold benchmark rows and per-run development rows.
    folds = pd.DataFrame([dict(dataset=d, method=m, evaluation="final", repeat=r, fold=f, accuracy=a, auc=a)
                          for d, col in (("musk1", "musk1"), ("fox", "fox")) for m in "ab"
                          for r in (1, 2) for f in (1, 2) for a in [scores.loc[m, col]]]).assign(fit_seconds=1.0)
    dev_runs = pd.DataFrame({"dataset": "mnist-bags", "method": ["a", "a", "b", "b"], "auc": [0.4, 0.6, 0.9, 1.0]})
    table, dev = candidate_scores(folds, dev_runs)
    assert dev == ["mnist-bags"] and table.loc["b", "mnist-bags"] == pytest.approx(0.95)
    rows = recommended_lodo_rows(folds, dev_runs)
    assert rows.attrs["choices"] == {"musk1": "b", "fox": "b"} and set(rows["dataset"]) == {"musk1", "fox"}
    assert recommended_lodo_rows(folds).attrs["choices"] == {"musk1": "b", "fox": "a"}
    shown = recommended_candidates_table(folds, dev_runs)
    assert shown.loc["b", "MNIST-bags AUC (development)"] == pytest.approx(0.95)
    assert shown.loc["b", "chosen for"] == "Musk1, Fox" and shown.loc["a", "chosen for"] == ""
    with pytest.raises(ValueError, match="no score on the development"):
        candidate_scores(folds, dev_runs[dev_runs["method"] == "a"])


def test_same_seed_same_recommended_model(data):
    bags, y = data
    a = PrototypeMILClassifier.recommended(epochs=3, random_state=5).fit(bags, y)
    b = PrototypeMILClassifier.recommended(epochs=3, random_state=5).fit(bags, y)
    c = PrototypeMILClassifier.recommended(epochs=3, random_state=6).fit(bags, y)
    np.testing.assert_array_equal(a.predict_proba(bags), b.predict_proba(bags))
    np.testing.assert_array_equal(a.prototype_sources_, b.prototype_sources_)
    assert not np.array_equal(a.predict_proba(bags), c.predict_proba(bags))


def test_ablation_table_pairs_every_row_with_the_shipped_recipe():
    import pandas as pd

    from minitorch_proto.book import ingredient_verdict, recommended_ablation_table

    rng = np.random.default_rng(1)
    key = pd.MultiIndex.from_product([["musk1", "fox"], range(3), range(10)], names=["dataset", "repeat", "fold"])
    shipped = pd.DataFrame(index=key).reset_index().assign(
        method="shipped recipe", evaluation="final", accuracy=rng.uniform(0.5, 0.9, len(key)), fit_seconds=2.0)
    out = shipped.assign(method="- push", accuracy=shipped["accuracy"] + np.where(shipped["dataset"] == "musk1",
                                                                                 -0.05, 0.02), fit_seconds=1.0)
    noise = rng.normal(0, 0.03, len(key))
    plus = shipped.assign(method="+ seeds", accuracy=shipped["accuracy"] + noise, fit_seconds=6.0)
    table = recommended_ablation_table(pd.concat([plus, shipped, out], ignore_index=True))
    assert list(table.index) == ["shipped recipe", "+ seeds", "- push"]  # shipped first, then as they came
    assert table.loc["shipped recipe", "Musk1"] == f"{shipped[shipped.dataset == 'musk1'].accuracy.mean():.3f}" \
        + f" ± {shipped[shipped.dataset == 'musk1'].groupby('repeat').accuracy.mean().std(ddof=1) / np.sqrt(3):.3f}"
    assert table.loc["- push", "Musk1"] == "-0.050 ± 0.000" and table.loc["- push", "Fox"] == "+0.020 ± 0.000"
    assert table.loc["- push", "mean"] == "-0.015"
    assert table.loc["- push", "time"] == "0.5 x" and table.loc["+ seeds", "time"] == "3.0 x"
    fox_noise = noise[(shipped["dataset"] == "fox").to_numpy()].mean()
    assert table.attrs["diff"].loc["+ seeds", "fox"] == pytest.approx(fox_noise)
    assert table.attrs["diff_se"].loc["- push", "fox"] == 0.0
    text = ingredient_verdict(table, {"musk1": "Musk1", "fox": "Fox"})
    assert "'push' -0.015 (hurt Musk1; helped Fox)" in text and "'+ seeds'" in text
    assert text.startswith("Taking one ingredient out of the shipped recipe changes")
    assert ingredient_verdict(table, recipe="the round-2 recipe").startswith("Taking one ingredient out of the round-2")
    # Noise is not a finding: a removal whose differences stay within two SEs is said to be so.
    noisy = shipped.assign(method="- noise", accuracy=shipped["accuracy"] + rng.normal(0, 0.03, len(key)))
    quiet = recommended_ablation_table(pd.concat([shipped, noisy], ignore_index=True))
    verdict = ingredient_verdict(quiet)
    d, e = quiet.attrs["diff"].loc["- noise"], quiet.attrs["diff_se"].loc["- noise"]
    assert ("'noise'" in verdict) and ("nowhere beyond two SE" in verdict) == bool((d.abs() <= 2 * e).all())
    with pytest.raises(ValueError, match="shipped row"):
        recommended_ablation_table(out)


# ------------------------------------------------------------------ the similarity block (MILES's embedding)
def test_the_similarity_block_is_miles_embedding_on_the_pushed_prototypes(data, tmp_path):
    from minitorch_proto.baselines.miles import miles_embedding
    from minitorch_proto.distances import median_pairwise_distance

    bags, y = data
    clf = PrototypeMILClassifier.recommended(head_similarity=True, random_state=4, **FAST).fit(bags, y)
    model, D = clf.model_, FAST["n_prototypes"]
    std = clf.standardizer_.transform(bags)
    sigma = median_pairwise_distance(np.concatenate(std).astype(np.float64), random_state=clf.seed_)
    assert float(model.similarity_sigma2) == pytest.approx(sigma**2, rel=1e-6)
    assert model.weight.shape == (1, 3 * D + D)
    feats = clf.transform(bags)
    without = PrototypeMILClassifier.recommended(head_similarity=False, head_features="all", random_state=4, **FAST).fit(bags, y)
    # Training and the push do not depend on the head: the same prototypes, the same distance block.
    np.testing.assert_array_equal(model.prototypes.detach().numpy(), without.model_.prototypes.detach().numpy())
    np.testing.assert_allclose(feats[:, : 3 * D], without.transform(bags), rtol=1e-5, atol=1e-6)
    expected = miles_embedding(std, model.prototypes.detach().double().numpy(), sigma)
    np.testing.assert_allclose(feats[:, 3 * D:], expected, rtol=1e-4, atol=1e-6)
    # The head's decision is linear in the whole feature vector, similarity included.
    w, b = model.weight.detach().double().numpy()[0], float(model.bias.detach())
    np.testing.assert_allclose(clf.decision_function(bags), feats @ w + b, rtol=1e-4, atol=1e-4)
    loaded = load_model(clf.save(tmp_path / "sim.safetensors"))
    assert loaded.model_.has_similarity
    np.testing.assert_array_equal(loaded.predict_proba(bags), clf.predict_proba(bags))
    again = PrototypeMILClassifier.recommended(head_similarity=True, random_state=4, **FAST).fit(bags, y)
    np.testing.assert_array_equal(again.predict_proba(bags), clf.predict_proba(bags))  # same seed, same model


def test_the_similarity_block_is_checked_and_explained(data):
    from minitorch_proto.evaluation import explain_bag
    from minitorch_proto.evaluation.explain import closeness_coefficients, prototype_coefficients

    bags, y = data
    with pytest.raises(ValueError, match="head_similarity=True needs head='logistic'"):
        PrototypeMILClassifier(head_similarity=True, **FAST).fit(bags, y)
    with pytest.raises(ValueError, match="head_similarity must be True or False"):
        PrototypeMILClassifier.recommended(head_similarity="yes", **FAST).fit(bags, y)
    with pytest.raises(ValueError, match="head_similarity=True needs head='logistic'"):
        PrototypeMILClassifier(head_similarity=True, **FAST).fit_streaming(bags, y)  # checked before streaming
    clf = PrototypeMILClassifier.recommended(head_similarity=True, **FAST).fit(bags, y)
    coefs = prototype_coefficients(clf)
    assert list(coefs.columns) == ["coef_min", "coef_mean", "coef_max", "coef_similarity"]
    np.testing.assert_array_equal(coefs["coef_similarity"], clf.model_.weight.detach().numpy()[0, 3 * 6:])
    sd = clf.transform(bags).std(axis=0)
    np.testing.assert_allclose(closeness_coefficients(clf, bags),
                               coefs["coef_min"] * sd[:6] - coefs["coef_similarity"] * sd[-6:])
    with pytest.raises(ValueError, match="needs the training bags"):
        closeness_coefficients(clf)
    plain = PrototypeMILClassifier.recommended(head_similarity=False, head_features="all", **FAST).fit(bags, y)
    np.testing.assert_array_equal(closeness_coefficients(plain), prototype_coefficients(plain)["coef_min"])
    with pytest.raises(ValueError, match="needs a two-class model with min pooling"):
        closeness_coefficients(PrototypeMILClassifier.recommended(pooling=("mean",), **FAST).fit(bags, y))
    for bag, decision in zip(bags[:5], clf.decision_function(bags[:5])):
        ex = explain_bag(clf, bag)
        assert ex["share"].sum() + ex.attrs["bias"] == pytest.approx(decision, abs=1e-4)
        np.testing.assert_allclose(ex[[c for c in ex.columns if c.startswith("share_")]].sum(axis=1), ex["share"])
        assert "share_similarity" in ex.columns


def _inner_scores(Z, y, Cs, scoring, seed, k=3):
    """Mean inner score per C, computed by hand on the folds the head uses."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    cv = StratifiedKFold(k, shuffle=True, random_state=seed)
    return np.array([cross_val_score(LogisticRegression(C=c, l1_ratio=1.0, solver="liblinear", max_iter=5000,
                                                        random_state=seed), Z, y, cv=cv, scoring=scoring).mean()
                     for c in Cs])


@pytest.mark.parametrize("scoring, sk_name", [("accuracy", "accuracy"), ("log_loss", "neg_log_loss")])
def test_the_head_strength_is_the_best_inner_score(scoring, sk_name):
    rng = np.random.default_rng(0)  # data on which the two scorings choose different strengths
    X = rng.normal(size=(60, 8))
    y = (X[:, 0] - X[:, 1] + rng.normal(size=60) > 0).astype(int)
    Z = (X - X.mean(0)) / X.std(0)
    scores = _inner_scores(Z, y, HEAD_CS, sk_name, seed=5)
    head = fit_convex_head(X, y, 2, penalty="l1", scoring=scoring, random_state=5)
    assert head.C == HEAD_CS[int(np.argmax(scores))]  # the first (strongest) on ties, as argmax takes
    assert head.columns == 0
    other = fit_convex_head(X, y, 2, penalty="l1", scoring={"accuracy": "log_loss"}.get(scoring, "accuracy"),
                            random_state=5)
    assert other.C != head.C


def test_the_head_reads_the_column_set_that_scores_best_inside():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(80, 10))
    y = (X[:, 7] + X[:, 8] + 0.3 * rng.normal(size=80) > 0).astype(int)  # only columns 6-9 carry the label
    noise, signal = np.arange(0, 6), np.arange(6, 10)
    Z = (X - X.mean(0)) / X.std(0)
    by_hand = [_inner_scores(Z[:, c], y, HEAD_CS, "accuracy", seed=2).max() for c in (noise, signal)]
    head = fit_convex_head(X, y, 2, penalty="l1", scoring="accuracy", random_state=2, column_sets=[noise, signal])
    assert head.columns == int(np.argmax(by_hand)) == 1
    assert np.all(head.weight[:, noise] == 0) and np.any(head.weight[:, signal] != 0)
    # the chosen set's head is the head fitted on those columns alone
    alone = fit_convex_head(X[:, signal], y, 2, penalty="l1", scoring="accuracy", random_state=2)
    np.testing.assert_allclose(head.weight[:, signal], alone.weight, rtol=1e-10)
    np.testing.assert_allclose(head.bias, alone.bias, rtol=1e-10)
    with pytest.raises(ValueError, match="column_sets must hold"):
        fit_convex_head(X, y, 2, column_sets=[np.array([], dtype=int)])
    with pytest.raises(ValueError, match="head_scoring must be"):
        fit_convex_head(X, y, 2, scoring="auc")


def test_balanced_class_weight_scores_the_head_by_balanced_accuracy():
    rng = np.random.default_rng(0)  # data on which accuracy and balanced accuracy choose different strengths
    X = rng.normal(size=(90, 6))
    y = (X[:, 0] + rng.normal(size=90) > 1.0).astype(int)  # about one bag in five positive
    Z = (X - X.mean(0)) / X.std(0)
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    cv = StratifiedKFold(3, shuffle=True, random_state=1)
    scores = [cross_val_score(LogisticRegression(C=c, l1_ratio=1.0, solver="liblinear", class_weight="balanced",
                                                 max_iter=5000, random_state=1), Z, y, cv=cv,
                              scoring="balanced_accuracy").mean() for c in HEAD_CS]
    head = fit_convex_head(X, y, 2, penalty="l1", scoring="accuracy", class_weight="balanced", random_state=1)
    assert head.C == HEAD_CS[int(np.argmax(scores))]
    plain = [cross_val_score(LogisticRegression(C=c, l1_ratio=1.0, solver="liblinear", class_weight="balanced",
                                                max_iter=5000, random_state=1), Z, y, cv=cv,
                             scoring="accuracy").mean() for c in HEAD_CS]
    assert HEAD_CS[int(np.argmax(plain))] != head.C


def test_head_features_choose_the_similarity_block_or_everything(data):
    bags, y = data
    sim = PrototypeMILClassifier.recommended(head_features="similarity", head_scoring="accuracy", random_state=3,
                                             **FAST).fit(bags, y)
    D = sim.model_.prototypes.shape[0]
    w = sim.model_.weight.detach().numpy()
    assert np.all(w[:, :-D] == 0) and np.any(w[:, -D:] != 0)
    assert sim.head_features_ == ["similarity"]
    inner = PrototypeMILClassifier.recommended(head_features="inner", head_scoring="accuracy", random_state=3,
                                               **{**FAST, "n_seeds": 2}).fit(bags, y)
    assert len(inner.head_features_) == 2 and set(inner.head_features_) <= {"all", "similarity"}
    for m, chosen in zip(inner.models_, inner.head_features_):
        pooled = m.weight.detach().numpy()[:, :-D]
        assert np.all(pooled == 0) if chosen == "similarity" else True
    # the member's head is the one fitted on the set it names
    again = PrototypeMILClassifier.recommended(head_features=inner.head_features_[0], head_scoring="accuracy",
                                               random_state=3, **FAST).fit(bags, y)
    np.testing.assert_allclose(again.model_.weight.detach().numpy(), inner.model_.weight.detach().numpy(), rtol=1e-6)
    plain = PrototypeMILClassifier.recommended(random_state=3, **FAST).fit(bags, y)
    assert plain.head_features_ == ["all"]
    with pytest.raises(ValueError, match="head_features='similarity' needs head_similarity=True"):
        PrototypeMILClassifier.recommended(head_features="similarity", head_similarity=False, **FAST).fit(bags, y)
    with pytest.raises(ValueError, match="head_features must be one of"):
        PrototypeMILClassifier.recommended(head_features="pooled", **FAST).fit(bags, y)
    with pytest.raises(ValueError, match="head_scoring='accuracy' needs head='logistic'"):
        PrototypeMILClassifier(head_scoring="accuracy", **FAST).fit(bags, y)


def test_repeated_inner_folds_choose_on_the_mean_over_every_draw():
    rng = np.random.default_rng(1)  # data on which one draw and three draws choose different strengths
    X = rng.normal(size=(60, 8))
    y = (X[:, 0] - X[:, 1] + rng.normal(size=60) > 0).astype(int)
    Z = (X - X.mean(0)) / X.std(0)
    draws = [_inner_scores(Z, y, HEAD_CS, "accuracy", seed=5 + r) for r in range(3)]
    three = fit_convex_head(X, y, 2, penalty="l1", scoring="accuracy", random_state=5, repeats=3)
    one = fit_convex_head(X, y, 2, penalty="l1", scoring="accuracy", random_state=5)
    mean, at = np.mean(draws, axis=0), list(HEAD_CS).index
    # Accuracies of 20 bags tie often, and float sums break ties either way: compare scores, not positions.
    assert mean[at(three.C)] == pytest.approx(mean.max(), abs=1e-9)
    assert draws[0][at(one.C)] == pytest.approx(draws[0].max(), abs=1e-9)  # repeat 0 is the single draw
    assert mean[at(one.C)] < mean.max() - 1e-3  # and its choice is not the best over three draws
    # The inner cut pools every draw's out-of-fold decision values at the chosen strength.
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    from minitorch_proto.convex_head import best_cut

    lr = LogisticRegression(C=three.C, l1_ratio=1.0, solver="liblinear", max_iter=5000, random_state=5)
    pooled = np.concatenate([cross_val_predict(lr, Z, y, cv=StratifiedKFold(3, shuffle=True, random_state=5 + r),
                                               method="decision_function") for r in range(3)])
    cut = best_cut(pooled, np.tile(y, 3))
    moved = fit_convex_head(X, y, 2, penalty="l1", scoring="accuracy", random_state=5, repeats=3, threshold="inner")
    np.testing.assert_allclose(moved.weight, three.weight)
    np.testing.assert_allclose(three.bias - moved.bias, [cut], atol=1e-10)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="head_inner_repeats must be a positive integer"):
            fit_convex_head(X, y, 2, repeats=bad)


def test_the_estimator_passes_its_inner_repeats_to_every_members_head(data, monkeypatch):
    import minitorch_proto.convex_head as convex_head

    bags, y = data
    seen = []
    real = convex_head.fit_convex_head
    monkeypatch.setattr(convex_head, "fit_convex_head", lambda *a, **k: seen.append(k["repeats"]) or real(*a, **k))
    PrototypeMILClassifier.recommended(head_inner_repeats=3, random_state=3, **{**FAST, "n_seeds": 2}).fit(bags, y)
    assert seen == [3, 3]
    with pytest.raises(ValueError, match="head_inner_repeats must be a positive integer"):
        PrototypeMILClassifier.recommended(head_inner_repeats=0, **FAST).fit(bags, y)
    with pytest.raises(ValueError, match="head_inner_repeats > 1 needs head='logistic'"):
        PrototypeMILClassifier(head_inner_repeats=2, **FAST).fit(bags, y)
    with pytest.raises(ValueError, match="head_inner_repeats > 1 needs head='logistic'"):
        PrototypeMILClassifier(head_inner_repeats=2, **FAST).fit_streaming(bags, y)


def test_heads_fitted_in_worker_processes_equal_heads_fitted_one_by_one(data):
    # liblinear seeds one process-wide generator per fit: worker processes must keep every head as it is alone.
    bags, y = data
    sets = [([bags[i] for i in range(len(bags)) if i % 4 != r], y[[i for i in range(len(bags)) if i % 4 != r]])
            for r in range(3)]
    est = PrototypeMILClassifier.recommended(random_state=2, **{**FAST, "n_seeds": 2})
    one = est.fit_many(sets, [4, 5, 6], n_jobs=1)
    two = est.fit_many(sets, [4, 5, 6], n_jobs=2)
    for a, b in zip(one, two):
        assert a.head_C_ == b.head_C_ and a.head_features_ == b.head_features_
        np.testing.assert_array_equal(a.prototype_sources_, b.prototype_sources_)
        for ma, mb in zip(a.models_, b.models_):
            np.testing.assert_array_equal(ma.weight.detach().numpy(), mb.weight.detach().numpy())
            np.testing.assert_array_equal(ma.bias.detach().numpy(), mb.bias.detach().numpy())
        np.testing.assert_array_equal(a.predict_proba(bags), b.predict_proba(bags))
    # the three folds' models differ, so equality above is not one model compared with itself
    assert not np.array_equal(one[0].predict_proba(bags), one[1].predict_proba(bags))


def test_head_workers_fit_what_fit_convex_head_fits_and_give_the_cores_back():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 6)), np.repeat([0, 1], 20)
    X[y == 1, 0] += 1.5
    jobs = [dict(features=X, y_enc=y, n_classes=2, penalty="l1", random_state=s) for s in range(5)]
    threads = torch.get_num_threads()
    with HeadWorkers(2) as workers:
        waits = [workers.submit(**job) for job in jobs]  # more than the 4 allowed in flight
        heads = [wait() for wait in waits]
    assert torch.get_num_threads() == threads
    for job, head in zip(jobs, heads):
        alone = fit_convex_head(**job)
        np.testing.assert_array_equal(head.weight, alone.weight)
        assert head.C == alone.C
    # a head that cannot be fitted fails in the worker with its own one-line error
    with HeadWorkers(2) as workers:
        wait = workers.submit(features=X, y_enc=np.r_[np.zeros(39, int), 1], n_classes=2)
        with pytest.raises(ValueError, match="at least 2 training bags of every class"):
            wait()


def test_joblib_parallel_works_before_and_after_head_workers():
    # Both share the process-wide loky pool: a pool of the wrong kind made Parallel fail afterwards.
    from joblib import Parallel, delayed

    X, y = np.random.default_rng(1).normal(size=(30, 4)), np.repeat([0, 1], 15)
    job = dict(features=X, y_enc=y, n_classes=2, penalty="l2", random_state=0)
    for _ in range(2):
        with HeadWorkers(2) as workers:
            head = workers.submit(**job)()
        np.testing.assert_array_equal(head.weight, fit_convex_head(**job).weight)
        assert Parallel(n_jobs=2)(delayed(abs)(-i) for i in range(4)) == [0, 1, 2, 3]


def test_a_head_over_three_classes_is_solved_quickly_in_l2_and_warned_about_in_l1():
    import time
    import warnings

    from minitorch_proto.convex_head import fit_convex_head

    rng = np.random.default_rng(0)
    y = np.arange(30) % 3
    X = rng.normal(size=(30, 1100)) + y[:, None] * 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no saga warning for L2: lbfgs solves it
        t0 = time.perf_counter()
        head = fit_convex_head(X, y, 3, penalty="l2", Cs=[1.0], inner_folds=2)
    assert head.weight.shape == (3, 1100) and time.perf_counter() - t0 < 60
    assert (np.argmax(X @ head.weight.T + head.bias, axis=1) == y).mean() > 0.9
    with pytest.warns(RuntimeWarning, match="saga, which can take minutes"):
        fit_convex_head(X[:12], y[:12], 3, penalty="l1", Cs=[1.0], inner_folds=2)


def test_the_two_class_head_penalises_its_intercept_as_its_docstring_says():
    # liblinear fits the bias as the weight of a constant feature: at its optimum the bias in the head's
    # standardised units, b_z, balances the loss's gradient, b_z + C * sum(p - y) = 0 (a free bias would
    # make sum(p - y) = 0), and a strong penalty pulls the probabilities towards 0.5.
    rng = np.random.default_rng(0)
    y = np.r_[np.zeros(33, int), np.ones(87, int)]
    X = rng.normal(size=(120, 30)) + 0.3 * y[:, None] * (np.arange(30) < 3)
    C = 0.01
    head = fit_convex_head(X, y, 2, penalty="l2", Cs=[C], random_state=0)
    w, b = head.weight[0], float(head.bias[0])
    p = 1 / (1 + np.exp(-(X @ w + b)))
    b_z = b + w @ X.mean(0)  # the logit at the mean feature vector: the bias in standardised units
    assert C * (p - y).sum() == pytest.approx(-b_z, abs=1e-3)
    assert abs((p - y).sum()) > 10 and p.mean() < y.mean() - 0.1
    # Any integer seed is taken into the solver's range (2**32 had failed in scikit-learn).
    big = fit_convex_head(X, y, 2, penalty="l2", Cs=[C], random_state=2**32)
    np.testing.assert_allclose(big.weight, head.weight, atol=1e-8)
