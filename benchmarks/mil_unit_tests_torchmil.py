"""The three MIL unit tests built with torchmil's generators instead of the package's own.

An outside check of the unit-test page (issue 28, item 6): the package's generators
(``minitorch_proto.data.synthetic``) are its own reading of Raff & Holt (NeurIPS 2023);
torchmil (PyPI ``torchmil``, no code shared with this package) ships another one,
``SCStandardMILDataset`` (their Algorithm 1), ``MCStandardMILDataset`` (Algorithm 2) and
``FalseFrequencyMILDataset`` (Algorithm 3). This script wraps each torchmil generator as a
``(train, test)`` pair of :class:`~minitorch_proto.data.SyntheticBags` and hands the three to
the package's own harness (:func:`minitorch_proto.book.mil_unit_test_table` ->
:func:`~minitorch_proto.evaluation.mil_unit_tests.run_mil_unit_tests`): the same models
(:func:`~minitorch_proto.book.default_mil_unit_test_models`), the same settings, the same
seed handed to every model, the same pass criterion (test accuracy >= 0.75) as
``benchmarks/mil_unit_tests_seeds.py``. Only the data differ.

Choices (torchmil's constructors take ``D``, ``num_bags``, ``pos_class_prob``, ``train``,
``seed`` and, for the single-concept test, ``B``):

* ``D = 10`` features, ``num_bags = 200`` training and 200 test bags,
  ``pos_class_prob = 0.5``: the package generators' defaults (``n_features=10``,
  ``n_train = n_test = 200``, half positive).
* ``B = 12`` background instances per single-concept bag: the middle of the package's bag
  size range (8-16). The other two torchmil generators draw 1-9 background instances
  themselves and take no size argument.
* Seeding: torchmil calls ``np.random.seed(seed)`` but draws every instance and count with
  ``torch.distributions`` / ``torch.randint`` from torch's *global* generator, so its
  ``seed`` argument does not fix the data. The wrapper therefore calls
  ``torch.manual_seed(seed)`` and then builds the training set and the test set from the same
  torch stream (so they are independent draws), passing ``seed`` to torchmil as well.
* torchmil lists all positive bags before all negative ones; the wrapper shuffles each set
  with ``numpy.random.default_rng(seed)`` (order carries no information; it only keeps
  mini-batch training from seeing one class at a time). Bags become ``float64`` arrays.
* torchmil's package ``__init__`` imports its trainer, which needs ``torchmetrics``; the three
  dataset modules (torch, numpy and tensordict only) are loaded from their files instead.
* Instance labels: torchmil's ``y_inst`` (1 concept, 0 background, -1 poison) is kept in
  ``info["y_inst"]``; ``instance_labels`` is ``y_inst == 1``.

torchmil is not a dependency of the project; install it beside the venv, not into it::

    .venv/bin/python -m pip install --target /tmp/tmil --no-deps torchmil tensordict einops "pyvers<0.3"

Rows are appended per (model, seed) to ``--out`` as they come (resumable, seeds in the outer
loop); ``--freeze`` writes them as the frozen table ``mil_unit_tests_torchmil``::

    PYTHONPATH=.:/tmp/tmil python benchmarks/mil_unit_tests_torchmil.py --seeds 0-9 --out benchmarks/out/unit_torchmil.csv
    PYTHONPATH=.:/tmp/tmil python benchmarks/mil_unit_tests_torchmil.py --out benchmarks/out/unit_torchmil.csv --freeze
"""
from __future__ import annotations

import importlib.util
import sys
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from minitorch_proto import book

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mil_unit_tests_seeds import _locked  # noqa: E402  (one lock helper for both sweeps)
from minitorch_proto.about import code_version
from minitorch_proto.book.frozen import write_frozen
from minitorch_proto.data import SyntheticBags
from minitorch_proto.evaluation.mil_unit_tests import summarize_unit_tests
from script_args import Parser, freeze_commit, output_file, seed_list, seed_text  # this folder is on sys.path

#: Sizes handed to torchmil (see the module docstring).
N_FEATURES = 10
N_BAGS = 200
SC_BACKGROUND = 12


def _import_torchmil():
    """torchmil's three generator classes, loaded from their own files.

    ``import torchmil`` also imports its trainer, which needs ``torchmetrics`` (not needed
    here); the three dataset modules import only torch, numpy and tensordict, so they are
    loaded from the installed package's files without running its ``__init__``.
    """
    spec = importlib.util.find_spec("torchmil")
    if spec is None or not spec.submodule_search_locations:
        print("mil_unit_tests_torchmil: torchmil is not importable; install it with `.venv/bin/python -m pip "
              "install --target /tmp/tmil --no-deps torchmil tensordict einops 'pyvers<0.3'` and run with "
              "PYTHONPATH=.:/tmp/tmil", file=sys.stderr)
        sys.exit(2)
    folder = Path(list(spec.submodule_search_locations)[0]) / "datasets"

    def load(stem: str, cls: str):
        mspec = importlib.util.spec_from_file_location(f"_torchmil_{stem}", folder / f"{stem}.py")
        module = importlib.util.module_from_spec(mspec)
        mspec.loader.exec_module(module)
        return getattr(module, cls)

    return {"single_concept": (load("sc_standard_dataset", "SCStandardMILDataset"), {"B": SC_BACKGROUND}),
            "multi_concept": (load("mc_standard_dataset", "MCStandardMILDataset"), {}),
            "false_frequency": (load("false_frequency_dataset", "FalseFrequencyMILDataset"), {})}


