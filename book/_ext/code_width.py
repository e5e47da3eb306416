"""Give chapter code the width of 88 characters, so wrapped code never scrolls sideways.

The chapters wrap their code at 88 characters; ``static/code-width.css`` sets code cells in
13px type and narrows the page's own table of contents, so that 88 characters fit the
column of a 1280-px-wide window. ``scripts/browser_check.py`` counts the cells that still
scroll.
"""
from __future__ import annotations

import pathlib

STATIC = pathlib.Path(__file__).with_name("static")


def add_static_path(app):
    app.config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("builder-inited", add_static_path)
    app.add_css_file("code-width.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
