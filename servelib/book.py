"""What a chapter needs from the book around it: numbers for its prose, and printed tables.

Numbers in a chapter's prose are stored with :func:`glue` and written ``{glue:text}`name```
in its MyST source. Two readers meet them:

- the HTML book, where myst-nb puts the value executed at build time into the text;
- the ``.ipynb`` opened in Jupyter or on Colab, which ``scripts/nbsync.py`` writes with
  every value already filled in (and the test suite re-executes, comparing each value).

So :func:`glue` records a value only when the book itself is executing the chapter (the
book build, ``scripts/nbsync.py`` and the test suite set ``SERVELIB_BOOK_RUN=1``); in a
reader's Jupyter or Colab session it does nothing and shows nothing.

A name starting with ``live_`` holds a value *measured* on the machine that runs the
notebook (a timing, a measured ratio). The HTML shows the build machine's value; the
reader's notebook cannot know the reader's value in advance, so it points at the printed
measurement instead of a number (``scripts/nbsync.py``).
"""
from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Sequence

#: Set to ``1`` by the book build, ``scripts/nbsync.py`` and the test suite: glue values
#: are recorded and every figure is checked (:func:`servelib.plots.figure_problems`).
BOOK_RUN_ENV = "SERVELIB_BOOK_RUN"
#: Glue names with this prefix hold values measured on the machine running the notebook.
MEASURED_PREFIX = "live_"


def book_run() -> bool:
    """True when the book itself is executing the notebook (see :data:`BOOK_RUN_ENV`)."""
    return os.environ.get(BOOK_RUN_ENV) == "1"


def glue(name: str, value, display: bool = False) -> None:
    """Store ``value`` under ``name`` for the chapter's prose (myst-nb ``glue``).

    Records only during a book run (:func:`book_run`); returns None either way, so a glue
    call that ends a cell never echoes its value under the cell.
    """
    if not book_run():
        return
    from myst_nb import glue as _glue
    _glue(name, value, display=display)


def table(rows: Iterable[Sequence], header: Sequence[str], formats: Sequence[str] | None = None,
          *, gap: int = 2) -> str:
    """A plain-text table: ``header`` over ``rows``, each column as wide as its widest entry.

    ``formats``: one format spec per column (``",d"``, ``".1f"``, ``".1%"``; ``""`` for
    ``str()``), default ``""`` for all. Numbers are right-aligned, text left-aligned; columns
    are separated by ``gap`` spaces. Returns the text (print it); the same rows always give
    the same text, so a table can sit in an output that the tests compare.

    Raises ValueError when a row's length or ``formats`` does not match ``header``.
    """
    header = [str(h) for h in header]
    formats = [""] * len(header) if formats is None else list(formats)
    if len(formats) != len(header):
        raise ValueError(f"formats has {len(formats)} entries for {len(header)} columns")
    cells, numeric = [], [True] * len(header)
    for i, row in enumerate(rows):
        row = list(row)
        if len(row) != len(header):
            raise ValueError(f"row {i} has {len(row)} values for {len(header)} columns: {row!r}")
        cells.append([format(v, f) if f else str(v) for v, f in zip(row, formats)])
        numeric = [n and isinstance(v, numbers.Real) and not isinstance(v, bool) for n, v in zip(numeric, row)]
    widths = [max(len(text) for text in column) for column in zip(header, *cells)]

    def line(texts):
        return (" " * gap).join(t.rjust(w) if num else t.ljust(w)
                                for t, w, num in zip(texts, widths, numeric)).rstrip()

    return "\n".join(line(texts) for texts in [header] + cells)
