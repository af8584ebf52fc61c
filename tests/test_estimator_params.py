"""Estimator parameters are the config fields: nothing is dropped between the CLI, the estimator and the engines."""
from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pytest

from minitorch_proto import cli_models
from minitorch_proto.estimator import PrototypeMILClassifier
from minitorch_proto.model import PrototypeMILConfig
from minitorch_proto.training import TrainConfig, train_batched

from .conftest import make_concept_bags

#: A valid value other than the default for every field of both configs.
OTHER = {
    "n_prototypes": 7, "distance": "manhattan", "pooling": ("min", "max"), "layer_norm": False, "bias": False,
    "lambda_w": 0.01, "lambda_p": 0.02, "lambda_d": 0.03, "weight_penalty": "l2", "prototype_penalty": "pairwise",
    "distance_penalty": "pooled", "init": "instances", "layer_norm_eps": 1e-4, "monotone": False,
    "epochs": 3, "lr_prototypes": 0.2, "lr_classifier": 0.3, "batch_size": 2, "sampling": "replacement",
    "lr_halving_every": 2, "accumulate_gradients": True, "betas": (0.8, 0.99), "eps": 1e-6,
}


def test_every_config_field_is_an_estimator_parameter_with_its_default():
    params = PrototypeMILClassifier().get_params()
    for cls in (PrototypeMILConfig, TrainConfig):
        for f in dataclasses.fields(cls):
            assert f.name in params, f"{cls.__name__}.{f.name} is not an estimator parameter"
            if f.name != "layer_norm":  # None: implied by monotone
                assert params[f.name] == f.default, f.name
    assert set(OTHER) == {f.name for c in (PrototypeMILConfig, TrainConfig) for f in dataclasses.fields(c)}


def test_every_field_reaches_the_configs_and_back_through_the_cli():
    clf = PrototypeMILClassifier(**OTHER)
    mconf, tconf = clf.model_config(), clf.train_config()
    for name, value in OTHER.items():
        got = getattr(mconf, name) if hasattr(mconf, name) else getattr(tconf, name)
        assert got == value, name
    # the CLI builds its estimator from the configs: every field survives the trip
    args = argparse.Namespace(device="cpu", backend="auto", seed=0, autocast="none", chunk_size=None)
    original = cli_models.configs_from
    try:
        cli_models.configs_from = lambda a, d: (mconf, tconf, "feature")
        est = cli_models.estimator_from(args, "custom")
    finally:
        cli_models.configs_from = original
    assert est.model_config() == mconf and est.train_config() == tconf


def test_the_engines_see_the_non_default_adam_settings():
    bags, y = make_concept_bags(n_bags=12, n_features=3, seed=1)
    tconf = TrainConfig(epochs=2, lr_prototypes=1e-2, lr_classifier=1e-2)
    a = train_batched(bags, y, [np.arange(12)], [0], PrototypeMILConfig(n_prototypes=3), tconf, device="cpu")
    b = train_batched(bags, y, [np.arange(12)], [0], PrototypeMILConfig(n_prototypes=3),
                      dataclasses.replace(tconf, betas=(0.5, 0.9), eps=1e-3), device="cpu")
    assert not np.allclose(a.prototypes[0].numpy(), b.prototypes[0].numpy())


def test_monotone_alone_implies_its_settings():
    bags, y = make_concept_bags(n_bags=12, n_features=3, seed=1)
    clf = PrototypeMILClassifier(monotone=True, epochs=2, n_prototypes=3).fit(bags, y)
    assert clf.model_config().layer_norm is False and clf.model_.config.monotone
    with pytest.raises(ValueError, match="layer_norm=False"):
        PrototypeMILClassifier(monotone=True, layer_norm=True).model_config()


@pytest.mark.parametrize("name,value", [("n_prototypes", 2.7), ("n_prototypes", True), ("epochs", 0),
                                        ("batch_size", 1.5), ("lr_halving_every", 0)])
def test_integer_parameters_refuse_non_integers(name, value):
    bags, y = make_concept_bags(n_bags=12, n_features=3, seed=1)
    with pytest.raises(ValueError, match=name):
        PrototypeMILClassifier(**{name: value, "epochs": 1} if name != "epochs" else {name: value}).fit(bags, y)


