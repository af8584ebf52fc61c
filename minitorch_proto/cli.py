"""Command-line interface: ``minitorch-proto <command> --help``.

Exit codes: 0 success; 2 a usage or input error (a bad option, a missing,
empty or damaged input file, data the model cannot use, an ``--out`` path that
cannot be written), always reported in one line before any work where it can be
checked first; 1 any other failure (a download that failed, a full disk); 130 Ctrl-C.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .about import __version__, code_version
from .cli_inputs import (data_provenance, drop_notes, flush_notes, in_cli_words, load_benchmarks, load_data,
                         naming_bags, refuse_overwriting_inputs)
from .outputs import (check_input_file, check_output_path, check_results_folder, staged_directory, write_atomic,
                      write_together)

EXIT_USAGE = 2
EXIT_FAILURE = 1
EXIT_CODES_HELP = (
    "exit status: 0 success; 2 usage or input error (bad option, unreadable/damaged input file, unusable data, "
    "--out not writable); 1 other failures (download failed, disk full); 130 interrupted (outputs whole or absent)."
)


from .cli_args import Parser, add_data_args, add_model_args, count, number, seed, text
from .cli_models import (check_monotone_flags, config_record, configs_from, estimator_from, flag_names,
                         monotone_configs)
from .methods import PROTOTYPE, PROTOTYPE_COMPAT, PROTOTYPE_MONOTONE


def _encoded(y) -> tuple[np.ndarray, np.ndarray]:
    """Labels as 0..C-1 and the classes: the one encoding every command uses (as the estimator does)."""
    from .validation import check_labels

    return check_labels(y, len(y))


# ------------------------------------------------------------------ commands
#: What each results folder holds (besides the tuned rows' choices): checked against a folder before a run.
REPRODUCE_FILES = ("results.csv", "predictions.csv", "summary.csv", "timings.csv", "table2.txt", "run.json")
COMPARE_FILES = ("results.csv", "predictions.csv", "summary.csv", "summary.txt", "comparison.png", "run.json")


def cmd_reproduce(args) -> int:
    from .evaluation.cv import stratified_folds, summarize
    from .evaluation.report import average_ranks, format_table, table2
    from .evaluation.reproduction import PLACEMENT, flags_reach, placement, placement_reach, run_methods
    from .methods import common_budget_reach

    methods = list(args.methods)
    if args.compat == "official" and PROTOTYPE_COMPAT not in methods:
        # For reproduce, --compat official adds the published code's rows beside the paper's.
        methods.append(PROTOTYPE_COMPAT)
    if PROTOTYPE_MONOTONE in methods:
        check_monotone_flags(args)
    given = flag_names(args)
    reach = flags_reach(methods, given)
    if given and len(reach) < len(methods):  # run.json records which rows they reached
        print(f"note: {', '.join(given)} reach {', '.join(reach)}; the other rows keep their own settings.",
              file=sys.stderr)
    if args.budget != "defaults":  # as compare refuses it; here the prototype rows keep their defaults
        common_budget_reach(methods, args.budget)
    asked = [o for o in PLACEMENT if getattr(args, o) != "auto"]
    for option, rows in placement_reach(methods, asked).items():  # run.json records where each row ran
        if len(rows) < len(methods):
            print(f"note: --{option} {getattr(args, option)} reaches {', '.join(rows)}; the other rows "
                  f"{'run on the CPU' if option == 'device' else 'have no such choice'}.", file=sys.stderr)
    out = check_output_path(args.out, "dir")
    check_results_folder(out, "reproduce", REPRODUCE_FILES)
    started = time.perf_counter()
    data = load_benchmarks(args, args.datasets)
    folds = {name: stratified_folds(d.y, args.repeats, args.folds, random_state=args.seed) for name, d in data.items()}

    def configs(dataset: str, method: str):
        compat = "official" if method == PROTOTYPE_COMPAT else "none"
        mconf, tconf, std = configs_from(args, dataset, compat)
        if method == PROTOTYPE_MONOTONE:
            mconf, tconf = monotone_configs(args, mconf, tconf)
        return mconf, tconf, std

    budgets = ["defaults", "common"] if args.budget == "both" else [args.budget]
    results, timings, files = run_methods(methods, data, folds, configs, budgets=budgets, seed=args.seed,
                                          device=args.device, backend=args.backend, progress=not args.quiet,
                                          n_jobs=os.cpu_count() or 1)
    files["results.csv"] = results.to_csv(index=False)
    files["summary.csv"] = summarize(results).to_csv(index=False)
    files["timings.csv"] = pd.DataFrame(timings).to_csv(index=False)
    text = [f"{args.repeats} x {args.folds}-fold CV, seed {args.seed}, epochs {args.epochs or 'as each recipe'}, "
            f"data {', '.join(data)}, code {code_version()}"]
    for spread in ("se_repeats", "std_folds"):
        t = table2(results, spread=spread, include_reported=args.reported)
        text.append(format_table(t))
    if len(set(results.method)) > 1 and len(data) > 1:  # a rank over one data set says nothing
        ranks = average_ranks(results)
        text.append("average rank across data sets (1 = best, measured methods, final evaluation):\n"
                    + ranks.round(2).to_string())
    files["table2.txt"] = report = "\n\n".join(text) + "\n"
    # The settings each paper-model row ran with (Table 1, the flags, the published code's switches).
    ran = {m: {d: config_record(*configs(d, m)) for d in data}
           for m in methods if m in (PROTOTYPE, PROTOTYPE_COMPAT, PROTOTYPE_MONOTONE)}
    every_fold = [f for fs in folds.values() for f in fs]
    where = placement(methods, args.device, args.backend, budgets)  # "device": every device a row used; per row: placement
    files["run.json"] = _run_record(args, methods, data, every_fold, time.perf_counter() - started,
                                    device=", ".join(dict.fromkeys(p["device"] for p in where.values())),
                                    placement=where, flags_reach=reach if given else [], configs=ran)
    # All files or none: a crash while writing leaves the previous run's files as they were.
    with staged_directory(out, "reproduce") as stage:
        for name, content in files.items():
            (stage / name).write_text(content)
    print(report)
    print(f"wrote {out / 'results.csv'}, predictions.csv, summary.csv, timings.csv, table2.txt, run.json")
    return 0


def _run_record(args, methods: list[str], data: dict, folds: list, wall: float, command: str = "reproduce",
                **more) -> str:
    """``run.json`` (:func:`~minitorch_proto.about.run_record`) with the data read and the folds' shuffle seeds."""
    from .about import run_record

    settings = {k: v for k, v in vars(args).items()
                if k not in ("func", "command") and isinstance(v, (str, int, float, bool, type(None)))}
    seeds = sorted({f.split_seed for f in folds})
    return run_record(command, settings, methods, list(data), wall, argv=getattr(args, "argv", None),
                      data=data_provenance(data), split_seeds=seeds, **more)


