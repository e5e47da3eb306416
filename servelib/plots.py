"""Figures: one style for the whole book, and the plots chapters share.

Thin layers over the pure functions: a plot never computes a formula of its own.

The style keeps four faults out of every figure, and :func:`figure_problems` finds them:

- a legend over the data: :func:`legend` puts one legend for the whole figure below it;
- a label struck through by a line: :func:`label` places a label where no line, point or
  bar crosses it;
- a series hidden under another: :func:`figure_problems` names a labelled line that runs
  under a later one (draw the lower one wider and paler, or leave one out and say so);
- blurred or unreadable output: in Jupyter figures are drawn as SVG (sharp at any zoom), at
  a size and font that stay readable when the page is a phone's width.

When the book itself runs a chapter (the build, ``scripts/nbsync.py``, the tests;
:func:`servelib.book.book_run`), every figure is checked as it is displayed and a fault
is an error that fails the run. A reader's own session is never interrupted.
"""
from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.text import Text

from .book import book_run

STYLE = {
    # 5.6 in wide: at a phone's width (360 px) the figure shrinks to ~65%, and 11 pt text
    # still reads at ~9 px (MIN_PHONE_TEXT_PX).
    "figure.figsize": (5.6, 3.6),
    "figure.dpi": 100,
    "figure.constrained_layout.use": True,   # room for a legend below the axes
    "svg.fonttype": "path",                  # the same glyphs on every reader's machine
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": "medium",
    "legend.frameon": False,
    "legend.fontsize": "medium",
    "font.size": 11,
}
#: Narrowest page the figures must read on (a phone, CSS pixels), and the least text height there.
PHONE_WIDTH_PX = 360
MIN_PHONE_TEXT_PX = 8.0
_CSS_PX_PER_PT = 96 / 72


class FigureError(ValueError):
    """A figure breaks the book's figure rules; the message names the fault and the fix."""

    def _render_traceback_(self):      # IPython shows the message alone, without a traceback
        return [f"FigureError: {self}"]


def apply_style() -> None:
    """Set the book's matplotlib style; in IPython, also show figures as SVG (checked in a book run)."""
    plt.rcParams.update(STYLE)
    _display_as_checked_svg()


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