def test_zero_threads_is_refused():
    bags, y = make_concept_bags(n_bags=12, n_features=3, seed=1)
    with pytest.raises(ValueError, match="num_threads"):
        train_batched(bags, y, [np.arange(12)], [0], PrototypeMILConfig(n_prototypes=3), TrainConfig(epochs=1),
                      num_threads=0)


#: Checks that fail for a reason other than "a single 2-D array is not a list of bags", and why.
KNOWN_OTHER_FAILURES = {
    "check_positive_only_tag_during_fit": "feeds one matrix; the bag message does not name negative values",
    "check_complex_data": "feeds one complex matrix; refused as not a list of bags before its dtype is seen",
    "check_dtype_object": "feeds one object matrix of dicts; refused while converting bags[0]",
    "check_estimators_empty_data_messages": "feeds an empty matrix; refused as not a list of bags",
    "check_estimators_nan_inf": "feeds one matrix with NaN; refused as not a list of bags before NaN is seen",
    "check_estimator_sparse_tag": "feeds a sparse matrix; bags are dense arrays",
    "check_estimator_sparse_array": "feeds a sparse matrix; the message says bags, not sparse",
    "check_estimator_sparse_matrix": "feeds a sparse matrix; the message says bags, not sparse",
    "check_classifiers_one_label": "feeds one matrix; refused as not a list of bags before the single class is seen",
    "check_classifiers_regression_target": "feeds one matrix; refused as not a list of bags before y is read",
    "check_class_weight_classifiers": "class_weight belongs to head='logistic'; the gradient head refuses it",
    "check_fit2d_1sample": "feeds one 1-sample matrix; refused as not a list of bags",
    "check_fit2d_1feature": "feeds one 1-feature matrix; refused as not a list of bags",
    "check_requires_y_none": "feeds one matrix; the message says bags, not y",
}


def test_check_estimator_runs_and_fails_only_for_known_reasons():
    import warnings

    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = check_estimator(PrototypeMILClassifier(epochs=1, n_prototypes=2), on_fail=None)
    assert len(report) > 50  # it runs every check instead of stopping at the transformer tag
    passed = {r["check_name"] for r in report if r["status"] == "passed"}
    assert {"check_get_params_invariance", "check_set_params", "check_no_attributes_set_in_init"} <= passed
    for r in report:
        if r["status"] != "failed":
            continue
        text = str(r["exception"])
        bag_reason = "list of bags" in text or "sequence of 2-D arrays" in text
        assert bag_reason or r["check_name"] in KNOWN_OTHER_FAILURES, (r["check_name"], text[:200])


@pytest.mark.parametrize("name", ["bias", "monotone", "push", "accumulate_gradients", "layer_norm"])
def test_switches_refuse_the_string_false(name):
    # "False" read from a config file is truthy: it gave exactly the True model before.
    bags, y = make_concept_bags(n_bags=12, n_features=3, seed=1)
    with pytest.raises(ValueError, match=f"{name} must be True or False"):
        PrototypeMILClassifier(**{name: "False"}, epochs=1, n_prototypes=3).fit(bags, y)
    assert PrototypeMILConfig(layer_norm=np.bool_(False)).to_dict()["layer_norm"] is False  # numpy's bool is one


@pytest.mark.parametrize("value", ["False", -1, 0.5, None])
def test_verbose_refuses_text_and_negative_counts(value):
    # "False" from a config file or a re-signed model file would have shown progress bars (truthy).
    bags, y = make_concept_bags(n_bags=12, n_features=3, seed=1)
    with pytest.raises(ValueError, match="verbose must be True, False or a whole number >= 0"):
        PrototypeMILClassifier(verbose=value, epochs=1, n_prototypes=3).fit(bags, y)


def test_verbose_takes_scikit_learns_counts():
    bags, y = make_concept_bags(n_bags=12, n_features=3, seed=1)
    for value in (0, 2, np.bool_(False)):
        PrototypeMILClassifier(verbose=value, epochs=1, n_prototypes=3).fit(bags, y)


@pytest.mark.parametrize("name,value", [("lambda_w", "x"), ("lambda_d", float("nan")), ("lr_prototypes", -1.0),
                                        ("lr_classifier", "1e-3")])
def test_rates_and_penalties_refuse_non_numbers_naming_them(name, value):
    bags, y = make_concept_bags(n_bags=12, n_features=3, seed=1)
    with pytest.raises(ValueError, match=f"{name} must be a finite number"):
        PrototypeMILClassifier(**{name: value}, epochs=1, n_prototypes=3).fit(bags, y)
