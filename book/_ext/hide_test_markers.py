"""Hide the nbval marker line from the code cells readers see.

A chapter's checked cells start with ``# NBVAL_CHECK_OUTPUT`` so that the test suite
compares their printed output; the marker means nothing to a reader, so the rendered page
shows the cell without it. The notebooks themselves (Colab, Jupyter, nbval) keep it.
"""
from __future__ import annotations

from docutils import nodes

MARKER = "# NBVAL_CHECK_OUTPUT"


def strip_markers(app, doctree):
    """Drop a first line equal to the marker from every literal block of the page."""
    for block in doctree.findall(nodes.literal_block):
        text = block.astext()
        first, _, rest = text.partition("\n")
        if first.strip() == MARKER:
            block.rawsource = rest
            block.children = [nodes.Text(rest)]


def setup(app):
    app.connect("doctree-read", strip_markers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