def _parse_methods(spec: str) -> list[str]:
    """``--methods`` as results labels (:mod:`minitorch_proto.methods`); an unknown key is a usage error."""
    from .methods import resolve

    try:
        return [m.label for m in resolve(spec)]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_compare(args) -> int:
    from .evaluation.comparison import compare_methods, comparison_summary
    from .evaluation.cv import stratified_folds, summarize
    from .methods import make, resolve
    from .plots import plot_comparison

    methods = resolve(args.methods)
    # A method without an estimator is refused before any data is read
    estimators = {m.label: make(m.key, args.seed, budget=args.budget) for m in methods}
    out = check_output_path(args.out, "dir")
    check_results_folder(out, "compare", COMPARE_FILES)
    started = time.perf_counter()
    data, _ = load_data(args)
    flush_notes()
    n_classes = len(np.unique(data.y))
    binary = [label for label, est in estimators.items() if n_classes > 2 and _two_classes_only(est)]
    if binary:  # refused now, not after the methods listed before them have run
        raise ValueError(f"{', '.join(binary)} handle(s) two classes only and the data have {n_classes}: leave "
                         "them out of --methods.")
    folds = stratified_folds(data.y, args.repeats, args.folds, random_state=args.seed)
    with naming_bags(data.bag_ids):
        results, predictions = compare_methods(methods, getattr(data, "bags", data), data.y, folds,
                                               dataset=data.name, table1=args.dataset, budget=args.budget,
                                               random_state=args.seed, n_jobs=os.cpu_count() or 1,
                                               progress=not args.quiet, return_predictions=True,
                                               bag_ids=data.bag_ids)
    table, fig = comparison_summary(results), plot_comparison(results)
    with staged_directory(out, "compare") as stage:  # summary.csv numeric as reproduce's; the printed table beside it
        (stage / "results.csv").write_text(results.to_csv(index=False))
        (stage / "predictions.csv").write_text(predictions.to_csv(index=False))
        (stage / "summary.csv").write_text(summarize(results).to_csv(index=False))
        (stage / "summary.txt").write_text(table.to_string(index=False) + "\n")
        fig.savefig(stage / "comparison.png", dpi=120, bbox_inches="tight")
        (stage / "run.json").write_text(_run_record(args, [m.key for m in methods], {data.name: data}, folds,
                                                    time.perf_counter() - started, command="compare"))
    print(table.to_string(index=False))
    print(f"wrote {out / 'results.csv'}, predictions.csv, summary.csv, summary.txt, comparison.png, run.json")
    return 0


