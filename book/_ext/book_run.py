"""The build is the book's own run of its chapters; keep what only that run needs off the page.

- The kernels the build starts see ``SERVELIB_BOOK_RUN=1`` (``servelib.book``): glue values
  are recorded for the prose and every figure is checked against the book's figure rules.
- An exercise's ``check`` prints a verdict ("[check] pd-1: correct") under the book's own
  solution. The reader did not write that answer, so the line is dropped from the page.
  Any other verdict means a solution of the book fails its check: a build warning (an
  error under ``-W``).
- An error shown in an output (a traceback) is a build warning too: myst-nb stops the build
  only when a cell's code raises, not when displaying its result fails (a figure that
  breaks ``servelib.plots``' rules).
"""
from __future__ import annotations

import os
import re

from docutils import nodes
from sphinx.util import logging

BOOK_RUN_ENV = "SERVELIB_BOOK_RUN"        # servelib.book.BOOK_RUN_ENV (servelib is not imported here)
VERDICT = re.compile(r"^\[check\] (?P<id>[\w-]+): (?P<message>.*)$")
logger = logging.getLogger(__name__)


def drop_verdicts(text: str) -> tuple[str, list[str]]:
    """``text`` without its "correct" verdict lines, and every other verdict line found."""
    kept, failed = [], []
    for line in text.splitlines(keepends=True):
        m = VERDICT.match(line.rstrip("\n"))
        if m and m.group("message") == "correct":
            continue
        if m:
            failed.append(line.strip())
        kept.append(line)
    return "".join(kept), failed


def clean_outputs(app, doctree):
    for block in list(doctree.findall(nodes.literal_block)):
        classes = block.get("classes", [])
        if "traceback" in classes:
            logger.warning("an error is shown in an output: %s", block.astext().strip().splitlines()[-1][:200],
                           location=block)
        if "stream" not in classes:
            continue
        text, failed = drop_verdicts(block.astext())
        for line in failed:
            logger.warning("a solution of the book fails its check: %s", line, location=block)
        if text.strip():
            block.rawsource = text
            block.children = [nodes.Text(text)]
            continue
        parent = block.parent
        parent.remove(block)
        if not parent.children and parent.parent is not None:
            parent.parent.remove(parent)


def setup(app):
    os.environ[BOOK_RUN_ENV] = "1"
    app.connect("doctree-read", clean_outputs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
