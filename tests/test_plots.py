"""Every plotting function renders to a PNG and draws what it says (counts, values, labels)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from minitorch_proto import plots
from minitorch_proto.estimator import PrototypeMILClassifier
from minitorch_proto.data.synthetic import make_toy_bags
from tests.conftest import make_concept_bags


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _save(fig: Figure, tmp_path, name: str):
    assert isinstance(fig, Figure)
    path = tmp_path / f"{name}.png"
    fig.savefig(path, dpi=50)
    assert path.exists() and path.stat().st_size > 1000
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    return path


@pytest.fixture(scope="module")
def tabular():
    bags, y = make_concept_bags(n_bags=20, n_features=4, seed=5)
    bags = [b * np.array([2.0, 1.0, 0.5, 4.0]) + 3.0 for b in bags]
    clf = PrototypeMILClassifier(n_prototypes=3, pooling=("min", "max"), epochs=2, lr_prototypes=1e-2,
                                 lr_classifier=1e-2, device="cpu").fit(bags, y)
    return clf, bags, y


@pytest.fixture(scope="module")
def toy():
    data = make_toy_bags(n_bags=12, instances_per_bag=3, random_state=0)
    clf = PrototypeMILClassifier(n_prototypes=2, layer_norm=False, standardization="feature", epochs=3,
                                 lr_prototypes=5e-2, lr_classifier=5e-2, device="cpu").fit(data.bags, data.y)
    return clf, data


def test_prototype_images_are_in_pixel_space(tabular, tmp_path):
    clf, _, _ = tabular
    fig = plots.plot_prototype_images(clf, image_shape=(2, 2))
    _save(fig, tmp_path, "images")
    assert len(fig.axes) == 3 and all(len(ax.images) == 1 for ax in fig.axes)
    P = clf.model_.prototypes.detach().double().numpy()
    expected = P * clf.standardizer_.scale_ + clf.standardizer_.mean_  # inverse z-score
    for d, ax in enumerate(fig.axes):
        np.testing.assert_allclose(np.asarray(ax.images[0].get_array()).ravel(), expected[d], rtol=1e-6)
        assert "coef min" in ax.get_title() and "max" in ax.get_title()
    with pytest.raises(ValueError, match="pixels"):
        plots.plot_prototype_images(clf, image_shape=(3, 3))


def test_prototype_images_into_given_axes(tabular, tmp_path):
    clf, _, _ = tabular
    fig = Figure()
    axes = fig.subplots(1, 4)
    out = plots.plot_prototype_images(clf, image_shape=(4, 1), axes=axes)
    assert out is fig
    assert [len(ax.images) for ax in axes] == [1, 1, 1, 0]
    _save(out, tmp_path, "images_axes")


def test_prototype_profiles_top(tabular, tmp_path):
    clf, _, _ = tabular
    fig = plots.plot_prototype_profiles(clf, feature_names=list("abcd"), top=2)
    _save(fig, tmp_path, "profiles")
    heat = fig.axes[0]
    assert heat.images[0].get_array().shape == (2, 4)
    assert [t.get_text() for t in heat.get_xticklabels()] == list("abcd")
    assert len(fig.axes) == 2  # heat map + colour bar


def test_toy_spaces(toy, tmp_path):
    clf, data = toy
    fig = plots.plot_toy_spaces(clf, data.bags, data.y)
    _save(fig, tmp_path, "toy")
    left, right = fig.axes[:2]
    assert len(right.collections[0].get_offsets()) == len(data.bags)  # one point per bag
    assert "P1" in right.get_xlabel() and "P2" in right.get_ylabel()
    texts = [t.get_text() for t in left.texts]
    assert texts == ["P1", "P2"]
    with pytest.raises(ValueError, match="2 features"):
        plots.plot_toy_spaces(_four_feature_clf(), data.bags, data.y)


def _four_feature_clf():
    bags, y = make_concept_bags(n_bags=8, n_features=4, seed=1)
    return PrototypeMILClassifier(n_prototypes=2, epochs=1, device="cpu").fit(bags, y)


def test_bag_explanation_with_thumbnails(tabular, tmp_path):
    clf, bags, _ = tabular
    bag = max(bags, key=len)
    fig = plots.plot_bag_explanation(clf, bag, image_shape=(2, 2), top=3)
    _save(fig, tmp_path, "bag")
    main = fig.axes[0]
    assert len(main.patches) == 3
    assert len(main.child_axes) == 3  # one thumbnail per shown instance
    widths = sorted(abs(p.get_width()) for p in main.patches)
    from minitorch_proto.evaluation.explain import explain_bag

    top = np.sort(np.abs(explain_bag(clf, bag)["share"].to_numpy()))[-3:]
    np.testing.assert_allclose(widths, top, rtol=1e-9)


def test_bag_explanation_against_a_reference(tabular, tmp_path):
    from minitorch_proto.evaluation import instance_evidence

    clf, bags, _ = tabular
    bag = max(bags, key=len)
    fig = plots.plot_bag_explanation(clf, bag, top=3, reference=bags)
    _save(fig, tmp_path, "bag_reference")
    main = fig.axes[0]
    assert "average training logit" in main.get_title()
    widths = sorted(abs(p.get_width()) for p in main.patches)
    ev = instance_evidence(clf, bag, bags, split="shapley")["evidence"].to_numpy()
    np.testing.assert_allclose(widths, np.sort(np.abs(ev))[-3:], rtol=1e-9)


def test_training_history_drops_zero_terms(tmp_path):
    history = [
        {"epoch": e, "cross_entropy": 1.0 / e, "weight_penalty": 0.0, "prototype_penalty": 0.1,
         "distance_penalty": 0.2, "total": 1.0 / e + 0.3}
        for e in range(1, 6)
    ]
    fig = plots.plot_training_history(history)
    _save(fig, tmp_path, "history")
    ax = fig.axes[0]
    assert len(ax.lines) == 4 and ax.get_yscale() == "log"
    assert "weight_penalty" in ax.get_title()
    fig2 = plots.plot_training_history(pd.DataFrame(history), log=False)
    assert fig2.axes[0].get_yscale() == "linear"


def _fake_results():
    rows = []
    rng = np.random.default_rng(0)
    for dataset in ("musk1", "fox"):
        for method, base in (("prototype", 0.8), ("bag_stats", 0.7)):
            for r in (1, 2, 3):
                for f in (1, 2, 3):
                    acc = base + 0.05 * rng.standard_normal()
                    rows.append(dict(dataset=dataset, method=method, evaluation="final", repeat=r, fold=f,
                                     accuracy=acc, auc=acc, fit_seconds=1.0))
    return pd.DataFrame(rows)


@pytest.mark.parametrize("spread,word", [("se_repeats", "standard error"), ("std_folds", "standard deviation")])
def test_cv_results_error_bars(tmp_path, spread, word):
    from minitorch_proto.evaluation.report import display_name

    results = _fake_results()
    fig = plots.plot_cv_results(results, paper=True, spread=spread)
    _save(fig, tmp_path, f"cv_{spread}")
    ax = fig.axes[0]
    assert word in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [display_name("prototype"), display_name("bag_stats"), "Prototype learning (paper) (reported)"]
    # the top of the axis holds every error bar, including the paper's spreads that pass 1.0
    assert ax.get_ylim()[1] >= 0.942 + 0.070
    # bar heights are the means; the error bars have the requested spread
    g = results[(results.dataset == "musk1") & (results.method == "prototype")]
    if spread == "se_repeats":
        expected = g.groupby("repeat")["accuracy"].mean().std(ddof=1) / np.sqrt(3)
    else:
        expected = g["accuracy"].std(ddof=1)
    from matplotlib.container import BarContainer

    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == 3
    assert bars[0].patches[0].get_height() == pytest.approx(g["accuracy"].mean())
    seg = bars[0].errorbar.lines[2][0].get_segments()[0]  # first data set's vertical error bar
    assert abs(seg[1][1] - seg[0][1]) / 2 == pytest.approx(expected)


def test_cv_results_accepts_a_summary(tmp_path):
    from minitorch_proto.evaluation.cv import summarize

    fig = plots.plot_cv_results(summarize(_fake_results()), metric="auc")
    _save(fig, tmp_path, "cv_summary")
    assert len(fig.axes[0].patches) == 4  # 2 methods x 2 data sets, no reported bars


def test_rank(tmp_path):
    from minitorch_proto.evaluation.report import average_ranks

    results = _fake_results()
    fig = plots.plot_rank(results)
    _save(fig, tmp_path, "rank")
    ax = fig.axes[0]
    ranks = average_ranks(results)
    assert sorted(p.get_width() for p in ax.patches) == sorted(ranks.to_numpy())
    assert {t.get_text() for t in ax.get_yticklabels()} == {"prototype", "bag_stats"}


def test_prototype_trajectories(tmp_path):
    data = make_toy_bags(n_bags=6, instances_per_bag=2, random_state=0)
    snaps = [np.array([[0.0, 0.0], [2.0, 2.0]]) + 0.1 * t for t in range(5)]
    fig = plots.plot_prototype_trajectories(snaps, data.bags, data.y)
    _save(fig, tmp_path, "traj")
    ax = fig.axes[0]
    paths = [ln for ln in ax.lines if len(ln.get_xdata()) == 5]
    assert len(paths) == 2
    np.testing.assert_allclose(paths[0].get_xdata(), [0.0, 0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError):
        plots.plot_prototype_trajectories([np.zeros((2, 3))], data.bags, data.y)


def test_evidence_map_draws_each_patch_where_it_lies_in_its_colour(tmp_path):
    xs, ys = np.meshgrid([0, 10, 20], [100, 110, 120])
    coords = np.c_[xs.ravel(), ys.ravel()]
    evidence = np.linspace(-1.0, 0.5, 9)
    evidence[4] = np.nan
    outline = np.zeros(9, dtype=bool)
    outline[[1, 2]] = True
    fig = plots.plot_evidence_map(coords, evidence, outline=outline, top=2, title="slide")
    _save(fig, tmp_path, "evidence_map")
    ax = fig.axes[0]
    boxes, edges = ax.collections[:2]
    # Patch size: the grid step; each square at its top-left corner.
    corners = [p.get_extents() for p in boxes.get_paths()]
    np.testing.assert_allclose([[b.x0, b.y0, b.width] for b in corners], np.c_[coords, np.full(9, 10)])
    colours = boxes.get_facecolors()
    cmap = boxes.get_cmap()
    np.testing.assert_allclose(colours[0], cmap(0.0))  # -1 = -limit: the bluest
    np.testing.assert_allclose(colours[8], cmap(0.75))  # 0.5 on a scale of +-1
    np.testing.assert_allclose(colours[4][:3], [0.8] * 3)  # NaN: grey
    assert len(edges.get_paths()) == 2
    dots = ax.lines[0].get_xydata()
    np.testing.assert_allclose(dots, [[25, 125], [15, 125]])  # the two largest (patches 8 and 7), at their centres
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # slide coordinates: y grows downwards
    assert len(fig.axes) == 2 and "evidence" in fig.axes[1].get_ylabel()  # the colour bar
    one = plots.plot_evidence_map(coords[:1], [0.3], colorbar=False)
    assert len(one.axes) == 1 and one.axes[0].collections[0].get_paths()[0].get_extents().width == 1
    with pytest.raises(ValueError, match="shape"):
        plots.plot_evidence_map(coords[:, :1], evidence)
    bad = coords.astype(float)
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="patch 3"):
        plots.plot_evidence_map(bad, evidence)
    with pytest.raises(ValueError, match="outline"):
        plots.plot_evidence_map(coords, evidence, outline=outline[:3])


# ------------------------------------------------------------------ from the plots audit (2026-11-27)
def test_one_model_readers_refuse_a_seed_ensemble_instead_of_reading_its_first_member(tmp_path):
    from minitorch_proto import evaluation
    from minitorch_proto.evaluation import explain

    bags, y = make_concept_bags(n_bags=16, n_features=4, seed=2)
    ens = PrototypeMILClassifier(n_prototypes=3, n_seeds=2, epochs=2, device="cpu").fit(bags, y)
    # explain_bag read member 0 only: its shares summed to a logit the ensemble does not predict with.
    for call in (lambda: explain.explain_bag(ens, bags[0]), lambda: explain.prototype_table(ens, bags, y),
                 lambda: explain.nearest_instances(ens, bags), lambda: evaluation.project_prototypes(ens, bags, y),
                 lambda: explain.closeness_coefficients(ens), lambda: explain.instance_distances(ens, bags),
                 lambda: plots.plot_prototype_images(ens, (2, 2)), lambda: plots.plot_prototype_profiles(ens),
                 lambda: plots.plot_bag_explanation(ens, bags[0])):
        with pytest.raises(NotImplementedError, match="ensemble of 2: explain one member"):
            call()
    member = ens.member(1)  # each member on its own is explained as before
    ex = explain.explain_bag(member, bags[0])
    # abs, as the other share sums: a float32 logit near 0 (here -0.085) against the float64 explanation differs by
    # a few 1e-7, which a relative 1e-6 refused on one machine and not on another.
    assert ex["share"].sum() + ex.attrs["bias"] == pytest.approx(float(member.decision_function([bags[0]])[0]), abs=1e-5)
    _save(plots.plot_prototype_images(member, (2, 2)), tmp_path, "member")


def test_toy_spaces_takes_either_order_of_its_pair_and_names_a_bad_one(tmp_path):
    data = make_toy_bags(n_bags=12, instances_per_bag=3, random_state=0)
    clf = PrototypeMILClassifier(n_prototypes=3, pooling=("min",), layer_norm=False, epochs=3,
                                 device="cpu").fit(data.bags, data.y)
    two = PrototypeMILClassifier(n_prototypes=2, pooling=("min",), layer_norm=False, epochs=3,
                                 device="cpu").fit(data.bags, data.y)
    fig = plots.plot_toy_spaces(two, data.bags, data.y, prototypes=(1, 0))  # a torch stride error before
    _save(fig, tmp_path, "toy_reversed")
    right = fig.axes[1]
    assert "P2" in right.get_xlabel() and "P1" in right.get_ylabel()
    for bad in ((0, 5), (1, 1), (0,)):
        with pytest.raises(ValueError, match="two different indices in 0..2"):
            plots.plot_toy_spaces(clf, data.bags, data.y, prototypes=bad)
    # String labels: the positive class is the second in sorted order, as everywhere else.
    names = np.array(["benign", "tumour"])[np.asarray(data.y, dtype=int)]
    snaps = [np.zeros((2, 2)), np.ones((2, 2))]
    _save(plots.plot_prototype_trajectories(snaps, data.bags, names), tmp_path, "traj_strings")


def test_similarity_heads_are_not_coloured_by_a_sign_the_coefficients_cannot_give():
    from minitorch_proto.plots._common import NEG_COLOUR, POS_COLOUR, UNKNOWN_COLOUR, _evidence_colour

    assert _evidence_colour(pd.Series({"coef_min": -1.0, "coef_max": 0.4})) == POS_COLOUR
    assert _evidence_colour(pd.Series({"coef_min": 1.0})) == NEG_COLOUR
    # coef_min +1.4 with coef_similarity +4.7 was drawn red although closeness_coefficients said blue.
    assert _evidence_colour(pd.Series({"coef_min": 1.432, "coef_similarity": 4.715})) == UNKNOWN_COLOUR


def test_profiles_rank_by_every_class_coefficients_and_bad_requests_are_named(tmp_path):
    from minitorch_proto.evaluation.explain import prototype_coefficients

    bags, y = make_concept_bags(n_bags=18, n_features=4, seed=4)
    y3 = np.arange(len(bags)) % 3
    clf = PrototypeMILClassifier(n_prototypes=4, epochs=2, device="cpu").fit(bags, y3)
    fig = plots.plot_prototype_profiles(clf, top=2)
    weight = prototype_coefficients(clf).abs().sum(axis=1).to_numpy()
    shown = [int(t.get_text()[1:].split()[0]) - 1 for t in fig.axes[0].get_yticklabels()]
    assert shown == list(np.argsort(-weight, kind="stable")[:2])  # it showed P1, P2 for three classes
    history = [{"epoch": e, "cross_entropy": 1.0 / e, "total": 1.0 / e} for e in (1, 2)]
    with pytest.raises(ValueError, match="no term 'crossentropy'; it has cross_entropy, total"):
        plots.plot_training_history(history, terms=["crossentropy"])
    with pytest.raises(ValueError, match="draws one dataset; results hold musk1, fox"):
        plots.plot_comparison(_fake_results())
    one = plots.plot_evidence_map(np.array([[0, 0], [1, 0]]), [np.nan, 0.2], top=2)
    assert len(one.axes[0].lines[0].get_xydata()) == 1  # a patch without a value gets no "top" dot


def test_nearest_images_and_projection_show_real_instances(tabular, tmp_path):
    from minitorch_proto.evaluation import nearest_instances, project_prototypes

    clf, bags, y = tabular
    labels = [[f"b{b}i{i}" for i in range(len(bag))] for b, bag in enumerate(bags)]
    fig = plots.plot_nearest_images(clf, bags, (2, 2), k=3, instance_labels=labels)
    _save(fig, tmp_path, "nearest")
    near = nearest_instances(clf, bags, k=3)
    for d, row in near.items():
        for j, (b, i, dist) in enumerate(row):
            ax = fig.axes[d * 3 + j]
            np.testing.assert_allclose(np.asarray(ax.images[0].get_array()).ravel(), bags[b][i])
            assert ax.get_title() == f"b{b}i{i} (d={dist:.1f})"
    projected, _ = project_prototypes(clf, bags, y)
    fig = plots.plot_projection(clf, projected, (2, 2))
    _save(fig, tmp_path, "projection")
    learned, _ = plots.prototypes_in_input_space(clf)
    D = len(learned)
    real = np.concatenate(bags)
    for d in range(D):
        np.testing.assert_allclose(np.asarray(fig.axes[d].images[0].get_array()).ravel(), learned[d], rtol=1e-6)
        shown = np.asarray(fig.axes[D + d].images[0].get_array()).ravel()
        assert np.abs(real - shown).max(axis=1).min() < 1e-4  # the bottom row is a training instance
    with pytest.raises(ValueError, match="image_shape"):
        plots.plot_nearest_images(clf, bags, (3, 3))


def test_unit_test_grid_and_pass_table():
    from minitorch_proto.evaluation import summarize_unit_tests, unit_test_pass_table

    table = pd.DataFrame([dict(model=m, test=t, seed=s, accuracy=a, auc=a, passed=a >= 0.75)
                          for m, base in (("good", 0.9), ("weak", 0.6)) for t in ("single", "multi")
                          for s, a in enumerate((base, base + 0.05))])
    summary = summarize_unit_tests(table)
    wide = unit_test_pass_table(summary, ["weak", "good"], ["multi", "single"], {"good": "Good"})
    assert list(wide.index) == ["weak", "Good"] and list(wide.columns) == ["multi", "single"]
    assert wide.loc["Good", "single"].startswith("PASS 2/2: acc 0.93") and wide.loc["weak", "multi"].startswith("fail 0/2")
    fig = plots.plot_unit_tests(summary, threshold=0.75, names={"good": "Good"})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Good", "weak"]
    assert sorted(t.get_text() for t in ax.texts) == ["0.62 ✗", "0.62 ✗", "0.93", "0.93"]
    assert "below 0.75" in ax.get_title() and "over 2 seeds" in fig.axes[1].get_ylabel()


def test_ablation_deltas_draw_a_bar_per_setting_and_data_set_with_its_error():
    deltas = pd.DataFrame({"setting": ["paper-faithful", "a", "b", "a", "b"],
                           "dataset": ["musk1", "musk1", "musk1", "fox", "fox"],
                           "delta": [0.0, 0.05, -0.1, 0.02, np.nan], "delta_se": [0.0, 0.01, np.nan, 0.02, 0.01]})
    fig = plots.plot_ablation_deltas(deltas, baseline="paper-faithful", names={"musk1": "Musk1"})
    ax = fig.axes[0]
    widths = sorted(round(p.get_width(), 3) for p in ax.patches if not np.isnan(p.get_width()))
    assert widths == [-0.1, 0.02, 0.05]  # the baseline is left out; a missing delta draws nothing
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["Musk1", "fox"]
    with pytest.raises(ValueError, match="no setting other than the baseline"):
        plots.plot_ablation_deltas(deltas[deltas.setting == "paper-faithful"], baseline="paper-faithful")


def test_prototype_sources_draw_the_named_training_instances():
    bags, y = make_concept_bags(20, n_features=5, seed=3)
    clf = PrototypeMILClassifier(n_prototypes=3, init="kmeans++", push=True, epochs=1, random_state=0).fit(bags, y)
    fig = plots.plot_prototype_sources(clf, bags, [2, 0], bag_ids=[f"b{i}" for i in range(20)],
                                       scores=[0.1, -0.2, 0.3])
    lines = fig.axes[0].get_lines()
    for line, j in zip(lines, (2, 0)):
        b, i = clf.prototype_sources_[0, j]
        np.testing.assert_array_equal(line.get_ydata(), bags[b][i])  # the raw instance itself
        assert line.get_label().startswith(f"prototype {j + 1}: bag b{b}, instance {i}")
    assert "+0.30" in lines[0].get_label()
    # In the model's units the source instance is the pushed prototype itself.
    fig = plots.plot_prototype_sources(clf, bags, [2, 0], standardized=True)
    for line, j in zip(fig.axes[0].get_lines(), (2, 0)):
        np.testing.assert_allclose(line.get_ydata(), clf.model_.prototypes[j].detach().double().numpy(), atol=1e-5)
    assert "standardised" in fig.axes[0].get_ylabel()
    with pytest.raises(ValueError, match="outside 0..2"):
        plots.plot_prototype_sources(clf, bags, [3])
    with pytest.raises(ValueError, match="push=True"):
        plots.plot_prototype_sources(PrototypeMILClassifier(n_prototypes=2, epochs=1).fit(bags, y), bags, [0])


def test_source_and_nearest_plots_read_dataframe_bags_by_column_name():
    # A bag stored in another column order drew a permuted instance (and standardised it with the wrong
    # scales); bags[b][i] of a DataFrame picked a column, not instance i (a KeyError with named columns).
    rng = np.random.default_rng(0)
    names = ["a", "b", "c", "d"]
    bags = [pd.DataFrame(rng.normal(size=(4, 4)) + 3 * (i % 2), columns=names) for i in range(12)]
    bags = [f if i % 3 else f[names[::-1]] for i, f in enumerate(bags)]
    y = [i % 2 for i in range(12)]
    clf = PrototypeMILClassifier(n_prototypes=4, epochs=1, push=True, init="kmeans++", device="cpu").fit(bags, y)
    assert any(clf.prototype_sources_[0, j, 0] % 3 == 0 for j in range(4))  # a reversed bag is a source
    fig = plots.plot_prototype_sources(clf, bags, range(4), standardized=True)
    for j, line in enumerate(fig.axes[0].get_lines()):
        np.testing.assert_allclose(line.get_ydata(), clf.model_.prototypes[j].detach().numpy(), atol=1e-5)
    fig = plots.plot_nearest_images(clf, bags, image_shape=(2, 2), k=2)
    b, i, _ = __import__("minitorch_proto").evaluation.nearest_instances(clf, bags, k=1)[0][0]
    model_order = list(clf.feature_names_in_)  # the first bag's, d..a: the order predict reads
    np.testing.assert_allclose(fig.axes[0].images[0].get_array().ravel(), bags[b][model_order].to_numpy()[i])


def test_toy_spaces_draw_bags_and_prototypes_in_one_space_and_every_class_apart(tmp_path):
    from matplotlib.colors import to_hex

    data = make_toy_bags(n_bags=12, instances_per_bag=3, random_state=0)
    bags = [b + 10.0 for b in data.bags]  # raw units far from the z-scores
    clf = PrototypeMILClassifier(n_prototypes=2, layer_norm=False, standardization="instance", epochs=2,
                                 device="cpu").fit(bags, data.y)
    left = plots.plot_toy_spaces(clf, bags, data.y).axes[0]
    # Instance-standardised prototypes had been drawn in z-scores over the raw bags (x about 10).
    xs = np.concatenate([c.get_offsets()[:, 0] for c in left.collections if len(c.get_offsets())])
    assert np.abs(xs).max() < 5 and "instance-standardised" in left.get_xlabel()
    # Three classes: three colours and three legend entries (classes 0 and 1 had both been "negative bag").
    y3 = np.arange(12) % 3
    three = PrototypeMILClassifier(n_prototypes=2, epochs=2, device="cpu").fit(data.bags, y3)
    ax = plots.plot_prototype_trajectories([three.model_.prototypes.detach().numpy()] * 2, data.bags, y3).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"class 0", "class 1", "class 2"} <= set(labels) and "negative bag" not in labels
    colours = {to_hex(c.get_facecolor()[0]) for c in ax.collections if len(c.get_offsets()) == 3}
    assert len(colours) == 3
    for bad, message in ((dict(epochs=[0]), "1 epochs for 2 snapshots"), (dict(y=y3[:5]), "12 bags and 5 labels")):
        with pytest.raises(ValueError, match=message):
            plots.plot_prototype_trajectories([three.model_.prototypes.detach().numpy()] * 2, data.bags,
                                              **{"y": y3, **bad})
    with pytest.raises(ValueError, match="12 bags and 5 labels"):
        plots.plot_toy_spaces(clf, bags, data.y[:5])


def test_profiles_images_neighbours_and_history_name_what_they_cannot_draw(tabular, toy):
    clf, bags, _ = tabular
    for top in (0, -1, 1.5):  # -1 had dropped the last prototype under the title "top 2"
        with pytest.raises(ValueError, match="top must be a whole number of at least 1"):
            plots.plot_prototype_profiles(clf, top=top)
    sub = Figure().subfigures(1, 2)[0]  # no width of its own: an AttributeError before
    assert plots.plot_prototype_images(clf, image_shape=(2, 2), fig=sub) is sub
    from minitorch_proto.evaluation import nearest_instances

    some = {2: nearest_instances(clf, bags, k=2)[2]}  # one prototype's row had indexed past the axes
    fig = plots.plot_nearest_images(clf, bags, image_shape=(2, 2), neighbours=some)
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()] == ["P3"]
    ensemble = PrototypeMILClassifier(n_prototypes=2, epochs=1, n_seeds=2, device="cpu").fit(toy[1].bags, toy[1].y)
    with pytest.raises(ValueError, match=r"history has none of the loss terms .*clf.histories_\[j\]"):
        plots.plot_training_history(ensemble.histories_)
