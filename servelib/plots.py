"""Figures: one style for the whole book, and the plots chapters share.

Thin layers over the pure functions: a plot never computes a formula of its own.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

STYLE = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "font.size": 10,
}


def apply_style() -> None:
    """Set the book's matplotlib style (call once per notebook)."""
    plt.rcParams.update(STYLE)


def new_axes(xlabel: str, ylabel: str, title: str | None = None, *, logx=False, logy=False):
    """A styled figure and axes with labelled axes (labels should carry units)."""
    apply_style()
    fig, ax = plt.subplots()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    return fig, ax
