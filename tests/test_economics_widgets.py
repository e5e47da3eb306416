"""The economics calculators: reports and figures come from servelib, controls redraw them."""
import matplotlib

matplotlib.use("Agg")

from servelib.widgets.economics import (break_even_calculator, break_even_figure, break_even_report,
                                        floor_calculator, floor_figure, floor_report)


def test_break_even_report_reproduces_the_syllabus_pair():
    assert "break-even utilisation 40%" in break_even_report(output_fraction=0.5)
    assert "break-even utilisation 77%" in break_even_report(output_fraction=0.1)
    assert "$3.25 per 1M" in break_even_report(output_fraction=0.1)
    # With output weighing the price ratio (a PTU's count) the mix no longer moves it.
    for f in (0.1, 0.5):
        assert "break-even utilisation 100%" in break_even_report(output_fraction=f, output_weight=4)


def test_floor_report_derives_the_cheapest_percentile_from_the_break_even():
    assert "u* = 57%: the cheapest floor is the (1 - u*) quantile, p43" in floor_report(50)
    # gpt-4o PTUs reserved monthly at a 25% mix cost $4.16 per 1M tokens of capacity: u* = 95%.
    assert "u* = 95%" in floor_report(50, usd_per_1m_capacity=260 / (2500 / 1.75) / 43_800 * 1e6)


def test_floor_report_numbers():
    text = floor_report(50)
    assert "availability 100.0%" in text and "availability 74.7%" in text and "(p43)" in text


def test_figures_have_labelled_axes():
    for fig in (break_even_figure(ptu_terms=("monthly",)), floor_figure()):
        ax = fig.axes[0]
        assert ax.get_xlabel() and ax.get_ylabel() and ax.lines


def test_calculators_redraw_and_explain_bad_input():
    be = break_even_calculator()
    be.controls["output_fraction"].value = 0.1
    assert "77%" in be.report.value and be.image.value
    be.controls["output_weight"].value = 4
    assert "100%" in be.report.value
    be.controls["usd_per_1m_input"].value = -1
    assert "not possible" in be.report.value and "usd_per_1m_input" in be.report.value
    fl = floor_calculator()
    fl.controls["percentile"].value = 100
    assert "p100" in fl.report.value and fl.image.value
