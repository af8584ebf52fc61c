"""What the command line's model flags build: Table 1's configs with the flags given, the
monotone variant's, and the estimator ``train`` fits.

``reproduce``, ``cv`` and ``train`` read ``--prototypes``, ``--epochs``, ``--distance``, the rates
and the penalties through :func:`overrides`; a flag left out is absent, so each recipe keeps its
own value for it.
"""
from __future__ import annotations

from .methods import MONOTONE_MODEL, MONOTONE_TRAIN

__all__ = ["check_monotone_flags", "config_record", "configs_from", "estimator_from", "flag_names", "monotone_configs",
           "overrides"]


def pooling_flag(args) -> tuple[str, ...] | None:
    """--pooling as a tuple ("min, max" too), or None when it was not given."""
    return tuple(p.strip() for p in args.pooling.split(",")) if getattr(args, "pooling", None) else None


def configs_from(args, dataset_name: str, compat: str | None = None):
    """Model/train configs and standardisation: Table 1 for benchmarks, then CLI overrides."""
    from dataclasses import replace

    from .model import PrototypeMILConfig, compat_config
    from .paper import TABLE1, paper_configs
    from .training import TrainConfig, compat_train_config

    if dataset_name in TABLE1:
        mconf, tconf = paper_configs(dataset_name)
    else:
        mconf, tconf = PrototypeMILConfig(), TrainConfig()
    m_over, t_over = overrides(args)
    given = getattr(args, "standardization", None)  # None: not on the command line
    standardization = given or "feature"
    compat = compat or getattr(args, "compat", "none")
    if compat == "official":
        mconf, tconf = compat_config(mconf), compat_train_config(tconf)
        standardization = given or "instance"  # the published code's, unless the flag says otherwise
    return replace(mconf, **m_over), replace(tconf, **t_over), standardization


def overrides(args) -> tuple[dict, dict]:
    """The model and training settings given on the command line (flags left out are not in them)."""
    m_over = {k: v for k, v in dict(
        n_prototypes=getattr(args, "prototypes", None),
        distance=getattr(args, "distance", None),
        pooling=pooling_flag(args),
        lambda_w=getattr(args, "lambda_w", None),
        lambda_p=getattr(args, "lambda_p", None),
        lambda_d=getattr(args, "lambda_d", None),
    ).items() if v is not None}
    if getattr(args, "no_layer_norm", False):
        m_over["layer_norm"] = False
    t_over = {k: v for k, v in dict(
        epochs=getattr(args, "epochs", None),
        batch_size=getattr(args, "batch_size", None),
        lr_prototypes=getattr(args, "lr_prototypes", None),
        lr_classifier=getattr(args, "lr_classifier", None),
    ).items() if v is not None}
    return m_over, t_over


def check_monotone_flags(args) -> None:
    """Refuse, before any work, a --pooling the monotone row cannot take (its guarantee needs min pooling
    alone): the flag would otherwise be dropped for that row while run.json counts it as reaching it."""
    pooling = pooling_flag(args)
    if pooling not in (None, ("min",)):
        raise ValueError(f"--pooling {args.pooling}: prototype-monotone pools by min only (its guarantee needs it); "
                         "drop --pooling or run prototype-monotone on its own.")


def monotone_configs(args, mconf, tconf):
    """Table 1's configs made monotone, with :data:`MONOTONE_MODEL`/``_TRAIN`` unless overridden."""
    from dataclasses import replace

    from .model import monotone_config

    check_monotone_flags(args)

    unset = lambda d: {k: v for k, v in d.items() if getattr(args, k.replace("n_", ""), None) is None}  # noqa: E731
    mconf = monotone_config(mconf, init="kmeans++", **unset(MONOTONE_MODEL))
    return mconf, replace(tconf, **unset(MONOTONE_TRAIN))


def estimator_from(args, dataset_name: str):
    """The estimator ``train`` fits: the paper's model with Table 1 and the flags, or ``--recommended``'s."""
    from .estimator import PrototypeMILClassifier

    common = dict(
        device=args.device, backend=args.backend, random_state=args.seed, verbose=not getattr(args, "quiet", False),
        **({"chunk_size": args.chunk_size} if getattr(args, "chunk_size", None) else {}),
        autocast=None if getattr(args, "autocast", "none") == "none" else args.autocast,
    )
    if getattr(args, "recommended", False):
        if args.compat != "none":
            raise ValueError("--recommended and --compat official are two different models; choose one.")
        m_over, t_over = overrides(args)  # its recipe, then only the flags given
        return PrototypeMILClassifier.recommended(**m_over, **t_over, class_weight=args.class_weight,
                                                  standardization=args.standardization or "feature", **common)
    if getattr(args, "class_weight", None) is not None:
        raise ValueError("--class-weight weights the convex head of --recommended; the paper's model has none.")
    mconf, tconf, std = configs_from(args, dataset_name)
    return PrototypeMILClassifier(**mconf.to_dict(), **tconf.to_dict(), standardization=std, **common)


def flag_names(args) -> list[str]:
    """The model flags given on the command line, as typed (``--prototypes``, ``--no-layer-norm``, ...)."""
    names = {"n_prototypes": "--prototypes", "layer_norm": "--no-layer-norm"}
    flags = [names.get(k, "--" + k.replace("_", "-")) for over in overrides(args) for k in over]
    return flags + (["--standardization"] if getattr(args, "standardization", None) else [])


def config_record(mconf, tconf, standardization: str) -> dict:
    """What one prototype-model row ran with, as ``run.json`` writes it."""
    return {"model": mconf.to_dict(), "train": tconf.to_dict(), "standardization": standardization}
