"""Sphinx extension of the book: a Colab launch button only where Colab can open the page.

sphinx-book-theme gives every page that has a kernel a "launch" menu, and for a MyST-NB page
(``book/results.md``, ``book/monotone.md``: Markdown with executed code cells) its Colab entry
points at the ``.md`` file on GitHub, which Colab cannot open. This hook runs after the theme
has built the menu and removes every Colab entry whose link does not end in ``.ipynb``; a menu
left empty is removed with it. The other entries (Binder) are kept.

Loaded through ``sphinx: local_extensions`` in ``_config.yml``.
"""
from __future__ import annotations

from typing import Any


def _keep(button: dict, colab_url: str) -> bool:
    url = button.get("url") or ""
    return not (colab_url and url.startswith(colab_url)) or url.endswith(".ipynb")


def drop_colab_buttons_of_text_pages(app, pagename: str, templatename: str, context: dict[str, Any], doctree) -> None:
    launch = app.config.html_theme_options.get("launch_buttons", {}) or {}
    colab_url = (launch.get("colab_url") or "").rstrip("/")
    groups = context.get("header_buttons")
    if not colab_url or not groups:
        return
    kept = []
    for group in groups:
        if group.get("label") == "launch-buttons":
            group["buttons"] = [b for b in group.get("buttons", []) if _keep(b, colab_url)]
            if not group["buttons"]:
                continue
        kept.append(group)
    groups[:] = kept


def setup(app):
    # sphinx-book-theme adds the launch menu at priority 501; run after it.
    app.connect("html-page-context", drop_colab_buttons_of_text_pages, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
