"""Reading and writing a fitted :class:`~minitorch_proto.estimator.PrototypeMILClassifier`.

What goes into the file (the parameters, classes, feature names, the standardiser's
statistics, every ensemble member's state dict, the pushed prototypes' sources, the
history) and how it is rebuilt. The file format itself - safetensors with a verified
JSON header, written atomically - is :mod:`minitorch_proto.serialization`'s.
"""
from __future__ import annotations

import contextlib
import numbers
import os
import re
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
        When ``set_params`` changed, after the fit, a setting the modules or the standardiser are rebuilt
        from (the file would load as another model: the fitted one in memory keeps its own settings), or
        set one that fit would refuse (:func:`load_estimator` refuses such a file: it could not be refitted).
    """
    models = getattr(clf, "models_", [clf.model_])
    fitted, now = asdict(models[0].config), asdict(clf.model_config())
    changed = [f"{k} ({fitted[k]!r} when fitted, now {now[k]!r})" for k in fitted if fitted[k] != now[k]]
    if len(models) != int(clf.n_seeds):
        changed.append(f"n_seeds ({len(models)} when fitted, now {clf.n_seeds!r})")
    # Not model-config fields, but the fitted state holds them too: the file would contradict itself.
    if clf.standardization != clf.standardizer_.mode:
        changed.append(f"standardization ({clf.standardizer_.mode!r} when fitted, now {clf.standardization!r})")
    if bool(clf.head_similarity) != models[0].has_similarity:
        changed.append(f"head_similarity ({models[0].has_similarity} when fitted, now {clf.head_similarity!r})")
    if changed:
        raise ValueError(f"set_params changed {', '.join(changed)} after fit; the file would load as another "
                         "model: fit again, or set them back, before saving.")
    tensors = {f"model/{k}": v for k, v in models[0].state_dict().items()}
    # Ensemble members after the first: state dicts of the same shapes, in seed order.
    for j, member in enumerate(models[1:], start=1):
        tensors.update({f"member{j}/{k}": v for k, v in member.state_dict().items()})
    import torch

    other = next((f"{k} ({v.dtype})" for k, v in tensors.items() if v.dtype != torch.float32), None)
    if other is not None:  # load reads float32 modules only (fit leaves them so): a cast there would change them
        raise ValueError(f"the fitted modules must be float32 to be saved, as fit leaves them; {other} is not: "
                         "convert them back (model.float()) before saving.")
    if getattr(clf, "prototype_sources_", None) is not None:
        tensors["prototype_sources"] = np.asarray(clf.prototype_sources_, dtype=np.int64)
    state = clf.standardizer_.get_state()
    for key in ("mean", "scale"):
        if state.get(key) is not None:
            tensors[f"standardizer/{key}"] = np.asarray(state[key], dtype=np.float64)
    params = clf.get_params()
    if not isinstance(params["random_state"], (type(None), numbers.Integral, np.integer)):
        params["random_state"] = None  # a generator's state is not part of the fitted model
    if params["device"] is not None and not isinstance(params["device"], str):
        params["device"] = str(params["device"])  # a torch.device, which fit accepts too
    # What load refuses is not written: settings set_params changed after the fit, which fit would refuse.
    clf.train_config()
    clf._check_settings()
    problem = _fit_setting_problem(params)
    if problem is not None:
        raise ValueError(f"{problem}; fit would refuse it, so a loaded copy could not be fitted again: set it back "
                         "with set_params before saving.")
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
    """Rebuild a ``cls`` (a PrototypeMILClassifier class) from a file written by :func:`save_estimator`.

    Raises
    ------
    ModelFileError
        One line naming the file: damaged, not a model file, or content :func:`check_model_content`
        refuses (a re-signed file that would load as another model, or could not be refitted).
    """
    mf = load_model_file(path)
    h = mf.header
    check_model_content(path, h, mf.tensors)
    if h.get("estimator", cls.__name__) != cls.__name__:
        raise ModelFileError(f"{path} holds a model of class {h.get('estimator')!r}, not a {cls.__name__}.")
    try:
        params = dict(h["params"])
        for key in ("pooling", "betas"):  # JSON has lists; the parameters were tuples
            if isinstance(params.get(key), list):
                params[key] = tuple(params[key])
        unknown = sorted(set(params) - set(cls._get_param_names()))
        if unknown:
            raise ModelFileError(f"{path} was written by a newer version (unknown parameters {unknown}).")
        if params.get("device") == "None":
            params["device"] = None  # how save spelled device=None before it kept None as it is
        clf = cls(**params)
        clf.classes_ = _typed_classes(h["classes"], h.get("classes_dtype"))  # checked: the labels unchanged
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
    could still get wrong or make up (header types, two or more distinct classes kept as they were
    written, tensors of the names and dtypes save writes, finite, standardiser shapes, the number of
    members, prototype sources, the parameters that decide predictions and agree with the tensors).

    Parameters
    ----------
    path : str or PathLike
        The file, for the messages.
    h : dict
        Its verified header.
    tensors : dict of str to torch.Tensor
        Its verified tensors.

    Raises
    ------
    ModelFileError
        Naming the file and the first problem found.
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
    try:  # as they will be read: a classes_dtype could truncate two labels into one, or rename them
        typed = _typed_classes(classes, h.get("classes_dtype"), exact=False)
    except ValueError as exc:
        raise bad(str(exc)[:300]) from None
    if len(classes) < 2 or len(set(typed.tolist())) != len(classes) or typed.ndim != 1:
        raise bad(f"classes must be two or more distinct labels, got {typed.tolist()!r}"[:200])
    try:
        _typed_classes(classes, h.get("classes_dtype"))
    except ValueError as exc:
        raise bad(str(exc)[:300]) from None
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
                    ("histories", lambda v: isinstance(v, list) and all(isinstance(e, dict) for e in v))):
        if key in h and (not isinstance(h[key], list) or len(h[key]) != n_members or not all(map(ok, h[key]))):
            # Said by count first: a history is hundreds of numbers, which a one-line message cuts off.
            n = len(h[key]) if isinstance(h[key], list) else None
            got = type(h[key]).__name__ if n is None else f"{n} {'entry' if n == 1 else 'entries'}"
            raise bad(f"{key} must hold one valid entry per member ({n_members}), got {got}: {h[key]!r}"[:200])
    history = h.get("history", [])  # save writes one dict of loss terms per epoch
    if not isinstance(history, list) or not all(isinstance(e, dict) for e in history):
        raise bad(f"history must be a list of per-epoch records (objects), got {history!r}"[:200])
    if "seed" in h and (not isinstance(h["seed"], int) or isinstance(h["seed"], bool) or h["seed"] < 0):
        raise bad(f"seed must be an int >= 0, got {h['seed']!r}")
    mode = h["standardizer"].get("mode")
    if mode not in ("feature", "instance", "none"):
        raise bad(f"standardizer mode must be 'feature', 'instance' or 'none', got {mode!r}")
    if mode == "feature" and not {"standardizer/mean", "standardizer/scale"} <= set(tensors):
        raise bad("a 'feature' standardizer needs its mean and scale tensors")
    members = {k.split("/")[0] for k in tensors if k.startswith("member")}
    if len(members) != n_members - 1:
        raise bad(f"the header says {n_members} member(s) but the file holds {len(members) + 1}")
    _check_tensor_names_and_dtypes(path, tensors, n_members, bad)
    for name, t in tensors.items():  # every float tensor: the dtypes are checked, so no complex one is left out
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise bad(f"tensor {name!r} holds NaN or infinite values")
    for key in ("mean", "scale"):
        t = tensors.get(f"standardizer/{key}")
        if t is not None and tuple(t.shape) != (h["n_features_in"],):
            raise bad(f"standardizer {key} has shape {tuple(t.shape)}, not ({h['n_features_in']},)")
    scale = tensors.get("standardizer/scale")
    if scale is not None and not bool((scale > 0).all()):
        raise bad("standardizer scale must be positive")
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
    _check_params(h["params"], mode, tensors, bad)


# The parameters that decide what a loaded model predicts, which every file must state: one missing would
# take the constructor's default and load another model (a cosine model as a Euclidean one). Other
# parameters may be absent, as in files written before they existed: their defaults are what those files
# meant, and those that shape the model are checked against its tensors (head_similarity) or its other
# parameters (monotone, when layer_norm=None leaves layer normalisation to it).
# layer_norm_eps is not among them: savers before it became a parameter (format 2 until 9671866, and
# every 0.1 file) did not write it, and its default, 1e-6, is the value those models used.
_PREDICTION_PARAMS = ("n_prototypes", "distance", "pooling", "layer_norm", "bias", "standardization")
# One module's tensors, as its state_dict names them (similarity_sigma2 only with head_similarity=True).
_MODULE_TENSORS = ("prototypes", "weight", "bias", "similarity_sigma2")
_MODULE_NAME = re.compile(r"(model|member([1-9][0-9]*))/(" + "|".join(_MODULE_TENSORS) + ")")


def _check_tensor_names_and_dtypes(path, tensors: dict, n_members: int, bad) -> None:
    """Every tensor is one save writes, with the dtype it writes, before anything reads or casts it.

    save writes float32 modules (a model ``fit_streaming`` trained in float64 is converted first), float64
    standardisation statistics and int64 prototype sources; a tensor of another dtype would be cast
    on loading (an int64 or bool weight predicts other numbers, a complex NaN passes as finite).
    An unknown tensor is a newer version's or another program's, and is refused as an unknown
    parameter is: this version could not say what it changes.
    """
    import torch

    unknown, wrong = [], []
    for name, t in sorted(tensors.items()):
        module = _MODULE_NAME.fullmatch(name)
        if module is not None and (module.group(2) is None or int(module.group(2)) < n_members):
            want = torch.float32
        elif name in ("standardizer/mean", "standardizer/scale"):
            want = torch.float64
        elif name == "prototype_sources":
            want = torch.int64
        else:
            unknown.append(name)
            continue
        if t.dtype != want:
            wrong.append(f"tensor {name!r} has dtype {t.dtype}, and save writes it as {want}")
    if unknown:
        raise ModelFileError(f"{path} was written by a newer version or another program (unknown tensors "
                             f"{unknown[:5]}{' ...' if len(unknown) > 5 else ''}); this version reads only the "
                             "tensors its own save writes.")
    if wrong:
        raise bad(wrong[0])


def _check_params(params: dict, mode: str, tensors: dict, bad) -> None:
    """The parameters that decide predictions are there and agree with the tensors; fit-only ones are valid."""
    missing = [k for k in _PREDICTION_PARAMS if k not in params]
    if params.get("layer_norm", False) is None and "monotone" not in params:
        missing.append("monotone")  # layer_norm=None means "on, unless monotone"
    if missing:
        raise bad(f"its params lack {missing}, which decide its predictions; save writes every parameter")
    if params["standardization"] != mode:
        raise bad(f"params.standardization is {params['standardization']!r} but its standardizer is {mode!r}; "
                  "they must agree")
    similarity = params.get("head_similarity", False)
    for prefix in sorted({name.split("/")[0] for name in tensors if "/" in name} - {"standardizer"}):
        if (f"{prefix}/similarity_sigma2" in tensors) != (similarity is True):
            raise bad(f"params.head_similarity is {similarity!r} but {prefix!r} "
                      f"{'has' if similarity is not True else 'lacks'} the similarity block (similarity_sigma2)")
    problem = _fit_setting_problem(params)
    if problem is not None:
        raise bad(f"{problem} (a loaded model must be fitted again with its own settings)")


def _fit_setting_problem(params: dict) -> str | None:
    """What ``fit`` would refuse in the settings only ``fit`` reads (None: nothing).

    Only what fit itself checks: a device must be one fit understands, not one this machine has (a
    model trained on a GPU loads and predicts on the CPU); ``head_penalty`` only with the logistic head.
    """
    import torch

    from .training.distributed import AUTOCAST_DTYPES  # fit_streaming's; fit takes None, "none" and "bf16"

    device = params.get("device", "auto")
    if device not in (None, "None"):  # "None": how save spelled device=None before it kept None as it is
        kind = None
        if isinstance(device, str):
            with contextlib.suppress(RuntimeError):  # torch's "Expected one of cpu, cuda, ..." for a bad name
                kind = "auto" if device.lower() == "auto" else torch.device(device).type
        if kind not in ("auto", "cpu", "cuda"):
            return f"device {device!r} is not one fit takes ('auto', 'cpu', 'cuda' or 'cuda:N')"
    backend = params.get("backend", "auto")
    if backend not in ("auto", "compiled", "tensor"):
        return f"backend must be 'auto', 'compiled' or 'tensor', got {backend!r}"
    autocast = params.get("autocast")
    if not isinstance(autocast, (str, type(None))) or autocast not in AUTOCAST_DTYPES:
        return f"autocast must be None or 'bf16', got {autocast!r}"
    seed = params.get("random_state")
    if seed is not None and (not isinstance(seed, (numbers.Integral, np.integer)) or isinstance(seed, bool)
                             or not 0 <= seed < 2**63):
        return f"random_state must be None or an int from 0 to 2**63 - 1, got {seed!r}"
    if params.get("head") == "logistic" and params.get("head_penalty", "l2") not in ("l1", "l2"):
        return f"head_penalty must be 'l1' or 'l2', got {params.get('head_penalty')!r}"
    return None


# Label types save writes (classes_.dtype.str: NumPy's bool, integers, floats, text, objects) and the
# JSON values each is written as; a classes_dtype of another kind (dates, bytes, records) is no file of ours.
_CLASS_VALUES = {"b": (bool,), "i": (int,), "u": (int,), "f": (float,), "U": (str,), "O": (str, int, float, bool)}
# A text dtype's width is not bounded by the labels the header holds; the array it makes is, here (save
# writes the labels' own width: a thousand labels of 4,000 characters stay below it).
_MAX_CLASSES_BYTES = 1 << 24


def _typed_classes(classes: list, dtype_text, *, exact: bool = True) -> np.ndarray:
    """The header's classes as the ``classes_`` array save wrote them from.

    Parameters
    ----------
    classes : list
        The header's labels (plain JSON values).
    dtype_text : str or None
        The header's ``classes_dtype``; None (files from before it was written): NumPy's own reading.
    exact : bool, default=True
        Also refuse a conversion that changes a label (False: only convert, so that a caller can say
        first that two labels became one).

    Returns
    -------
    ndarray

    Raises
    ------
    ValueError
        One line: a dtype save never writes, labels of another type than it says, or a conversion that
        overflows or changes a label (``'<U1'`` makes ``'neg'`` ``'n'``).
    """
    if dtype_text is None:
        return np.asarray(classes)
    try:
        dtype = np.dtype(dtype_text) if isinstance(dtype_text, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in _CLASS_VALUES:
        raise ValueError(f"classes_dtype {dtype_text!r} is not a label type save writes (a NumPy bool, integer, "
                         "float, text or object dtype)")
    if dtype.itemsize * len(classes) > _MAX_CLASSES_BYTES:  # '<U500000000' would allocate 2 GB per label
        raise ValueError(f"classes_dtype {dtype_text!r} is wider than any label save writes")
    try:
        with np.errstate(all="ignore"):  # an overflow is refused below, by comparing the labels
            typed = np.asarray(classes, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"classes_dtype {dtype_text!r} cannot hold the classes ({exc})") from None
    if not exact:
        return typed
    values = _CLASS_VALUES[dtype.kind]
    of_type = all(isinstance(c, values) and (dtype.kind in "bO" or not isinstance(c, bool)) for c in classes)
    if not of_type or typed.tolist() != classes:
        raise ValueError(f"classes_dtype {dtype_text!r} would read the classes {classes!r} as {typed.tolist()!r}; "
                         "it must hold them unchanged, as save writes it")
    return typed
