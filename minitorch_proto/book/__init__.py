"""The book's code, not the library's: experiment drivers, frozen tables and the prose of verdicts.

Everything the book's pages and notebooks need beyond the library lives here, so the library
(``data`` ... ``evaluation``, ``plots``) holds no page-specific glue and this subpackage is the
only place that knows about the book. It sits above every library layer and below the CLI
(``tests/test_layout.py``); nothing in the library imports it.

====================  ==================================================================
module                what it holds
====================  ==================================================================
``mnist_prototypes``  the paper's MNIST-bags illustration: defaults, runs, the seed sweep
``unit_test_table``   the MIL algorithmic unit tests run for every model of the package
``toy_snapshots``     prototypes recorded while a model trains on toy bags
``baselines_page``    the baselines page's live run (every method on the same folds)
``own_data``          the own-data page's CSV and held-out bags, checked before any training
``mnist_page``        the MNIST page's closing verdict, from the sweeps and the frozen evidence runs
``ladder_page``       the ladder page's tables of the frozen ladder and of the search's choices
``pathology_page``    registered methods on the UCSB breast-cancer bags (the own-data page)
``slide_maps``        toy whole slides and evidence heatmaps (the own-data page)
``fitting``           what those drivers share (a fit with a per-epoch callback, the objective)
``verdicts``          short verdicts written from a page's measured numbers; ``book_glue``
``frozen``            frozen result tables shipped in ``frozen_tables/``, with provenance
``ranking``           the book's one ranking of every method and budget (``one_ranking``)
``params``            notebook parameters checked before any work (``as_choices``)
====================  ==================================================================

Each driver does one experiment end to end and returns plain data (dicts, DataFrames, fitted
estimators), so notebooks stay short and the logic stays testable.
"""
from __future__ import annotations

# Each module's __all__ is the one list of its public names; the package re-exports them.
from . import (baselines_page, fitting, frozen, ladder_page, mnist_page, mnist_prototypes, own_data, params,
               pathology_page, ranking, slide_maps, toy_snapshots, unit_test_table, verdicts)
from .baselines_page import *  # noqa: F403
from .fitting import *  # noqa: F403
from .frozen import *  # noqa: F403
from .ladder_page import *  # noqa: F403
from .mnist_page import *  # noqa: F403
from .mnist_prototypes import *  # noqa: F403
from .own_data import *  # noqa: F403
from .params import *  # noqa: F403
from .pathology_page import *  # noqa: F403
from .ranking import *  # noqa: F403
from .slide_maps import *  # noqa: F403
from .toy_snapshots import *  # noqa: F403
from .unit_test_table import *  # noqa: F403
from .verdicts import *  # noqa: F403

__all__ = [
    *mnist_prototypes.__all__,
    *mnist_page.__all__,
    *unit_test_table.__all__,
    *toy_snapshots.__all__,
    *fitting.__all__,
    *verdicts.__all__,
    *frozen.__all__,
    *pathology_page.__all__,
    *ranking.__all__,
    *slide_maps.__all__,
    *params.__all__,
    *own_data.__all__,
    *ladder_page.__all__,
    *baselines_page.__all__,
]
