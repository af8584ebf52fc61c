"""The own-data page's inputs (book.load_own_bags, book.check_slide_count): checked before any
training, each problem one line naming the parameter, and held-out bags read by column name."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from minitorch_proto import PrototypeMILClassifier
from minitorch_proto.book import HELD_OUT_FOLDS, check_slide_count, load_own_bags

from .conftest import make_concept_bags


def _table(n_bags=24, seed=0, labels=("healthy", "ill")) -> pd.DataFrame:
    bags, y = make_concept_bags(n_bags=n_bags, seed=seed)
    rows = [{"patient": f"P{i:03d}", "diagnosis": labels[int(y[i])], **{f"m{j}": v for j, v in enumerate(inst)}}
            for i, bag in enumerate(bags) for inst in bag]
    return pd.DataFrame(rows)


def test_held_out_columns_in_another_order_reach_the_model_in_the_training_order(tmp_path):
    # The page had read the held-out file's features by position: reversed columns were scored as other
    # features, without an error (held-out accuracy 0.925 in order, 0.5 reversed).
    train, new = _table(), _table(n_bags=12, seed=5)
    train.to_csv(tmp_path / "train.csv", index=False)
    new.to_csv(tmp_path / "straight.csv", index=False)
    new[new.columns[::-1]].to_csv(tmp_path / "reversed.csv", index=False)
    kw = dict(bag_col="patient", label_col="diagnosis")
    ds, straight = load_own_bags(tmp_path / "train.csv", tmp_path / "straight.csv", **kw)
    _, reversed_ = load_own_bags(tmp_path / "train.csv", tmp_path / "reversed.csv", **kw)
    for a, b in zip(straight.bags, reversed_.bags):
        np.testing.assert_array_equal(a, b)
    assert list(straight.feature_names) == list(ds.feature_names)
    clf = PrototypeMILClassifier(n_prototypes=2, epochs=2, random_state=0).fit(ds.bags, ds.y)
    np.testing.assert_array_equal(clf.predict_proba(straight.bags), clf.predict_proba(reversed_.bags))


def test_without_a_held_out_file_a_stratified_quarter_is_set_aside(tmp_path):
    _table(n_bags=40).to_csv(tmp_path / "mine.csv", index=False)
    ds, new = load_own_bags(tmp_path / "mine.csv", bag_col="patient", label_col="diagnosis", seed=3)
    assert ds.n_bags + new.n_bags == 40 and new.n_bags == 40 // HELD_OUT_FOLDS
    assert not set(ds.bag_ids) & set(new.bag_ids)
    assert sorted(set(new.y)) == ["healthy", "ill"]
    again = load_own_bags(tmp_path / "mine.csv", bag_col="patient", label_col="diagnosis", seed=3)[1]
    assert list(again.bag_ids) == list(new.bag_ids)  # the seed fixes the split


def test_a_file_without_a_header_row_is_read_by_column_number(tmp_path):
    frame = _table()
    benchmark_layout = frame[["diagnosis", "patient", *[c for c in frame if c.startswith("m")]]]
    benchmark_layout.to_csv(tmp_path / "plain.csv", index=False, header=False)
    ds, new = load_own_bags(tmp_path / "plain.csv", bag_col="1", label_col=0, header=False)
    assert ds.n_features == 4 and ds.n_bags + new.n_bags == 24
    # A held-out file in the same layout, by the same column numbers.
    _, held = load_own_bags(tmp_path / "plain.csv", tmp_path / "plain.csv", bag_col=1, label_col=0, header=False)
    np.testing.assert_array_equal(held.bags[0], frame[frame.patient == "P000"].filter(like="m").to_numpy())
    with pytest.raises(ValueError, match="^parameter bag_col must be a column number .* when header is False"):
        load_own_bags(tmp_path / "plain.csv", bag_col="patient", label_col=0, header=False)
    with pytest.raises(ValueError, match="^parameter label_col must be a column number"):
        load_own_bags(tmp_path / "plain.csv", bag_col=1, label_col=True, header=False)  # not column 1


@pytest.mark.parametrize("case, words", [
    ("three classes", "label column 'diagnosis' holds 3 class(es)"),
    ("one class", "label column 'diagnosis' holds 1 class(es)"),
    ("too few", "class 'ill' has 3 bag(s); setting a quarter aside needs 4 of each class: give new_csv_path"),
    ("unknown held-out label", "label(s) ['sick'] of new_csv_path are not among"),
])
def test_what_the_page_cannot_use_is_one_line_before_any_training(tmp_path, case, words):
    frame, new = _table(), None
    if case == "three classes":
        frame.loc[frame.patient == "P000", "diagnosis"] = "unsure"
    elif case == "one class":
        frame["diagnosis"] = "ill"
    elif case == "too few":
        ill = frame.patient[frame.diagnosis == "ill"].unique()
        frame = frame[~frame.patient.isin(ill[3:])]
    else:
        new = tmp_path / "new.csv"
        _table(n_bags=8, labels=("healthy", "sick")).to_csv(new, index=False)
    frame.to_csv(tmp_path / "mine.csv", index=False)
    with pytest.raises(ValueError) as info:
        load_own_bags(tmp_path / "mine.csv", new, bag_col="patient", label_col="diagnosis")
    assert words in str(info.value) and "\n" not in str(info.value)


def test_folds_are_checked_against_the_bags_left_for_training(tmp_path):
    # 24 bags, 12 of a class: a quarter aside leaves 9 per class, too few for 10 folds but not for 9.
    _table().to_csv(tmp_path / "mine.csv", index=False)
    kw = dict(bag_col="patient", label_col="diagnosis")
    with pytest.raises(ValueError, match=r"once a quarter of its bags is set aside, has 9 training bag\(s\) of class "
                                         r"'\w+', fewer than folds=10: lower folds\.$"):
        load_own_bags(tmp_path / "mine.csv", folds=10, **kw)
    assert load_own_bags(tmp_path / "mine.csv", folds=9, **kw)[0].n_bags == 18
    # With a held-out file every bag of the training file trains: 12 per class.
    assert load_own_bags(tmp_path / "mine.csv", tmp_path / "mine.csv", folds=12, **kw)[0].n_bags == 24
    with pytest.raises(ValueError, match="fewer than folds=13"):
        load_own_bags(tmp_path / "mine.csv", tmp_path / "mine.csv", folds=13, **kw)


def test_slide_count_is_checked_by_its_parameter_name():
    assert check_slide_count(6, "slide_count") == 6
    for bad in (3, 5.5, True, "60"):
        with pytest.raises(ValueError, match="^parameter slide_count is a count, .* at least 6; got .* both kinds"):
            check_slide_count(bad, "slide_count")


def test_the_paired_sentence_and_the_spike_count_read_what_they_say():
    from minitorch_proto.book import loss_spikes, paired_fold_sentence

    rows = pd.DataFrame({"method": ["a"] * 3 + ["b"] * 3, "repeat": [1] * 6, "fold": [1, 2, 3] * 2,
                         "accuracy": [0.9, 0.8, 0.7, 0.8, 0.8, 0.9]})
    text = paired_fold_sentence(rows, "a", "b", {"a": "prototype model", "b": "bag statistics"})
    assert text == ("On this data the prototype model's mean accuracy is 0.800 against 0.833 for bag statistics: "
                    "a paired difference of -0.033 (standard deviation over folds 0.153); it is ahead on 1, "
                    "level on 1 and behind on 1 of 3 folds.")
    with pytest.raises(ValueError, match="not run on the same folds"):
        paired_fold_sentence(rows.iloc[:5], "a", "b")
    history = [{"cross_entropy": v} for v in (1.0, 0.5, 1.2, 1.0, 0.1, 0.25)]
    assert loss_spikes(history) == 2  # 0.5 -> 1.2 and 0.1 -> 0.25
