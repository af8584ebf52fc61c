"""Seed ensembles: the average of separately trained members, with the scikit-learn contract intact."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from minitorch_proto.estimator import PrototypeMILClassifier, load_model

from .conftest import make_concept_bags

SMALL = dict(n_prototypes=3, epochs=4, lr_prototypes=1e-2, lr_classifier=1e-2, init="kmeans++", device="cpu")


@pytest.fixture(scope="module")
def ensemble():
    bags, y = make_concept_bags(30, seed=4)
    return PrototypeMILClassifier(n_seeds=3, random_state=5, **SMALL).fit(bags, y), bags, y


def test_ensemble_equals_average_of_separately_trained_members(ensemble):
    clf, bags, y = ensemble
    singles = [PrototypeMILClassifier(random_state=5 + j, **SMALL).fit(bags, y) for j in range(3)]
    expected = np.mean([s.predict_proba(bags) for s in singles], axis=0)
    np.testing.assert_allclose(clf.predict_proba(bags), expected, atol=1e-6)
    # Members really differ (otherwise averaging would prove nothing).
    assert not np.allclose(singles[0].predict_proba(bags), singles[1].predict_proba(bags))
    for j, single in enumerate(singles):
        np.testing.assert_allclose(clf.member(j).predict_proba(bags), single.predict_proba(bags), atol=1e-6)
        np.testing.assert_allclose(clf.member(j).model_.prototypes.detach(), single.model_.prototypes.detach(),
                                   atol=1e-6)
    p = clf.predict_proba(bags)
    np.testing.assert_allclose(clf.decision_function(bags), np.log(p[:, 1] / p[:, 0]), rtol=1e-9)
    assert set(clf.predict(bags)) <= set(clf.classes_)
    assert clf.transform(bags).shape == (len(bags), 3 * 3)
    with pytest.raises(IndexError, match="member 3"):
        clf.member(3)


def test_sklearn_contract_and_fit_seeds_with_ensembles(ensemble):
    clf, bags, y = ensemble
    assert clf.get_params()["n_seeds"] == 3
    copy = clone(clf)
    assert copy.get_params() == clf.get_params() and not hasattr(copy, "model_")
    with pytest.raises(ValueError, match="n_seeds"):
        PrototypeMILClassifier(n_seeds=0, **SMALL).fit(bags, y)
    one, = PrototypeMILClassifier(n_seeds=3, **SMALL).fit_seeds(bags, y, [5])
    np.testing.assert_allclose(one.predict_proba(bags), clf.predict_proba(bags), atol=1e-6)


def test_ensemble_save_and_load_round_trip(ensemble, tmp_path):
    clf, bags, _ = ensemble
    back = load_model(clf.save(tmp_path / "ens.pt"))
    assert len(back.models_) == 3 and back.get_params()["n_seeds"] == 3
    np.testing.assert_allclose(back.predict_proba(bags), clf.predict_proba(bags), atol=1e-6)


def test_ensemble_reads_a_bag_folder_once_for_all_members(ensemble, tmp_path, monkeypatch):
    # A whole-slide folder is the costly part of a prediction: every member is scored from one read.
    from minitorch_proto.data.disk import DiskBagDataset, write_bag_folder

    clf, bags, y = ensemble
    folder = DiskBagDataset(tmp_path, write_bag_folder(tmp_path, bags, y))
    bags = [b.astype(np.float32) for b in bags]  # what the folder holds
    read = []
    original = DiskBagDataset.rows
    monkeypatch.setattr(DiskBagDataset, "rows",
                        lambda self, i, a, b: read.append(self._files[i].path) or original(self, i, a, b))
    monkeypatch.setattr(clf, "chunk_size", 50)  # several groups of bags, each read once (restored afterwards)
    p = clf.predict_proba(folder)
    assert len(read) == len(set(read)) == len(bags)
    np.testing.assert_allclose(p, clf.predict_proba(bags), atol=1e-6)  # groups of bags: other BLAS blocking
    members = [clf.member(j) for j in range(3)]
    np.testing.assert_array_equal(clf.predict_proba(bags), np.mean([m.predict_proba(bags) for m in members], axis=0))
    np.testing.assert_array_equal(clf.transform(bags), np.hstack([m.transform(bags) for m in members]))
    np.testing.assert_allclose(clf.transform(folder), clf.transform(bags), atol=1e-5)