def cmd_cv(args) -> int:
    from .evaluation.cv import CVTask, evaluate_tasks, stratified_folds, summarize

    if args.out == "-":  # predict and explain print to standard output; cv writes three files
        raise ValueError("cv --out names a CSV file (beside it go .predictions.csv and .run.json); - is not one.")
    out = check_output_path(args.out, "file") if args.out else None
    if out is not None:  # the files written beside it, checked now too: a folder in their way failed after the run
        given = Path(args.out).expanduser()  # named after --out as given (a link's target is only where out goes)
        record, scored = (check_output_path(given.with_name(given.stem + suffix), "file")
                          for suffix in (".run.json", ".predictions.csv"))
    started = time.perf_counter()
    data, _ = load_data(args)
    flush_notes()
    y, classes = _encoded(data.y)
    mconf, tconf, std = configs_from(args, data.name)
    folds = stratified_folds(y, args.repeats, args.folds, random_state=args.seed)
    evaluations = ("final", "test_selected") if args.compat == "official" else ("final",)
    with naming_bags(data.bag_ids):
        task = CVTask(data.name, data.bags, y, folds, mconf, tconf, std, bag_ids=data.bag_ids, classes=classes)
        res, predictions = evaluate_tasks([task], evaluations=evaluations, device=args.device,
                                          progress=not args.quiet, backend=args.backend, return_predictions=True)
    # With one repeat the standard errors over repeats are undefined: their all-NaN columns are not printed.
    print(summarize(res).dropna(axis=1, how="all").round(4).to_string(index=False))
    if out is not None:  # the per-fold CSV and, beside it, each test bag's scores and what made them: all or none
        write_together({out: res.to_csv(index=False), scored: predictions.to_csv(index=False),
                        record: _run_record(args, [PROTOTYPE_COMPAT if args.compat == "official" else PROTOTYPE],
                                            {data.name: data}, folds, time.perf_counter() - started, command="cv",
                                            configs={data.name: config_record(mconf, tconf, std)})})
        print(f"wrote {out}, {scored.name} and {record.name}")
    return 0


