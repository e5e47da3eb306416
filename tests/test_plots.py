"""servelib.plots: the book's figure style, and the check that keeps four faults out of figures.

Each fault was once in the book: a legend over the curves, a label struck through by a
line, a series hidden under another, text too small to read on a phone. The check must
find each one, and the style's own helpers must avoid it.
"""
import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell

from servelib import plots
from servelib.book import BOOK_RUN_ENV, glue, table

X = np.linspace(0, 10, 200)


def figure_with(*series):
    fig, ax = plots.new_axes("time (s)", "tokens")
    for name, ys in series:
        ax.plot(X, ys, label=name)
    return fig, ax


def test_a_legend_over_the_data_is_found_and_plots_legend_avoids_it():
    fig, ax = figure_with(("rising", X * 100), ("falling", 1000 - X * 100))
    ax.legend(loc="center")
    assert any("legend overlaps" in p for p in plots.figure_problems(fig))
    fig, ax = figure_with(("rising", X * 100), ("falling", 1000 - X * 100))
    plots.legend(fig)
    assert plots.figure_problems(fig) == []
    assert len(fig.legends) == 1 and [t.get_text() for t in fig.legends[0].get_texts()] == ["rising", "falling"]


def test_a_struck_label_is_found_and_plots_label_avoids_it():
    fig, ax = figure_with(("rising", X * 100))
    ax.annotate("half way", (5, 500), xytext=(-20, -3), textcoords="offset points")    # on the line
    assert any("'half way' is crossed" in p for p in plots.figure_problems(fig))
    fig, ax = figure_with(("rising", X * 100), ("flat", np.full_like(X, 520)))
    plots.legend(fig)
    plots.label(ax, "half way", (5, 500))
    assert plots.figure_problems(fig) == []
    (text,) = ax.texts
    box, area = text.get_window_extent(), ax.get_window_extent()
    assert area.contains(*box.p0) and area.contains(*box.p1)              # inside the axes


def test_a_hidden_series_is_found():
    fig, ax = figure_with(("final admission", np.minimum(X * 50_000, 40_000)))
    ax.axhline(40_000, color="red", label="capacity")                     # chapter 5's old figure
    plots.legend(fig)
    assert any("'final admission' is hidden under 'capacity'" in p for p in plots.figure_problems(fig))
    fig, ax = figure_with(("final admission", np.minimum(X * 50_000, 40_000)))
    ax.axhspan(40_000, 45_000, alpha=0.1, label="beyond the cache")      # what it draws now
    plots.legend(fig)
    assert plots.figure_problems(fig) == []
    fig, ax = plots.new_axes("time (s)", "step time (ms)")                 # a wide pale band under
    ax.plot(X, np.where(X % 2 < 0.1, 50, 5), lw=3, alpha=0.35, label="unchunked")   # a thin line
    ax.plot(X, np.where(X % 2 < 0.1, 8, 5), lw=0.8, label="chunked")       # shows both
    plots.legend(fig)
    assert plots.figure_problems(fig) == []


def test_small_text_is_found():
    fig, ax = figure_with(("a", X))
    plots.legend(fig)
    assert plots.figure_problems(fig) == []
    ax.set_title("tiny", fontsize=6)
    assert any("6 pt is under" in p for p in plots.figure_problems(fig))
    fig, ax = figure_with(("a", X))
    fig.set_size_inches(12, 4)                 # shrunk to a phone's width, 11 pt becomes too small
    assert any("12-inch figure" in p for p in plots.figure_problems(fig))


def test_sweep_names_the_device_once_and_keys_the_line_styles():
    fig, ax = plots.new_axes("batch size", "decode tokens/s", logy=True)
    for name, scale in (("this machine", 1), ("H100 SXM, bf16", 30)):
        plots.sweep(ax, [1, 2, 4, 8], [scale * b * 10 for b in (1, 2, 4, 8)],
                    [scale * b * 12 for b in (1, 2, 4, 8)], label=name,
                    serial_tokens_per_s=[scale * b * 8 for b in (1, 2, 4, 8)])
    plots.sweep_key(ax)
    plots.legend(fig)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["this machine", "H100 SXM, bf16", "measured", "roofline prediction", "no-overlap prediction"]
    assert plots.figure_problems(fig) == []


def test_device_label_is_short():
    live = {"device": {"name": "AMD EPYC, 2 cores"}, "dtype": "bf16"}
    saved = {"device": {"name": "NVIDIA H100 80GB HBM3"}, "dtype": "bf16"}
    assert plots.device_label(live, live) == "this machine"
    assert plots.device_label(saved, live) == "NVIDIA H100 80GB HBM3, bf16"


@pytest.fixture
def shell(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    import matplotlib
    matplotlib.use("module://matplotlib_inline.backend_inline")
    sh = InteractiveShell.instance()
    yield sh
    matplotlib.use("agg")


def test_in_ipython_figures_show_as_svg_and_a_book_run_rejects_a_faulty_one(shell, monkeypatch):
    from matplotlib.figure import Figure
    plots.apply_style()
    formatters = shell.display_formatter.formatters
    assert Figure not in formatters["image/png"].type_printers                 # no bitmaps
    fig, ax = figure_with(("a", X))
    ax.legend(loc="center")
    monkeypatch.delenv(BOOK_RUN_ENV, raising=False)
    assert formatters["image/svg+xml"](fig).startswith("<?xml")             # a reader: just shown
    monkeypatch.setenv(BOOK_RUN_ENV, "1")
    with pytest.raises(plots.FigureError, match="legend overlaps"):
        plots._checked_svg(fig)
    assert plots.FigureError("x")._render_traceback_() == ["FigureError: x"]   # shown without a traceback


def test_glue_records_only_when_the_book_runs_and_never_echoes(monkeypatch, capsys):
    monkeypatch.delenv(BOOK_RUN_ENV, raising=False)
    assert glue("x", "2,276") is None and capsys.readouterr().out == ""
    monkeypatch.setenv(BOOK_RUN_ENV, "1")
    assert glue("x", "2,276") is None


def test_table_aligns_numbers_right_and_text_left():
    text = table([("l4", 3.0, 12_345), ("h100-sxm", 0.25, 7)], ["GPU", "TTFT (ms)", "tokens"], ["", ".2f", ",d"])
    assert text.splitlines() == ["GPU       TTFT (ms)  tokens",
                                 "l4             3.00  12,345",
                                 "h100-sxm       0.25       7"]
    assert max(len(line) for line in text.splitlines()) == 27
    with pytest.raises(ValueError, match="row 0 has 2 values for 3 columns"):
        table([(1, 2)], ["a", "b", "c"])
    with pytest.raises(ValueError, match="formats has 1 entries for 2 columns"):
        table([(1, 2)], ["a", "b"], [".1f"])
