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


def roofline(ax, peak_flops: float, bandwidth_Bps: float, label: str, *, color=None,
             intensity_range=(0.1, 1e4)):
    """Draw one roofline on ``ax`` (log-log): attainable FLOP/s = min(peak, intensity x bandwidth).

    The line bends at the ridge point ``peak_flops / bandwidth_Bps`` FLOP/byte, which is
    marked. ``intensity_range`` is the x-span in FLOP/byte. Returns the ridge.
    """
    import numpy as np

    from .roofline import attainable_flops
    x = np.geomspace(*intensity_range, 200)
    y = [attainable_flops(i, peak_flops, bandwidth_Bps) for i in x]
    (line,) = ax.plot(x, y, label=label, color=color)
    ridge = peak_flops / bandwidth_Bps
    ax.plot([ridge], [peak_flops], "o", color=line.get_color(), markersize=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    return ridge


def sweep(ax, batches, measured_tokens_per_s, predicted_tokens_per_s=None, label: str = "measured",
          *, serial_tokens_per_s=None, color=None):
    """Plot decode throughput against batch size: measured points, prediction as a dashed line.

    ``batches``: batch sizes; ``measured_tokens_per_s``, ``predicted_tokens_per_s``
    (optional, the roofline) and ``serial_tokens_per_s`` (optional, compute and memory
    time added, drawn dotted): one value per batch. The x-axis is log2.
    """
    from matplotlib.ticker import FuncFormatter
    (pts,) = ax.plot(batches, measured_tokens_per_s, "o-", label=label, color=color)
    if predicted_tokens_per_s is not None:
        ax.plot(batches, predicted_tokens_per_s, "--", color=pts.get_color(),
                label=f"{label}: roofline prediction")
    if serial_tokens_per_s is not None:
        ax.plot(batches, serial_tokens_per_s, ":", color=pts.get_color(),
                label=f"{label}: no-overlap prediction")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
