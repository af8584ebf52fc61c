"""Page 05's closing verdict: the sweep it shows, this run's own sweep, and the recommended model's frozen runs.

The sentences come from :func:`~minitorch_proto.book.mnist_prototypes.mnist_sweep_verdict` and
:func:`~minitorch_proto.book.mnist_prototypes.mnist_evidence_summary`; this module only says which
runs each sentence is about (seeds, settings, image source), read from the tables themselves.
"""
from __future__ import annotations

import pandas as pd

from .mnist_prototypes import mnist_evidence_summary, mnist_sweep_verdict
from .params import seed_span

__all__ = ["mnist_page_verdict"]


def _k(sweep: pd.DataFrame) -> int:
    """The k a sweep's hits were counted with: the length of its rows' nearest-digit lists."""
    return len(str(sweep["nearest_digits"].iloc[0]).split())


def mnist_page_verdict(sweep: pd.DataFrame, live: pd.DataFrame, evidence_runs: pd.DataFrame, *,
                       sweep_is_frozen: bool, n_prototypes: int, epochs: int, n_train_bags: int) -> list[str]:
    """Page 05's verdict, as a list of paragraphs.

    Parameters
    ----------
    sweep : DataFrame
        The sweep the page shows (:func:`~minitorch_proto.book.mnist_prototypes.mnist_seed_sweep` rows):
        the frozen one, or this run's.
    live : DataFrame
        This run's own sweep (the same table as ``sweep`` when no frozen sweep is shown).
    evidence_runs : DataFrame
        The frozen ``mnist_evidence`` table (:func:`~minitorch_proto.book.frozen.load_frozen`): its
        provenance names the ``k`` and ``min_hits`` its hits were counted with.
    sweep_is_frozen : bool
        Whether ``sweep`` is the frozen sweep (its settings are the page's defaults, D = 2), so that this
        run's own parameters are reported beside it.
    n_prototypes, epochs, n_train_bags : int
        This run's settings, as the page's parameters give them.

    Returns
    -------
    list of str
        The sweep's sentence (with this run's when the frozen sweep is shown), then the recommended
        model's sentence and its mean evidence AUCs.
    """
    settings = ("frozen sweep: targets " + " and ".join(map(str, dict.fromkeys(sweep["target"])))
                + ", D = 2, the page's default settings" if sweep_is_frozen
                else f"live sweep, D = {n_prototypes}, {epochs} epochs")
    text = (f"Over seeds {seed_span(sweep['seed'])} ({settings}; {'; '.join(sorted(set(sweep['image_source'])))}): "
            + mnist_sweep_verdict(sweep, k=_k(sweep)))
    if sweep_is_frozen:  # this run's own parameters may differ from the frozen sweep's: say what they gave too
        text += (f" This page's live run (targets {', '.join(map(str, dict.fromkeys(live['target'])))}; seeds "
                 f"{', '.join(map(str, dict.fromkeys(live['seed'])))}; D = {n_prototypes}, {epochs} epochs, "
                 f"{n_train_bags} training bags): " + mnist_sweep_verdict(live, k=_k(live)))
    record = evidence_runs.attrs["provenance"]
    summary = mnist_evidence_summary(evidence_runs, min_hits=record["min_hits"]).xs("recommended")
    runs = evidence_runs[evidence_runs["model"] == "recommended"].rename(columns={"bag_auc": "test_auc"})
    recommended = (f"The recommended model on the frozen sweep's bags (seeds {seed_span(runs['seed'])}): "
                   f"{mnist_sweep_verdict(runs, k=record['k'], min_hits=record['min_hits'])} "
                   "Its mean evidence AUC (Shapley split / removal): "
                   + "; ".join(f"target {t}: {r[('evidence AUC', 'Shapley split')]:.2f} / "
                               f"{r[('evidence AUC', 'removal')]:.2f}" for t, r in summary.iterrows()) + ".")
    return [text, recommended]
