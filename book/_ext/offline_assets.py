"""Serve MathJax and the Colab badge from the book itself, so pages work with no network.

A workshop room may be offline: nothing a page needs may come from another host.

MathJax 3 comes from the PyPI package ``django-static-mathjax`` (the official MathJax
distribution under its Apache-2.0 licence; despite the name it needs no Django). When an
HTML build finishes, the parts the book uses are copied to ``_static/mathjax``: the
``tex-chtml`` component (``mathjax_path`` in ``_config.yml`` points at it), the TeX
extensions it loads on demand, the CommonHTML fonts, and the menu and accessibility
pieces (with the speech engine) a reader can switch on from MathJax's menu.

Each chapter notebook opens with Colab's "Open in Colab" badge image, which on Colab and
GitHub must be Colab's own URL; in the HTML the image is swapped for a local copy
(``colab-badge.svg`` beside this file). The link around it still leads to Colab.
"""
from __future__ import annotations

import pathlib
import shutil

import mathjax
from docutils import nodes

ES5 = pathlib.Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
PARTS = ("tex-chtml.js", "input/tex/extensions", "output/chtml", "ui", "a11y", "sre")
COLAB_BADGE_URL = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE = pathlib.Path(__file__).with_name("colab-badge.svg")


def local_colab_badge(app, doctree, docname):
    """Point every Colab badge image at ``_static/colab-badge.svg`` (relative to the page)."""
    depth = docname.count("/")
    for img in doctree.findall(nodes.image):
        if img["uri"] == COLAB_BADGE_URL:
            img["uri"] = "../" * depth + "_static/colab-badge.svg"


def copy_mathjax(app, exc):
    """Copy :data:`PARTS` of MathJax and its licence into ``_static/mathjax``, and the badge into ``_static``."""
    if exc is not None or app.builder.format != "html":
        return
    dest = pathlib.Path(app.outdir) / "_static" / "mathjax"
    for part in PARTS:
        src = ES5 / part
        if src.is_dir():
            shutil.copytree(src, dest / part, dirs_exist_ok=True)
        else:
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / part)
    shutil.copy2(ES5.parent / "LICENSE", dest / "LICENSE")
    shutil.copy2(BADGE, dest.parent / BADGE.name)


def setup(app):
    if not (ES5 / "tex-chtml.js").is_file():
        raise RuntimeError(f"MathJax files not found under {ES5}: pip install -r requirements.txt")
    app.connect("doctree-resolved", local_colab_badge)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
