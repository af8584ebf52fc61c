"""The command line's options: argument types that check their values, and the data and model
option groups several commands share (:mod:`minitorch_proto.cli` builds the commands from them)."""
from __future__ import annotations

import argparse

import numpy as np

from .validation import SEED_MAX

__all__ = ["Parser", "add_data_args", "add_model_args", "count", "number", "seed", "text"]


class Parser(argparse.ArgumentParser):
    """argparse with its usage errors in one line, as every other error of the command line
    (argparse prints the whole usage block first, 10 to 20 lines); ``--help`` shows the usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def text(text: str) -> str:
    """A path, name or list option: an empty value is refused (it had meant "not given" to some
    options, standard output to others, and the current folder to --model)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a value")
    return text


def add_data_args(p: argparse.ArgumentParser, single: bool = True) -> None:
    """Where the bags come from: one source (``single``) or benchmark names, and the loaders' options."""
    if single:
        src = p.add_mutually_exclusive_group(required=True)
        src.add_argument("--dataset", type=text, help="benchmark name: musk1, musk2, fox, tiger, elephant; or the "
                         "pathology set ucsb_breast_cancer (checked by its sha256, as the benchmarks are)")
        src.add_argument("--csv", type=text, help="your own CSV: one row per instance, with a bag column and a "
                         "label column (predict: the label column is optional)")
        src.add_argument("--bags-dir", type=text, help="folder of per-bag feature files (<bag>.npy, .pt, or .h5 "
                         "with a 'features' dataset), read lazily; bag ids and labels from --labels")
        p.add_argument("--labels", type=text, default=None, help="CSV of bag ids and labels for --bags-dir "
                       "(default: DIR/labels.csv)")
        p.add_argument("--follow-links", action="store_true",
                       help="with --bags-dir: also read feature files that are links to places outside the folder "
                       "(refused by default: a shared folder could otherwise point the tool at any of your files)")
        p.add_argument("--features-key", type=text, default=None, metavar="KEY",
                       help="with --bags-dir: the dataset of .h5 files (or key of .pt dicts) that holds each bag's "
                       "features (default: features)")
        p.add_argument("--no-header", action="store_true",
                       help="with --csv: the file has no header row, as in the classic MIL layout (label, bag, "
                       "features...) of the five benchmarks; columns are then numbered from 0, --bag-col and "
                       "--label-col default to 1 and 0, and a model's features are the other columns in order")
        p.add_argument("--bag-col", type=text, default=None, help="bag-id column of --csv or --labels (default: bag; "
                       "1 with --no-header)")
        p.add_argument("--label-col", type=text, default=None, help="label column of --csv or --labels (default: "
                       "label; 0 with --no-header)")
        p.add_argument("--ignore-cols", type=text, default=None, metavar="COLS",
                       help="with --csv: comma-separated columns that are neither the bag, the label nor a feature "
                       "(an instance id, a site, coordinates), left out alike by train, cv, predict and explain")
    p.add_argument("--data-dir", type=text, default=None,
                   help="folder holding the benchmark files (default: $MINITORCH_PROTO_DATA, else the user cache)")
    p.add_argument("--no-download", action="store_true", help="never download; fail if the files are not local")
    p.add_argument("--no-verify", action="store_true",
                   help="skip the sha256 check of a local benchmark copy (e.g. re-saved with other line endings); "
                   "the bag, instance and feature counts are still checked")
    p.add_argument("--download-timeout", type=number(positive=True, unit=" of seconds"), default=None,
                   metavar="SECONDS",
                   help="overall limit for downloading one file (default: $MINITORCH_PROTO_DOWNLOAD_TIMEOUT, "
                   "else the package default)")


def _int_in(text: str, low: int, high: int, what: str = "") -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not low <= value <= high:
        limit = f"too large: at most {high:,}" if value > high else f"at least {low}"
        raise argparse.ArgumentTypeError(f"{text} is out of range ({what or limit})")
    return value


def count(low: int):
    """A whole-number option of at least ``low``. Checked here, the error names the flag (not the
    estimator parameter behind it), and a huge one is no overflow deep in numpy or torch."""
    return lambda text: _int_in(text, low, 2**31 - 1)


def number(*, positive: bool, unit: str = ""):
    """A finite real option: positive (a learning rate, seconds) or at least 0 (a penalty weight)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number{unit}") from None
        if not np.isfinite(value) or value < 0 or (positive and value == 0):
            raise argparse.ArgumentTypeError(f"must be a finite number{unit} {'> 0' if positive else '>= 0'}, "
                                             f"got {text!r}")
        return value
    return parse


def seed(text: str) -> int:
    """A seed every command takes alike: numpy's range."""
    return _int_in(text, 0, SEED_MAX, "a seed is from 0 to 2**32 - 1")


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The paper model's settings, each left unset (None) unless given, so its defaults stay Table 1's."""
    g = p.add_argument_group("model and training (defaults: the paper's Table 1 for the chosen benchmark)")
    g.add_argument("--prototypes", type=count(1), default=None, help="number of prototypes D (24)")
    g.add_argument("--distance", default=None, choices=["euclidean", "sqeuclidean", "manhattan", "cosine", "pseudo"],
                   help="(default: euclidean; pseudo with --compat official)")
    g.add_argument("--pooling", type=text, default=None, help="comma-separated subset of min,mean,max (min)")
    g.add_argument("--no-layer-norm", action="store_true", help="switch off per-bag layer normalisation")
    g.add_argument("--epochs", type=count(1), default=None, help="epochs (100)")
    g.add_argument("--batch-size", type=count(1), default=None,
                   help="bags per step (1); under torchrun the global minibatch, split across the processes")
    g.add_argument("--lr-prototypes", type=number(positive=True), default=None,
                   help="Adam rate of the prototypes (default: Table 1's for a benchmark, else 9e-5, "
                   "Musk1's: small for new data at 100 epochs; raise both, e.g. to 1e-2, or use --recommended)")
    g.add_argument("--lr-classifier", type=number(positive=True), default=None,
                   help="Adam rate of the classifier (default: Table 1's for a benchmark, else 3e-5, "
                   "Musk1's: small for new data at 100 epochs; raise both, e.g. to 1e-2, or use --recommended)")
    g.add_argument("--lambda-w", type=number(positive=False), default=None,
                   help="L1 weight penalty (default: Table 1's for a benchmark, else 3e-4)")
    g.add_argument("--lambda-p", type=number(positive=False), default=None,
                   help="prototype-norm penalty (default: Table 1's for a benchmark, else 4e-3)")
    g.add_argument("--lambda-d", type=number(positive=False), default=None,
                   help="distance penalty (default: Table 1's for a benchmark, else 1e-2)")
    g.add_argument("--standardization", default=None, choices=["feature", "instance", "none"],
                   help="per-fold feature scaling (default: feature; instance with --compat official)")
    g.add_argument("--compat", default="none", choices=["none", "official"],
                   help="'official': the published code's behaviour (the book's audit page lists it; in reproduce "
                   "its rows are added beside the paper's); default: the paper")
    g.add_argument("--device", default="auto", help="auto, cpu or cuda (reproduce: every row that trains with "
                   "torch; the scikit-learn baselines run on the CPU)")
    g.add_argument("--backend", default="auto", choices=["auto", "compiled", "tensor"],
                   help="training engine: compiled loops (CPU; the default there) or batched tensors (CPU/CUDA)")
    g.add_argument("--seed", type=seed, default=0, help="seed of the folds and the models (default: 0)")
