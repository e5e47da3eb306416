"""Glue between a notebook and the built book.

In the book build, numbers that appear in prose are stored with myst-nb's ``glue`` and
referenced as ``{glue:text}`name```. On Colab or in plain Jupyter, myst-nb may be absent;
then the value is only returned, so the same notebook runs everywhere.
"""
from __future__ import annotations


def glue(name: str, value, display: bool = False):
    """Store ``value`` under ``name`` for the book's prose (myst-nb ``glue``) and return it.

    Without myst-nb installed this does nothing but return ``value``.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return value
    _glue(name, value, display=display)
    return value