def _to_bags(dataset, name: str, seed: int, split: str) -> SyntheticBags:
    items = [dataset[i] for i in range(len(dataset))]
    order = np.random.default_rng([seed, 0 if split == "train" else 1]).permutation(len(items))
    items = [items[i] for i in order]
    y_inst = [it["y_inst"].numpy().astype(np.int64) for it in items]
    return SyntheticBags(
        bags=[it["X"].numpy().astype(np.float64) for it in items],
        y=np.array([int(it["Y"]) for it in items], dtype=np.int64),
        name=f"torchmil {type(dataset).__name__} ({split})",
        instance_labels=[(v == 1).astype(np.int64) for v in y_inst],
        info={"source": f"torchmil.datasets.{type(dataset).__name__}", "y_inst": y_inst, "split": split},
    )


def torchmil_tests() -> dict:
    """Name -> generator ``(random_state=seed) -> (train, test)`` wrapping torchmil's datasets."""
    out = {}
    for name, (cls, extra) in _import_torchmil().items():
        def generate(random_state=0, cls=cls, extra=extra, name=name):
            seed = int(random_state)
            torch.manual_seed(seed)
            train = cls(D=N_FEATURES, num_bags=N_BAGS, pos_class_prob=0.5, train=True, seed=seed, **extra)
            test = cls(D=N_FEATURES, num_bags=N_BAGS, pos_class_prob=0.5, train=False, seed=seed, **extra)
            return _to_bags(train, name, seed, "train"), _to_bags(test, name, seed, "test")
        out[name] = generate
    return out


def main(argv: list[str] | None = None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0-9", help="LO-HI (both included), a list such as 0,3,7, or one seed "
                   "(default 0-9)")
    p.add_argument("--models", default=None, help="comma-separated names (default: every model)")
    p.add_argument("--out", type=output_file, required=True, help="CSV collecting the rows (appended, resumable)")
    p.add_argument("--lock", default=None, help="file to flock around each (model, seed)")
    p.add_argument("--freeze", action="store_true", help="write the collected rows as the frozen table and stop")
    p.add_argument("--note", default=None, help="with --freeze: a line for the provenance file")
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.freeze and not out.is_file():
        p.error(f"--freeze: --out {out} is no file of collected rows")
    if args.freeze:
        commit = freeze_commit(p)  # the table names the code it was frozen from, which must be committed
        table = pd.read_csv(out)
        n = table.groupby("model")["seed"].nunique()
        versions = table.fillna({"code_version": "unknown"}).groupby("model")["code_version"].unique()
        write_frozen(table, "mil_unit_tests_torchmil",
                     command=(f"python benchmarks/mil_unit_tests_torchmil.py --seeds {seed_text(table['seed'])} --out {args.out}, "
                              f"then the same with --freeze"),
                     description="MIL unit tests on torchmil's generators (SCStandardMILDataset, MCStandardMILDataset, "
                                 "FalseFrequencyMILDataset; D=10, 200/200 bags, B=12; pass: test accuracy >= 0.75) "
                                 "per model and seed",
                     generators={"single_concept": "torchmil.datasets.SCStandardMILDataset(D=10, num_bags=200, B=12)",
                                 "multi_concept": "torchmil.datasets.MCStandardMILDataset(D=10, num_bags=200)",
                                 "false_frequency": "torchmil.datasets.FalseFrequencyMILDataset(D=10, num_bags=200)",
                                 "seeding": "torch.manual_seed(seed), then train and test sets from the same stream; "
                                            "bags shuffled with numpy.random.default_rng([seed, split])"},
                     torchmil_version=table["torchmil_version"].iloc[0] if "torchmil_version" in table else "unknown",
                     seeds_per_model={str(k): int(v) for k, v in n.items()},
                     code_versions={str(k): sorted(map(str, v)) for k, v in versions.items()}, commit=commit,
                     notes="torchmil is not a project dependency: installed with pip --target beside the venv "
                           "and put on PYTHONPATH; models, settings and pass criterion are those of "
                           "benchmarks/mil_unit_tests_seeds.py (frozen table mil_unit_tests_seeds)"
                           + (f"; {args.note}" if args.note else ""))
        print(summarize_unit_tests(table).round(3).to_string())
        return 0
    try:
        seeds = seed_list(args.seeds)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tests = torchmil_tests()
    torch.set_num_threads(1)
    available = book.default_mil_unit_test_models()
    names = [n.strip() for n in args.models.split(",")] if args.models else list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"error: unknown model(s) {unknown}; choose from {list(available)}", file=sys.stderr)
        return 2
    done = set()
    if out.exists():
        old = pd.read_csv(out)
        done = set(zip(old["model"], old["seed"]))
    cv, tv = code_version(), version("torchmil")
    out.parent.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        for name in names:
            if (name, seed) in done:
                continue
            with _locked(args.lock):
                t0 = time.perf_counter()
                rows = book.mil_unit_test_table({name: available[name]}, random_state=seed, tests=tests)
            rows["seed"] = seed
            rows["code_version"] = cv
            rows["torchmil_version"] = tv
            rows.to_csv(out, mode="a", header=not out.exists(), index=False)
            print(f"{name} seed {seed}: {time.perf_counter() - t0:.1f} s, accuracy "
                  + ", ".join(f"{a:.2f}" for a in rows["accuracy"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
