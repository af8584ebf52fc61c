"""Reading and writing a fitted :class:`~minitorch_proto.estimator.PrototypeMILClassifier`.

What goes into the file (the parameters, classes, feature names, the standardiser's
statistics, every ensemble member's state dict, the pushed prototypes' sources, the
history) and how it is rebuilt. The file format itself - safetensors with a verified
JSON header, written atomically - is :mod:`minitorch_proto.serialization`'s.
"""
from __future__ import annotations

import numbers
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from .model import PrototypeMIL
from .preprocessing import BagStandardizer
from .serialization import ModelFileError, check_model_content, load_model_file, save_model_file, to_jsonable

__all__ = ["save_estimator", "load_estimator"]


def save_estimator(clf, path: str | os.PathLike) -> Path:
    """Write a fitted prototype estimator to ``path`` (see ``PrototypeMILClassifier.save``)."""
    models = getattr(clf, "models_", [clf.model_])
    tensors = {f"model/{k}": v for k, v in models[0].state_dict().items()}
    # Ensemble members after the first: state dicts of the same shapes, in seed order.
    for j, member in enumerate(models[1:], start=1):
        tensors.update({f"member{j}/{k}": v for k, v in member.state_dict().items()})
    if getattr(clf, "prototype_sources_", None) is not None:
        tensors["prototype_sources"] = np.asarray(clf.prototype_sources_, dtype=np.int64)
    state = clf.standardizer_.get_state()
    for key in ("mean", "scale"):
        if state.get(key) is not None:
            tensors[f"standardizer/{key}"] = np.asarray(state[key], dtype=np.float64)
    params = clf.get_params()
    if not isinstance(params["random_state"], (type(None), numbers.Integral, np.integer)):
        params["random_state"] = None  # a generator's state is not part of the fitted model
    names = getattr(clf, "feature_names_in_", None)
    header = {
        "estimator": type(clf).__name__,
        "params": to_jsonable(params),
        "classes": to_jsonable(clf.classes_),
        "classes_dtype": clf.classes_.dtype.str,
        "n_features_in": int(clf.n_features_in_),
        "feature_names_in": None if names is None else [str(n) for n in names],
        "n_members": len(models),
        "standardizer": {"mode": state["mode"]},
        "history": to_jsonable(clf.history_),
    }
    # Fitted attributes a user may read after loading (the pushed sources travel as a tensor).
    for key in ("histories", "head_C", "head_features", "seed"):
        if getattr(clf, key + "_", None) is not None:
            header[key] = to_jsonable(getattr(clf, key + "_"))
    return save_model_file(path, tensors, header)


def _module(clf, state: dict) -> PrototypeMIL:
    """One member's module from its saved tensors (its similarity block added first when it has one)."""
    # The initialisation is irrelevant here (the saved weights replace it), and
    # data-driven inits would need the training instances: build with "normal".
    model = PrototypeMIL(clf.n_features_in_, len(clf.classes_), replace(clf.model_config(), init="normal"))
    if "similarity_sigma2" in state:
        model.add_similarity(float(state["similarity_sigma2"]))
    model.load_state_dict(state)
    return model


def _class_weight_keys(class_weight, classes: np.ndarray):
    """A class_weight dict keyed by the classes again: a JSON header keeps only text keys ({"0": 2.0})."""
    if not isinstance(class_weight, dict):
        return class_weight
    by_text = {str(c): c for c in classes.tolist()}
    return {by_text.get(k, k) if isinstance(k, str) else k: w for k, w in class_weight.items()}


def load_estimator(cls, path: str | os.PathLike):
    """Rebuild a ``cls`` (a PrototypeMILClassifier class) from a file written by :func:`save_estimator`."""
    mf = load_model_file(path)
    h = mf.header
    check_model_content(path, h, mf.tensors)
    if h.get("estimator", cls.__name__) != cls.__name__:
        raise ModelFileError(f"{path} holds a {h.get('estimator')}, not a {cls.__name__}.")
    try:
        params = dict(h["params"])
        for key in ("pooling", "betas"):  # JSON has lists; the parameters were tuples
            if isinstance(params.get(key), list):
                params[key] = tuple(params[key])
        unknown = sorted(set(params) - set(cls._get_param_names()))
        if unknown:
            raise ModelFileError(f"{path} was written by a newer version (unknown parameters {unknown}).")
        clf = cls(**params)
        dtype = h.get("classes_dtype")
        clf.classes_ = np.asarray(h["classes"], dtype=np.dtype(dtype) if dtype else None)
        clf.class_weight = _class_weight_keys(clf.class_weight, clf.classes_)
        clf.n_features_in_ = int(h["n_features_in"])
        if h.get("feature_names_in") is not None:
            clf.feature_names_in_ = np.asarray(h["feature_names_in"], dtype=object)
        model = _module(clf, {k[len("model/"):]: v for k, v in mf.tensors.items() if k.startswith("model/")})
        std = {"mode": h["standardizer"]["mode"], "mean": None, "scale": None}
        for key in ("mean", "scale"):
            if f"standardizer/{key}" in mf.tensors:
                std[key] = mf.tensors[f"standardizer/{key}"].numpy()
        clf.standardizer_ = BagStandardizer.from_state(std)
        if "prototype_sources" in mf.tensors:
            clf.prototype_sources_ = mf.tensors["prototype_sources"].numpy().astype(np.int64)
        clf.history_ = h.get("history", [])
        for key in ("histories", "head_C", "head_features", "seed"):
            if key in h:
                setattr(clf, key + "_", h[key])
        clf.models_ = [model]
        for j in range(1, int(h.get("n_members", 1))):
            prefix = f"member{j}/"
            clf.models_.append(_module(clf, {k[len(prefix):]: v for k, v in mf.tensors.items() if k.startswith(prefix)}))
    except ModelFileError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()] or [type(exc).__name__]
        # torch's state-dict errors put what is wrong on the line after "Error(s) in loading ...:".
        first = f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]
        raise ModelFileError(f"{path} does not describe a {cls.__name__} this version can build: {first}") from None
    for m in clf.models_:
        m.config = clf.model_config()
        m.eval()
    clf.model_ = model
    return clf