def _two_classes_only(est) -> bool:
    """Whether ``est`` (or the estimator a wrapper tunes or ensembles) takes two classes only: a baseline,
    or the monotone prototype model (its guarantee is about the one positive logit)."""
    from .baselines._base import BaseMILClassifier

    while hasattr(est, "estimator"):
        est = est.estimator
    return isinstance(est, BaseMILClassifier) or getattr(est, "monotone", False) is True


def cmd_train(args) -> int:
    from .data.readers import shown_names
    from .training.distributed import init_distributed, process_device

    # Under torchrun (WORLD_SIZE > 1) every process joins the group and trains on its share of each minibatch.
    if args.out == "-":  # predict and explain read "-" as standard output; a model file is no stream
        raise ValueError("train --out names the model file to write; - (standard output) cannot hold one.")
    out = check_output_path(args.out, "file")
    _replaces_a_model_or_nothing(out)
    rank, world = init_distributed(args.device)
    try:
        if world > 1:  # "auto" as the process group chose it: a GPU per process, else the CPU for all
            args.device = process_device(args.device).type
        data, names = load_data(args)
        clf = estimator_from(args, data.name)
        flush_notes()
        with naming_bags(data.bag_ids):
            if world > 1 or args.stream:
                clf.fit_streaming(data.bags, data.y)
                if names is not None:
                    clf.feature_names_in_ = np.asarray(names, dtype=object)
            else:
                clf.fit(data.bags, data.y, feature_names=names)
        if rank != 0:
            return 0  # every process holds the same model: one scores and writes it
        accuracy = clf.score(data.bags, data.y)
        try:
            path = clf.save(out)
        except ValueError as exc:  # --out passed its check before training: what changed since is no usage error
            raise OSError(str(exc)) from None
    finally:
        if world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()
    procs = f" with {world} processes" if world > 1 else ""
    # Which columns became features: a CSV's every column but the bag and the label one is, an id or a
    # coordinate column included, and predict then requires it.
    features = f"{clf.n_features_in_} features" + (f": {shown_names(list(names))}" if names is not None else "")
    print(f"trained on {data.n_bags} bags ({data.name}, {features}){procs}; training accuracy {accuracy:.3f}; "
          f"saved to {path}")
    return 0


def _replaces_a_model_or_nothing(out: Path) -> None:
    """Refuse an --out that holds a file other than a model file: train would have replaced it silently."""
    from .serialization import is_model_file

    if not out.is_file() or out.stat().st_size == 0:
        return
    # By the model header itself: "PK" (any zip: a spreadsheet) or "{" at byte 8 (some JSON) had passed.
    if not is_model_file(out):
        raise ValueError(f"--out {out} holds a file that is not a model file; choose another name, or remove it "
                         "first.")


def _model_and_bags(args):
    """The saved model (--model), the checked --out (None: standard output) and the bags to read."""
    from .estimator import load_model

    model = check_input_file(args.model, "--model")
    out = check_output_path(args.out, "file") if args.out and args.out != "-" else None  # "-": standard output
    clf = load_model(model)
    data, _ = load_data(args, labels=False, feature_names=getattr(clf, "feature_names_in_", None))
    return clf, out, data


def _write_table(frame: pd.DataFrame, out: Path | None, what: str) -> int:
    text = frame.to_csv(index=False)
    if out is None:
        sys.stdout.write(text)
    else:
        write_atomic(out, text)
        print(f"wrote {what} to {out}")
    return 0


#: Bags scored at a time by ``predict``: a progress bar can move on a long collection read from disk,
#: and every bag's probabilities are the same as in one call (each bag is scored on its own).
PREDICT_CHUNK = 256