def legend(fig, *, title: str | None = None, ncols: int | None = None) -> None:
    """One legend for the whole figure, centred below its axes, so it never covers data.

    Collects the labelled artists of every axes of ``fig`` (twin axes included; a label
    seen twice is listed once). ``ncols`` defaults to as many columns as fit the figure's
    width. Returns nothing, so a figure's cell can end with it without echoing an object.
    Raises ValueError when no artist has a label.
    """
    handles, labels = [], []
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if not labels:
        raise ValueError("legend: no artist of this figure has a label")
    if ncols is None:
        size_pt = matplotlib.font_manager.FontProperties(size=plt.rcParams["legend.fontsize"]).get_size_in_points()
        entry_pt = max(len(lab) for lab in labels) * 0.55 * size_pt + 3.5 * size_pt   # text + handle
        ncols = int(max(1, min(len(labels), fig.get_figwidth() * 72 // entry_pt)))
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols, title=title)


def label(ax, text: str, xy, **kwargs) -> None:
    """Write ``text`` near the data point ``xy``, inside the axes, where nothing drawn crosses it.

    Tries positions around the point, nearest first (above right first), and keeps the
    first one clear of every line, point and bar of the figure; a label set further than
    a few points away gets a thin leader line to its point. If no position is clear, the
    label goes above right, and :func:`figure_problems` reports it. Call it after the data
    and the legend are drawn. Extra keyword arguments go to ``ax.annotate``.
    """
    fig = ax.figure
    probe = ax.annotate(text, xy, textcoords="offset points", xytext=(0, 0), ha="left", **kwargs)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    base, area = probe.get_window_extent(renderer), ax.get_window_extent(renderer)
    probe.remove()
    px_per_pt = fig.dpi / 72

    def box(dx, dy):
        return base.translated(dx * px_per_pt - (base.width if dx < 0 else 0), dy * px_per_pt)

    offsets = sorted(((dx, dy) for dx in (6, -6, 24, -24, 48, -48, 80, -80)
                      for dy in (6, -16, 20, -30, 36, -46, 56, -66)), key=lambda o: np.hypot(*o))
    dx, dy = next(((dx, dy) for dx, dy in offsets
                   if area.contains(*box(dx, dy).p0) and area.contains(*box(dx, dy).p1)
                   and not _hits(fig, box(dx, dy), area, renderer)), (6, 6))
    if np.hypot(dx, dy) > 20:
        kwargs.setdefault("arrowprops", dict(arrowstyle="-", lw=0.6, color="0.4", shrinkA=1, shrinkB=3))
    ax.annotate(text, xy, textcoords="offset points", xytext=(dx, dy),
                ha="left" if dx > 0 else "right", **kwargs)


def device_label(profile: dict, live: dict | None = None) -> str:
    """A short legend entry for a measured profile (``servelib.measure``): "this machine"
    when ``profile`` is ``live``, else its device's name and dtype.

    The details (threads, torch, sizes, date) belong under the figure, where
    ``servelib.measure.describe`` prints them, not in the legend.
    """
    if profile is live:
        return "this machine"
    dev = profile["device"]
    return f"{dev.get('name', '?') if isinstance(dev, dict) else dev}, {profile['dtype']}"


def roofline(ax, peak_flops: float, bandwidth_Bps: float, label: str, *, color=None,
             intensity_range=(0.1, 1e4)):
    """Draw one roofline on ``ax`` (log-log): attainable FLOP/s = min(peak, intensity x bandwidth).

    The line bends at the ridge point ``peak_flops / bandwidth_Bps`` FLOP/byte, which is
    marked. ``intensity_range`` is the x-span in FLOP/byte. Returns the ridge.
    """
    from .roofline import attainable_flops
    x = np.geomspace(*intensity_range, 200)
    y = [attainable_flops(i, peak_flops, bandwidth_Bps) for i in x]
    (line,) = ax.plot(x, y, label=label, color=color)
    ridge = peak_flops / bandwidth_Bps
    ax.plot([ridge], [peak_flops], "o", color=line.get_color(), markersize=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    return ridge


#: How :func:`sweep` draws each part; :func:`sweep_key` explains it once per figure.
SWEEP_STYLES = {"measured": "o-", "roofline prediction": "--", "no-overlap prediction": ":"}


def sweep(ax, batches, measured_tokens_per_s, predicted_tokens_per_s=None, label: str = "measured",
          *, serial_tokens_per_s=None, color=None):
    """Plot decode throughput against batch size: measured points, prediction as a dashed line.

    ``batches``: batch sizes; ``measured_tokens_per_s``, ``predicted_tokens_per_s``
    (optional, the roofline) and ``serial_tokens_per_s`` (optional, compute and memory
    time added, drawn dotted): one value per batch. The x-axis is log2. Only the measured
    line carries ``label`` (name the device there); add :func:`sweep_key` once to say what
    the line styles mean.
    """
    from matplotlib.ticker import FuncFormatter
    (pts,) = ax.plot(batches, measured_tokens_per_s, SWEEP_STYLES["measured"], label=label, color=color)
    if predicted_tokens_per_s is not None:
        ax.plot(batches, predicted_tokens_per_s, SWEEP_STYLES["roofline prediction"], color=pts.get_color())
    if serial_tokens_per_s is not None:
        ax.plot(batches, serial_tokens_per_s, SWEEP_STYLES["no-overlap prediction"], color=pts.get_color())
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def sweep_key(ax, parts=tuple(SWEEP_STYLES)):
    """Legend entries (in grey) for the line styles of :func:`sweep`: measured, predictions."""
    for part in parts:
        ax.plot([], [], SWEEP_STYLES[part], color="grey", label=part)


# ---------------------------------------------------------------------------------------
# The checks


def figure_problems(fig) -> list[str]:
    """What breaks the book's figure rules in ``fig``, one sentence each ([] if nothing).

    - a legend overlapping the plotting area of any axes (use :func:`legend`);
    - a text inside the axes crossed by a line, a point or a bar (use :func:`label`);
    - a labelled line hidden, for 60% of its length or more, under a later-drawn one no
      narrower than itself;
    - text smaller than :data:`MIN_PHONE_TEXT_PX` when the figure is shown
      :data:`PHONE_WIDTH_PX` wide.
    """
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    problems = []
    areas = [ax.get_window_extent(renderer) for ax in fig.axes if ax.get_visible()]
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    for leg in legends:
        box = leg.get_window_extent(renderer)
        if any(box.overlaps(area) for area in areas):
            problems.append("a legend overlaps the plotted data area; use plots.legend(fig), "
                            "which puts it below the axes")
    for ax in fig.axes:
        for text in ax.texts:
            if text.get_visible() and text.get_text().strip() and _crossings(fig, text, renderer):
                problems.append(f"the label {text.get_text()!r} is crossed by the data; place it with "
                                "plots.label(ax, text, xy)")
    problems += _hidden_series(fig)
    scale = min(1.0, PHONE_WIDTH_PX / (fig.get_figwidth() * 96))
    small = sorted({round(t.get_fontsize(), 1) for t in fig.findobj(Text)
                    if t.get_visible() and t.get_text().strip()
                    and t.get_fontsize() * _CSS_PX_PER_PT * scale < MIN_PHONE_TEXT_PX})
    if small:
        problems.append(f"text of {', '.join(f'{s:g}' for s in small)} pt is under {MIN_PHONE_TEXT_PX:g} px "
                        f"high at a phone's width in this {fig.get_figwidth():g}-inch figure; "
                        "keep the style's font sizes and figure width")
    return problems


def _display_path(artist) -> np.ndarray:
    """An artist's vertices in display coordinates (n x 2)."""
    if isinstance(artist, Line2D):
        return artist.get_transform().transform_path(artist.get_path()).vertices
    return artist.get_offset_transform().transform(artist.get_offsets())      # a scatter


def _segment_hits_box(p0, p1, box) -> np.ndarray:
    """Which segments p0[i]-p1[i] (display coordinates) pass through ``box`` (Liang-Barsky)."""
    d = p1 - p0
    t0, t1 = np.zeros(len(p0)), np.ones(len(p0))
    ok = np.isfinite(p0).all(1) & np.isfinite(p1).all(1)
    for axis, lo, hi in ((0, box.x0, box.x1), (1, box.y0, box.y1)):
        for p, q in ((-d[:, axis], p0[:, axis] - lo), (d[:, axis], hi - p0[:, axis])):
            with np.errstate(divide="ignore", invalid="ignore"):
                r = q / p
            parallel = p == 0
            ok &= ~(parallel & (q < 0))
            t0 = np.where(~parallel & (p < 0), np.maximum(t0, r), t0)
            t1 = np.where(~parallel & (p > 0), np.minimum(t1, r), t1)
    return ok & (t0 <= t1)


def _crossings(fig, text, renderer) -> list:
    """The lines, points and bars of ``fig`` that cross ``text``'s box, inside its axes."""
    area = text.axes.get_window_extent(renderer)
    # Text's own extent: an annotation's would include its leader line.
    return _hits(fig, Text.get_window_extent(text, renderer), area, renderer)


def _hits(fig, box, area, renderer) -> list:
    """The lines, points and bars of ``fig`` that cross the part of ``box`` inside ``area``."""
    inside = matplotlib.transforms.Bbox.intersection(box, area)
    if inside is None:
        return []
    hit = []
    for other in fig.axes:
        for line in other.lines:
            v = _display_path(line)
            if not line.get_visible() or len(v) == 0:
                continue
            if _has_stroke(line) and len(v) > 1 and _segment_hits_box(v[:-1], v[1:], inside).any():
                hit.append(line)
            elif line.get_marker() not in ("None", "", " ", None) and inside.count_contains(v):
                hit.append(line)
        for coll in other.collections:
            if coll.get_visible() and len(coll.get_offsets()) and inside.count_contains(_display_path(coll)):
                hit.append(coll)
        for container in other.containers:
            for patch in getattr(container, "patches", []):
                if patch.get_window_extent(renderer).overlaps(inside):
                    hit.append(patch)
    return hit


def _has_stroke(line) -> bool:
    return line.get_linestyle() not in ("None", "", " ") and line.get_linewidth() > 0


def _resample(v: np.ndarray, step_px: float, most: int) -> np.ndarray:
    """Points every ``step_px`` along the polyline ``v`` (at most ``most``); gaps (NaN) skipped."""
    v = v[np.isfinite(v).all(1)]
    if len(v) < 2:
        return v
    s = np.concatenate([[0], np.cumsum(np.linalg.norm(np.diff(v, axis=0), axis=1))])
    n = int(min(most, max(2, s[-1] // step_px)))
    at = np.linspace(0, s[-1], n)
    return np.column_stack([np.interp(at, s, v[:, 0]), np.interp(at, s, v[:, 1])])


def _covered(fig, path: np.ndarray, tolerance_px: float) -> np.ndarray:
    """A pixel mask of the figure: True within ``tolerance_px`` of the polyline ``path``."""
    width, height = (int(np.ceil(d)) + 1 for d in fig.bbox.size)
    mask = np.zeros((height, width), bool)
    pts = np.round(_resample(path, 0.5, 200_000)).astype(int)
    r = int(np.ceil(tolerance_px))
    for dx in range(-r, r + 1):
        for dy in range(-r, r + 1):
            if dx * dx + dy * dy <= tolerance_px ** 2 + 0.5:
                x, y = pts[:, 0] + dx, pts[:, 1] + dy
                ok = (x >= 0) & (x < width) & (y >= 0) & (y < height)
                mask[y[ok], x[ok]] = True
    return mask


def _hidden_series(fig, tolerance_px: float = 1.5, share: float = 0.6) -> list[str]:
    """Labelled lines that run under a later-drawn labelled line for ``share`` of their length.

    A line drawn underneath stays visible if it is wider than the one on top (a pale, wide
    band under a thin line), so only a line no wider than the one above it counts as hidden.
    """
    series = []
    for n, line in enumerate(line for ax in fig.axes for line in ax.lines):
        if line.get_visible() and not line.get_label().startswith("_") and len(line.get_xydata()) > 1:
            width_px = line.get_linewidth() * fig.dpi / 72 if _has_stroke(line) else 0
            series.append((line.get_label(), _display_path(line), (line.get_zorder(), n), width_px))
    problems, masks = [], {}
    for name_a, a, order_a, width_a in series:
        a = np.round(_resample(a, 2.0, 2000)).astype(int)
        for name_b, b, order_b, width_b in series:
            if order_b <= order_a or width_b == 0 or width_a > width_b + tolerance_px or len(a) == 0:
                continue
            if order_b not in masks:
                masks[order_b] = _covered(fig, b, tolerance_px)
            mask = masks[order_b]
            inside = (a[:, 0] >= 0) & (a[:, 0] < mask.shape[1]) & (a[:, 1] >= 0) & (a[:, 1] < mask.shape[0])
            near = np.zeros(len(a), bool)
            near[inside] = mask[a[inside, 1], a[inside, 0]]
            if near.mean() >= share:
                problems.append(f"the series {name_a!r} is hidden under {name_b!r} for {near.mean():.0%} of its "
                                "length: draw the lower one wider and paler, or leave one out and say so")
    return problems


def _checked_svg(fig):
    """The inline display of a figure: SVG, after :func:`figure_problems` in a book run."""
    from IPython.core.pylabtools import print_figure
    if book_run():
        problems = figure_problems(fig)
        if problems:
            raise FigureError("; ".join(problems))
    return print_figure(fig, "svg", bbox_inches="tight")


def _display_as_checked_svg() -> None:
    """In an IPython kernel with the inline backend, show every figure through :func:`_checked_svg`."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or "inline" not in matplotlib.get_backend():
        return
    from matplotlib.figure import Figure
    # Importing the inline backend sets up its own figure formats (PNG) once; replace them after.
    import matplotlib_inline.backend_inline  # noqa: F401
    formatters = shell.display_formatter.formatters
    if formatters["image/svg+xml"].type_printers.get(Figure) is _checked_svg:
        return
    for formatter in formatters.values():
        formatter.pop(Figure, None)
    formatters["image/svg+xml"].for_type(Figure, _checked_svg)
