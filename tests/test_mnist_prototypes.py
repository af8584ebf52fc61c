"""MNIST prototypes: the data-driven start, fitting from given prototypes, and the seed sweep."""
from __future__ import annotations

import numpy as np
import pytest

from minitorch_proto.estimator import PrototypeMILClassifier
from minitorch_proto.experiments import (
    discriminative_prototypes,
    fit_from_prototypes,
    mnist_seed_sweep,
    mnist_sweep_verdict,
)

from .conftest import make_concept_bags


def test_the_data_driven_start_is_the_concept_instance():
    bags, y = make_concept_bags(40, n_features=4, seed=0, shift=4.0)
    P = discriminative_prototypes(bags, y, 2, random_state=0)
    assert P.shape == (2, 4)
    # The first prototype is a real instance of a positive bag, and it is the shifted (concept) one.
    assert any(np.any(np.all(b == P[0], axis=1)) for b, label in zip(bags, y) if label == 1)
    assert P[0].mean() > 2.0
    assert not np.allclose(P[0], P[1])


def test_fit_from_prototypes_starts_where_it_is_told():
    bags, y = make_concept_bags(30, n_features=4, seed=1)
    start = np.stack([bags[1][0], bags[3][0]])
    clf = PrototypeMILClassifier(n_prototypes=2, layer_norm=False, standardization="none", epochs=1,
                                 lr_prototypes=1e-12, lr_classifier=1e-3, random_state=3)
    fit_from_prototypes(clf, bags, y, start)
    np.testing.assert_allclose(clf.model_.prototypes.detach().numpy(), start, atol=1e-5)
    assert clf.predict_proba(bags).shape == (30, 2) and len(clf.history_) == 1


def _fake_digits(n_per_class=60, seed=0):
    """Ten 28x28 'digits': a class-specific bright square at a class-specific place, plus noise."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for digit in range(10):
        for _ in range(n_per_class):
            img = rng.uniform(0, 40, size=(28, 28))
            r, c = 2 + 2 * digit, 20 - 2 * digit
            img[r:r + 6, c:c + 6] = 255
            images.append(img)
            labels.append(digit)
    return np.array(images), np.array(labels)


def test_seed_sweep_reports_the_evidence_prototype_and_its_neighbours():
    images, labels = _fake_digits()
    table, runs = mnist_seed_sweep(targets=[9], seeds=[0, 1], images=images, labels=labels, n_train_bags=40,
                                   n_test_bags=20, epochs=3, init="discriminative", test_fraction=0.3)
    assert list(table["seed"]) == [0, 1] and set(table["target"]) == {9}
    for _, row in table.iterrows():
        digits = [int(d) for d in row["nearest_digits"].split()]
        assert len(digits) == 8 and row["hits"] == sum(d == 9 for d in digits)
        assert row["digit_like"] == (row["hits"] >= 6)
        assert row["coefficient"] < 0 or row["coefficient"] == table["coefficient"].min()
    # With a clean synthetic "9" the data-driven start finds it.
    assert table["digit_like"].all()
    assert runs[(9, 0)]["start"] == "discriminative training instances"
    text = mnist_sweep_verdict(table)
    assert "target 9: 2 of 2 runs" in text