def cmd_predict(args) -> int:
    from .utils import progress_bar

    clf, out, data = _model_and_bags(args)
    ids, n = np.asarray(data.bag_ids), len(data.bag_ids)
    parts = []
    for start in progress_bar(range(0, n, PREDICT_CHUNK), sys.stderr.isatty() and n > PREDICT_CHUNK,
                              f"predicting ({PREDICT_CHUNK} bags a step)"):
        stop = min(start + PREDICT_CHUNK, n)
        with naming_bags(ids[start:stop]):  # an error's "bags[i]" counts from the chunk's first bag
            parts.append(clf.predict_proba([data.bags[i] for i in range(start, stop)]))
    proba = np.concatenate(parts) if parts else np.zeros((0, len(clf.classes_)))
    frame = pd.DataFrame({"bag": data.bag_ids, "predicted": clf.classes_[proba.argmax(1)]})
    for j, c in enumerate(clf.classes_):
        frame[f"proba_{c}"] = proba[:, j]
    return _write_table(frame, out, f"{len(frame)} predictions")


def cmd_explain(args) -> int:
    from .evaluation.evidence import evidence_table

    if args.heatmaps and not args.coords_key:
        raise ValueError("--heatmaps needs --coords-key: the patches are drawn where the bag files place them.")
    maps = check_output_path(args.heatmaps, "dir", "--heatmaps") if args.heatmaps else None
    if maps:  # its manifest would mark another run's files stale, and remove them
        check_results_folder(maps, "explain", (), "--heatmaps")
    if maps and args.out and args.out != "-" and Path(args.out).resolve() == maps.resolve():
        raise ValueError(f"--out and --heatmaps both name {args.out}: the table is a file, the maps a folder.")
    clf, out, data = _model_and_bags(args)
    if maps:  # now that the bags are known: a user's own <bag>.png there would have been replaced
        check_results_folder(maps, "explain", [f"{bag}.png" for bag in data.bag_ids], "--heatmaps")
    if len(clf.classes_) != 2:
        raise ValueError(f"explain needs a two-class model; this one has {len(clf.classes_)} classes.")
    if args.coords_key:
        if not hasattr(data, "instance_array"):
            raise ValueError("--coords-key needs --bags-dir: the coordinates are read from the bag files.")
        xy = data.instance_array(0, args.coords_key)  # a folder without them fails now, not after every bag's evidence
        if maps and (xy.ndim != 2 or xy.shape[1] < 2):
            raise ValueError(f"--heatmaps needs two coordinates per patch; {args.coords_key!r} has shape {xy.shape}.")
    # Which class "positive" means: the second in sorted order, which a user's labels may not make obvious.
    positive, negative = (np.asarray(c).item() for c in clf.classes_[::-1])
    # The maps reach --heatmaps only once the table is written too: a table that cannot be written
    # (a full disk, a folder in the way) leaves neither.
    with staged_directory(maps, "explain") if maps else contextlib.nullcontext() as stage:
        with naming_bags(data.bag_ids):
            # With --heatmaps every instance's evidence is drawn; the table keeps the --top rows either way.
            table = evidence_table(clf, data.bags, data.bag_ids, args.method, top=None if maps else args.top,
                                   progress=sys.stderr.isatty())  # a bar for a person watching, none in logs
            if args.coords_key:  # e.g. CLAM's 'coords': where each patch lies on the slide, for heatmaps
                table = _with_coordinates(args, stage, data, table, str(positive))
        blank = int(table["evidence"].isna().sum())
        if blank:  # removal from a one-instance bag leaves no bag to score
            print(f"note: {blank} instance(s) have no evidence value (the only instance of their bag, under "
                  f"--method {args.method}); their rows are kept, blank.", file=sys.stderr)
        # The file says what it holds: the units differ by method, and "positive" is one of the user's classes.
        table = table.assign(method=args.method, evidence_for=str(positive))
        print(f"evidence for class {positive!r} (positive: for it; negative: for {negative!r})", file=sys.stderr)
        _write_table(table, out, f"the evidence of {len(table)} instances of {data.n_bags} bags")
    if maps:  # standard output may be carrying the CSV (no --out): the note then goes to standard error
        print(f"wrote {data.n_bags} heatmaps to {maps}", file=sys.stdout if out else sys.stderr)  # one a bag
    return 0


