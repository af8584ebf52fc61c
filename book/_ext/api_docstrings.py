"""Sphinx extension of the book: the API page's fields read "name (type) – text".

napoleon (numpydoc docstrings, ``napoleon_use_param = False``) writes each parameter as
``**name** (*type*) -- text``, and Sphinx's own field lists (``Raises``) put a ``" -- "`` text
between a name and its text; both leave the ``--`` to Sphinx's smart quotes to print as a dash.
The book turns dashes off there (``smartquotes_action: qe`` in ``_config.yml``: a ``--`` in this
book is a command-line flag), so these two hooks write the dash themselves: one on the docstring
lines after napoleon's, one on the separators of the parsed page.

Loaded through ``sphinx: local_extensions`` in ``_config.yml``.
"""
from __future__ import annotations

from docutils import nodes

DASH = "\u2013"


def dash_after_parameter_names(app, what, name, obj, options, lines: list[str]) -> None:
    for i, line in enumerate(lines):
        lines[i] = line.replace(") -- ", f") {DASH} ").replace("** -- ", f"** {DASH} ")


def dash_between_field_names_and_text(app, doctree) -> None:
    for text in list(doctree.findall(nodes.Text)):
        if str(text) == " -- ":  # exactly Sphinx's separator node, never a flag in running text
            text.parent.replace(text, nodes.Text(f" {DASH} "))


def setup(app):
    # napoleon turns the numpydoc sections into fields at the default priority (500): run after it.
    app.connect("autodoc-process-docstring", dash_after_parameter_names, priority=600)
    app.connect("doctree-read", dash_between_field_names_and_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
