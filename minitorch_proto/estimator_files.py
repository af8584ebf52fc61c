"""Reading and writing a fitted :class:`~minitorch_proto.estimator.PrototypeMILClassifier`.

What goes into the file (the parameters, classes, feature names, the standardiser's
statistics, every ensemble member's state dict, the pushed prototypes' sources, the
history) and how it is rebuilt. The file format itself - safetensors with a verified
JSON header, written atomically - is :mod:`minitorch_proto.serialization`'s.
"""
from __future__ import annotations

import numbers
import os
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from .model import PrototypeMIL
from .preprocessing import BagStandardizer
from .serialization import ModelFileError, load_model_file, save_model_file, to_jsonable

__all__ = ["save_estimator", "load_estimator", "check_model_content"]


def save_estimator(clf, path: str | os.PathLike) -> Path:
    """Write a fitted prototype estimator to ``path`` (see ``PrototypeMILClassifier.save``).

    Raises
    ------
    ValueError
        When ``set_params`` changed, after the fit, a setting the modules are rebuilt from: the
        file would load as another model (the fitted one in memory keeps its own settings).
    """
    models = getattr(clf, "models_", [clf.model_])
    fitted, now = asdict(models[0].config), asdict(clf.model_config())
    changed = [f"{k} ({fitted[k]!r} when fitted, now {now[k]!r})" for k in fitted if fitted[k] != now[k]]
    if len(models) != int(clf.n_seeds):
        changed.append(f"n_seeds ({len(models)} when fitted, now {clf.n_seeds!r})")
    if changed:
        raise ValueError(f"set_params changed {', '.join(changed)} after fit; the file would load as another "
                         "model: fit again, or set them back, before saving.")
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
    if not isinstance(params["device"], str):
        params["device"] = str(params["device"])  # a torch.device, which fit accepts too
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
    # The header's sizes are checked against the saved tensor before anything is built: building draws an
    # initial n_prototypes x n_features matrix, which a few-byte header could make any size.
    P = state.get("prototypes")
    want = (int(clf.n_prototypes), int(clf.n_features_in_))
    if P is None or tuple(P.shape) != want:
        raise ValueError(f"its prototypes tensor has shape {None if P is None else tuple(P.shape)}, and its "
                             f"header says {want}.")
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
        # Settings a later save, refit or prediction would refuse (a re-signed file), refused now.
        if clf._check_settings() != len(clf.models_):
            raise ModelFileError(f"{path} says n_seeds={clf.n_seeds} but holds {len(clf.models_)} member(s).")
        clf.train_config()
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


def check_model_content(path, h: dict, tensors: dict) -> None:
    """The content of a prototype-model file makes sense: a one-line ModelFileError otherwise.

    The digest only shows the file is as its writer left it; this checks what a writer
    could still get wrong or make up (header types, two or more distinct classes, finite
    tensors, standardiser shapes, the number of members, prototype sources).
    """
    import torch

    def bad(why: str) -> ModelFileError:
        return ModelFileError(f"{path} holds an invalid model: {why}.")

    kinds = {"params": dict, "classes": list, "n_features_in": int, "standardizer": dict}
    for key, kind in kinds.items():
        if not isinstance(h.get(key), kind) or isinstance(h.get(key), bool):
            raise bad(f"header field {key!r} must be a {kind.__name__}, got {type(h.get(key)).__name__}")
    classes = h["classes"]
    if not all(isinstance(c, (str, int, float, bool)) for c in classes):
        raise bad(f"classes must be plain labels (text, numbers, booleans), got {classes!r}"[:200])
    try:  # as they will be read: a classes_dtype could truncate two labels into one
        typed = np.asarray(classes, dtype=np.dtype(h["classes_dtype"]) if h.get("classes_dtype") else None)
    except (TypeError, ValueError) as exc:
        raise bad(f"classes_dtype {h.get('classes_dtype')!r} cannot hold the classes ({exc})") from None
    if len(classes) < 2 or len(set(typed.tolist())) != len(classes) or typed.ndim != 1:
        raise bad(f"classes must be two or more distinct labels, got {typed.tolist()!r}"[:200])
    n_members = h.get("n_members", 1)
    if not isinstance(n_members, int) or isinstance(n_members, bool) or n_members < 1:
        raise bad(f"n_members must be a positive integer, got {n_members!r}")
    if h["n_features_in"] < 1:
        raise bad(f"n_features_in must be positive, got {h['n_features_in']}")
    names = h.get("feature_names_in")
    if names is not None and (not isinstance(names, list) or len(names) != h["n_features_in"]
                              or not all(isinstance(n, str) for n in names)):
        raise bad(f"feature_names_in must be {h['n_features_in']} names")
    for key, ok in (("head_C", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0),
                    ("head_features", lambda v: v in ("all", "similarity")),
                    ("histories", lambda v: isinstance(v, list))):
        if key in h and (not isinstance(h[key], list) or len(h[key]) != n_members or not all(map(ok, h[key]))):
            raise bad(f"{key} must hold one valid entry per member, got {h[key]!r}"[:200])
    if "seed" in h and (not isinstance(h["seed"], int) or isinstance(h["seed"], bool) or h["seed"] < 0):
        raise bad(f"seed must be an int >= 0, got {h['seed']!r}")
    mode = h["standardizer"].get("mode")
    if mode not in ("feature", "instance", "none"):
        raise bad(f"standardizer mode must be 'feature', 'instance' or 'none', got {mode!r}")
    if mode == "feature" and not {"standardizer/mean", "standardizer/scale"} <= set(tensors):
        raise bad("a 'feature' standardizer needs its mean and scale tensors")
    for name, t in tensors.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise bad(f"tensor {name!r} holds NaN or infinite values")
    for key in ("mean", "scale"):
        t = tensors.get(f"standardizer/{key}")
        if t is not None and tuple(t.shape) != (h["n_features_in"],):
            raise bad(f"standardizer {key} has shape {tuple(t.shape)}, not ({h['n_features_in']},)")
    scale = tensors.get("standardizer/scale")
    if scale is not None and not bool((scale > 0).all()):
        raise bad("standardizer scale must be positive")
    members = {k.split("/")[0] for k in tensors if k.startswith("member")}
    if len(members) != n_members - 1:
        raise bad(f"the header says {n_members} member(s) but the file holds {len(members) + 1}")
    src = tensors.get("prototype_sources")
    n_prototypes = h["params"].get("n_prototypes")
    if src is not None and (src.ndim != 3 or tuple(src.shape[::2]) != (n_members, 2) or src.shape[1] != n_prototypes
                            or bool((src < 0).any())):
        raise bad(f"prototype_sources has shape {tuple(src.shape)} (not ({n_members}, {n_prototypes}, 2)) or "
                  "negative entries")
    if mode != "feature" and {"standardizer/mean", "standardizer/scale"} & set(tensors):
        raise bad(f"a {mode!r} standardizer has no mean or scale, and the file holds them")
    if h["params"].get("monotone") is True:  # the variant's guarantee: every classifier weight <= 0
        for name, t in tensors.items():
            if name.endswith("/weight") and bool((t > 0).any()):
                raise bad(f"monotone=True but {name!r} holds positive weights")