EVIDENCE_LABELS = {"removal": "drop in P({}) without the patch", "share": "the patch's share of the logit",
                   "singleton": "logit of the patch alone"}


def _with_coordinates(args, stage: Path | None, data, table: pd.DataFrame, positive: str) -> pd.DataFrame:
    """Each bag's coordinates, read once: added to its --top rows as KEY_0, KEY_1, ..., and with --heatmaps
    its map drawn into ``stage`` (one PNG per bag, its patches where they lie, on one scale for every bag)."""
    from .plots import plot_evidence_map
    from .utils import progress_bar

    where = {bag: i for i, bag in enumerate(data.bag_ids)}
    finite = table["evidence"].abs().dropna()
    limit = float(finite.max()) if len(finite) else None
    groups, kept = table.groupby("bag", sort=False), []
    label = EVIDENCE_LABELS[args.method].format(positive)  # which class "positive" is, on the map itself
    for bag, rows in progress_bar(groups, stage is not None and sys.stderr.isatty(), "drawing maps",
                                  total=groups.ngroups, unit="map"):
        xy = data.instance_array(where[bag], args.coords_key)
        xy = xy.reshape(len(xy), -1)
        if stage is not None:
            ordered = rows.sort_values("instance")
            try:
                fig = plot_evidence_map(xy[:, :2], ordered["evidence"].to_numpy(), top=args.top or 0, limit=limit,
                                        label=label, title=f"bag {bag}")
            except ValueError as exc:  # e.g. NaN coordinates: say which bag's file holds them
                raise ValueError(f"--heatmaps: bag {bag!r}: {exc}") from None
            fig.savefig(stage / f"{bag}.png", dpi=110)
        rows = rows[rows["rank"] <= args.top] if args.top else rows
        at = xy[rows["instance"].to_numpy()]
        kept.append(rows.assign(**{f"{args.coords_key}_{j}": at[:, j] for j in range(at.shape[1])}))
    return pd.concat(kept, ignore_index=True)


def cmd_datasets(args) -> int:
    from .data.benchmarks import benchmark_status

    if args.data_dir and Path(args.data_dir).expanduser().exists() and not Path(args.data_dir).expanduser().is_dir():
        raise ValueError(f"--data-dir {args.data_dir} is a file; give the folder that holds the benchmark files.")
    table, problems = benchmark_status(args.data_dir, args.download, args.download_timeout, verify=not args.no_verify)
    print(table.to_string(index=False))
    for line in problems:  # what is missing and how to fix it, apart from the table (standard error)
        print(in_cli_words(line), file=sys.stderr)
    return 1 if problems else 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="minitorch-proto",
        description="Prototype multiple-instance learning (Yuksekgonul et al., 2019): reproduce, cross-validate, "
        "train and predict.",
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("reproduce", help="5 x 10-fold CV on the benchmarks; a table shaped like the paper's Table 2")
    p.add_argument("--datasets", nargs="+", default=["musk1", "musk2", "fox", "tiger", "elephant"],
                   help="benchmarks to run (default: all five)")
    p.add_argument("--methods", default=PROTOTYPE, type=_parse_methods,
                   help="comma-separated: prototype, prototype-compat, prototype-tuned, prototype-monotone, "
                   "prototype-recommended, "
                   "prototype-best (nested "
                   "search + 5-seed ensemble; long), baseline names, or 'all' (every one of these but prototype-best, "
                   "also among other names; default: prototype)")
    p.add_argument("--repeats", type=count(1), default=5, help="repetitions of the CV (default: 5)")
    p.add_argument("--folds", type=count(2), default=10, help="folds of each repetition (default: 10)")
    p.add_argument("--out", type=text, default="results",
                   help="output folder (default: results/); its result files are replaced together at the end")
    p.add_argument("--reported", action="store_true", help="also list the other methods' figures quoted in the paper")
    p.add_argument("--quiet", action="store_true", help="no progress bars or per-method lines")
    p.add_argument("--budget", default="defaults", choices=["defaults", "common", "both"],
                   help="baselines at the package defaults, with the common budget (k=5 seed ensemble + "
                   "inner 3-fold tuning over 3 candidates), or both rows (default: defaults); common and both "
                   "need a baseline among --methods")
    add_data_args(p, single=False)
    add_model_args(p)
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("compare", help="registered methods side by side on the same folds of one data set "
                       "(a benchmark, your CSV or a bag folder): one results table and one plot")
    add_data_args(p)
    p.add_argument("--methods", required=True,
                   help="comma-separated method keys, e.g. prototype,miles,attention (see minitorch_proto.methods)")
    p.add_argument("--budget", default="defaults", choices=["defaults", "common"],
                   help="each method at its defaults, or with the common budget (inner 3-fold tuning over a "
                   "fixed 3-point grid + 5-seed ensemble for stochastic methods; default: defaults)")
    p.add_argument("--repeats", type=count(1), default=1,
                   help="repetitions of the CV (default: 1, a quick comparison; 5 for the book's protocol)")
    p.add_argument("--folds", type=count(2), default=10, help="folds of each repetition (default: 10)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the folds and the models (default: 0)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--out", type=text, required=True, help="output folder: results.csv (per fold, a method column), "
                   "predictions.csv (each test bag's probabilities), summary.csv (per method: means and spreads), "
                   "summary.txt (the printed table), comparison.png, run.json")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("cv", help="repeated stratified CV of the prototype model on one data set")
    add_data_args(p)
    add_model_args(p)
    p.add_argument("--repeats", type=count(1), default=5, help="repetitions of the CV (default: 5)")
    p.add_argument("--folds", type=count(2), default=10, help="folds of each repetition (default: 10)")
    p.add_argument("--out", type=text, default=None, help="CSV of per-fold results; beside it <name>.predictions.csv "
                   "(each test bag's probabilities) and <name>.run.json (what made them); without it nothing is "
                   "written, the summary is printed")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_cv)

    p = sub.add_parser("train", help="fit one model on a whole data set and save it")
    add_data_args(p)
    add_model_args(p)
    p.add_argument("--out", type=text, required=True,
                   help="model file to write, e.g. model.safetensors (safetensors + a verified JSON header)")
    p.add_argument("--recommended", action="store_true",
                   help="train the recommended model (PrototypeMILClassifier.recommended(): 1,024 pushed k-means++ "
                   "prototypes, cosine distance, a convex head, 2 members) instead of the paper's; model flags "
                   "given override its recipe")
    p.add_argument("--class-weight", default=None, choices=["balanced"],
                   help="with --recommended: 'balanced' weights the head's classes by their inverse frequency")
    g = p.add_argument_group("large collections")
    g.add_argument("--stream", action="store_true",
                   help="train with the streaming trainer: bags read when needed, in bounded memory "
                   "(always on under torchrun --nproc_per_node N -m minitorch_proto train ...)")
    g.add_argument("--chunk-size", type=count(1), default=None,
                   help="instances compared with the prototypes at a time (65536): bounds peak memory")
    g.add_argument("--autocast", default="none", choices=["none", "bf16"],
                   help="bf16 autocast for the distance products (tensor engine or --stream)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("predict", help="predict bags with a saved model")
    p.add_argument("--model", type=text, required=True, help="model file written by 'train'")
    add_data_args(p)
    p.add_argument("--out", type=text, default=None,
                   help="CSV of predictions: bag, predicted, proba_<class> per class (default, or -: standard output)")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("explain", help="per-instance evidence of a saved two-class model: which instances "
                       "drive each bag's prediction")
    p.add_argument("--model", type=text, required=True, help="model file written by 'train'")
    add_data_args(p)
    p.add_argument("--method", default="removal", choices=["removal", "share", "singleton"],
                   help="removal (default): how much the bag's positive-class probability drops without the "
                   "instance; share: the instance's share of the logit measured from distance 0, not against "
                   "typical bags (it can rank the key instances last: see book page 05, section "
                   "\"One bag, explained\"); singleton: the logit of the instance alone. For a seed ensemble "
                   "(--recommended) share and singleton are its members' mean, not the logit of its mean probability")
    p.add_argument("--top", type=count(1), default=None, help="keep the TOP instances of most evidence per bag")
    p.add_argument("--coords-key", type=text, default=None, help="with --bags-dir of .h5 or .pt files: also write this "
                   "per-instance array of each file (CLAM's 'coords': the patch positions), as KEY_0, KEY_1, ...")
    p.add_argument("--heatmaps", type=text, default=None, metavar="DIR",
                   help="with --coords-key: also draw each bag's patches where they lie, coloured by evidence "
                   "on one scale for all bags (the --top ones dotted), as DIR/<bag>.png")
    p.add_argument("--out", type=text, default=None,
                   help="CSV: bag, instance, evidence, rank (1 = most evidence for the positive class), method, "
                   "evidence_for (the positive class) (default, or -: standard output)")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("datasets", help="list the benchmarks and where they are found")
    p.add_argument("--data-dir", type=text, default=None,
                   help="folder holding the benchmark files (default: $MINITORCH_PROTO_DATA, else the user cache)")
    p.add_argument("--download", action="store_true", help="download the missing ones into the cache")
    p.add_argument("--no-verify", action="store_true", help="skip the sha256 check (counts are still checked)")
    p.add_argument("--download-timeout", type=number(positive=True, unit=" of seconds"), default=None,
                   metavar="SECONDS",
                   help="overall limit for downloading one file")
    p.set_defaults(func=cmd_datasets)
    return parser


def _one_line(exc: BaseException) -> str:
    return " ".join(in_cli_words(str(exc)).split()) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (see the module docstring)."""
    from .data import DownloadError

    parser = build_parser()
    args = parser.parse_args(argv)  # usage errors exit 2 here, with argparse's usage line
    args.argv = ["minitorch-proto", *(sys.argv[1:] if argv is None else map(str, argv))]  # for run.json
    try:
        refuse_overwriting_inputs(args)
        if int(os.environ.get("WORLD_SIZE", "1")) > 1 and args.command != "train":
            # Each process would run the whole command: the work twice, standard output twice.
            raise ValueError(f"{args.command} runs as one process; only train shares its work under torchrun.")
        status = int(args.func(args) or 0)
        flush_notes()  # predict's and explain's, held until their table is written
        return status
    except DownloadError as exc:
        # Several lines on purpose: each mirror's error and where to put the file by hand.
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except (ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, RuntimeError) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        # A name too long for the file system is the command line's to fix, wherever a path test met it.
        return EXIT_USAGE if getattr(exc, "errno", None) == errno.ENAMETOOLONG else EXIT_FAILURE
    except KeyboardInterrupt:  # outputs are published whole at the end (a Ctrl-C then waits for the renames)
        print("error: interrupted; outputs are written whole or not at all.", file=sys.stderr)
        return 130
    except (MemoryError, SystemError) as exc:
        if not isinstance(exc, MemoryError) and not isinstance(exc.__context__, MemoryError):
            raise  # a SystemError is the interpreter's; numba wraps an allocation failure in one
        print("error: out of memory: use fewer prototypes (--prototypes), a smaller --batch-size or --chunk-size, "
              "or fewer bags at once.", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        drop_notes()  # held notes of a command that failed are not printed: its error is the one line to read


if __name__ == "__main__":
    sys.exit(main())
