"""Capacity-economics calculators: break-even against the output mix, and a floor's percentile
against cost and availability.

Thin layers over :mod:`servelib.economics`: every number shown comes from it. Each
calculator has a text report, a static figure (what the HTML book shows beside it) and the
ipywidgets calculator that redraws both as the controls move.
"""
from __future__ import annotations

import numpy as np

from .. import _check
from ..economics import (GPT_4O, blended_price, break_even_tokens, break_even_utilization, cheapest_floor,
                         cheapest_floor_percentile, floor_at_percentile, floor_break_even_utilization,
                         ptu_break_even_utilization, spillover_cost)
from ..economics.prices import MINUTES_PER_MONTH
from ..economics.spillover import _demand
from ..economics.scenarios import COMMITMENT, MIX_TRACE, trace
from ..plots import label, legend, new_axes
from ._common import assemble, figure_png, report_html, safely

_C_IN_1M, _C_OUT_1M = GPT_4O.usd_per_1k_input * 1000, GPT_4O.usd_per_1k_output * 1000
_FRACTIONS = np.linspace(0, 1, 101)


def break_even_report(monthly_commitment_usd: float = COMMITMENT.monthly_usd,
                      capacity_tokens_per_minute: float = COMMITMENT.capacity_tokens_per_minute,
                      output_fraction: float = 0.5, usd_per_1m_input: float = _C_IN_1M,
                      usd_per_1m_output: float = _C_OUT_1M, output_weight: float = 1.0) -> str:
    """Text: blended price, break-even tokens and utilisation of a commitment at one mix.

    Prices here are per 1M tokens (as price pages quote them). ``output_weight``: how many
    tokens of capacity an output token uses (1: capacity counted in tokens of any kind; the
    price ratio, 4 for gpt-4o: a PTU, whose break-even the mix does not move). Raises
    ValueError naming a bad argument (see :func:`servelib.economics.break_even_utilization`).
    """
    cap = _check.positive("capacity_tokens_per_minute", capacity_tokens_per_minute) * MINUTES_PER_MONTH
    c_in = _check.non_negative("usd_per_1m_input", usd_per_1m_input) / 1000
    c_out = _check.non_negative("usd_per_1m_output", usd_per_1m_output) / 1000
    blended = blended_price(c_in, c_out, output_fraction)
    u = break_even_utilization(monthly_commitment_usd, cap, c_in, c_out, output_fraction,
                               output_weight=output_weight)
    return "\n".join([
        f"commitment ${monthly_commitment_usd:,.0f}/month for {capacity_tokens_per_minute:,.0f} tokens/min "
        f"({cap / 1e9:.2f} B tokens/month), an output token using {output_weight:g} of them",
        f"output fraction {output_fraction:.0%}: blended PAYG ${blended * 1000:.2f} per 1M tokens",
        f"break-even volume  {break_even_tokens(monthly_commitment_usd, blended) / 1e9:.2f} B tokens/month",
        f"break-even utilisation {u:.0%}" + ("  (never pays off)" if u > 1 else ""),
    ])


def break_even_figure(monthly_commitment_usd: float = COMMITMENT.monthly_usd,
                      capacity_tokens_per_minute: float = COMMITMENT.capacity_tokens_per_minute, *,
                      usd_per_1m_input: float = _C_IN_1M, usd_per_1m_output: float = _C_OUT_1M,
                      output_weight: float = 1.0, marks=(0.1, 0.5), ptu_terms=()):
    """Static figure: break-even utilisation (%) of a commitment against the output fraction.

    ``output_weight``: tokens of capacity an output token uses (1: counted in tokens).
    ``marks``: output fractions to annotate. ``ptu_terms``: e.g. ``("monthly", "yearly")``
    adds gpt-4o PTUs at list price, their capacity in input-equivalent tokens (dashed, flat:
    the mix cancels). Returns the matplotlib figure.
    """
    cap = _check.positive("capacity_tokens_per_minute", capacity_tokens_per_minute) * MINUTES_PER_MONTH
    _check.non_negative("monthly_commitment_usd", monthly_commitment_usd)
    c_in = _check.non_negative("usd_per_1m_input", usd_per_1m_input) / 1000
    c_out = _check.non_negative("usd_per_1m_output", usd_per_1m_output) / 1000
    fig, ax = new_axes("output fraction of tokens (%)", "break-even utilisation (%)",
                       rf"\${monthly_commitment_usd:,.0f}/month for {capacity_tokens_per_minute:,.0f} tokens/min; "
                       rf"PAYG \${usd_per_1m_input:g}/\${usd_per_1m_output:g} per 1M")
    kw = dict(output_weight=output_weight)
    u = [break_even_utilization(monthly_commitment_usd, cap, c_in, c_out, f, **kw) for f in _FRACTIONS]
    name = ("capacity counted in tokens" if output_weight == 1
            else f"capacity with an output token as {output_weight:g} tokens")
    ax.plot(_FRACTIONS * 100, np.array(u) * 100, label=name)
    for term in ptu_terms:
        ax.plot(_FRACTIONS * 100, [ptu_break_even_utilization(f, term) * 100 for f in _FRACTIONS], ls="--",
                label=f"gpt-4o PTU, {term} (output weighs the price ratio)")
    ys = [break_even_utilization(monthly_commitment_usd, cap, c_in, c_out, f, **kw) * 100 for f in marks]
    ax.plot([f * 100 for f in marks], ys, "o", color="black")
    ax.axhline(100, color="grey", lw=0.8, ls=":")
    ax.set_ylim(0, max(120, min(max(u) * 100 * 1.1, 300)))
    legend(fig)
    for f, y in zip(marks, ys):        # placed last, clear of every line and of the legend
        label(ax, f"{y:.0f}% at {f:.0%} output", (f * 100, y))
    return fig


def break_even_calculator(monthly_commitment_usd: float = COMMITMENT.monthly_usd,
                          capacity_tokens_per_minute: float = COMMITMENT.capacity_tokens_per_minute,
                          output_fraction: float = 0.5):
    """Interactive calculator (ipywidgets): commitment, capacity, output mix, PAYG prices and
    how many tokens of capacity an output token uses (1: counted in tokens; 4: a gpt-4o PTU).

    Returns a ``VBox`` of controls, a report (:func:`break_even_report`) and the figure
    (:func:`break_even_figure`), redrawn on every change. In the HTML book the widget cannot
    run: show :func:`break_even_figure` beside it.
    """
    import ipywidgets as w

    style = {"description_width": "12em"}
    controls = {
        "monthly_commitment_usd": w.FloatText(value=monthly_commitment_usd, description="commitment ($/month)",
                                              style=style),
        "capacity_tokens_per_minute": w.FloatText(value=capacity_tokens_per_minute,
                                                  description="capacity (tokens/min)", style=style),
        "output_fraction": w.FloatSlider(value=output_fraction, min=0, max=1, step=0.01,
                                         description="output fraction", readout_format=".0%", style=style),
        "usd_per_1m_input": w.FloatText(value=_C_IN_1M, description="input ($ per 1M)", style=style),
        "usd_per_1m_output": w.FloatText(value=_C_OUT_1M, description="output ($ per 1M)", style=style),
        "output_weight": w.FloatSlider(value=1.0, min=0.5, max=8, step=0.5,
                                       description="output token weight", style=style),
    }
    report, image = w.HTML(), w.Image(format="png")

    def update(_change=None):
        v = {k: c.value for k, c in controls.items()}
        report.value = report_html(safely(break_even_report, **v))
        fig_kwargs = {k: x for k, x in v.items() if k != "output_fraction"}
        try:
            image.value = figure_png(break_even_figure(marks=(v["output_fraction"],), **fig_kwargs))
        except (ValueError, TypeError):
            pass                                 # the report already says why
    return assemble(controls, report, image, update)


def _floor_inputs(demand_tpm, output_fraction, usd_per_1m_capacity):
    d = trace() if demand_tpm is None else _demand(demand_tpm)
    blended = blended_price(GPT_4O.usd_per_1k_input, GPT_4O.usd_per_1k_output, output_fraction)
    unit = _check.non_negative("usd_per_1m_capacity", usd_per_1m_capacity) * MINUTES_PER_MONTH / 1e6
    return d, blended, unit


_CAPACITY_USD_PER_1M = COMMITMENT.usd_per_tpm_month / MINUTES_PER_MONTH * 1e6     # $2.50


def floor_report(percentile: float = 50, *, demand_tpm=None, output_fraction: float = MIX_TRACE,
                 usd_per_1m_capacity: float = _CAPACITY_USD_PER_1M) -> str:
    """Text: the break-even utilisation of the capacity and the percentile it sets for the
    cheapest floor, then a floor at a demand percentile, with spill and without, against no
    floor and against the cheapest floor.

    ``demand_tpm`` defaults to the chapter's seeded trace; PAYG is gpt-4o at the mix;
    ``usd_per_1m_capacity`` prices dedicated capacity per 1M tokens it can carry a month.
    """
    d, blended, unit = _floor_inputs(demand_tpm, output_fraction, usd_per_1m_capacity)
    floor = floor_at_percentile(d, percentile)
    spill = spillover_cost(d, floor, unit, blended, spill=True)
    refuse = spillover_cost(d, floor, unit, blended, spill=False)
    none = spillover_cost(d, 0, unit, blended)
    best = cheapest_floor(d, unit, blended)
    u = floor_break_even_utilization(unit, blended)
    return "\n".join([
        f"break-even utilisation u* = {u:.0%}: the cheapest floor is the (1 - u*) quantile, "
        f"p{cheapest_floor_percentile(u):.0f}",
        f"floor at p{percentile:g}: {floor:,.0f} tokens/min, busy {spill.floor_utilization:.0%} of the time-capacity",
        f"  spill to PAYG : ${spill.total_usd:>10,.0f}/month, availability {spill.availability:.1%}",
        f"  refuse        : ${refuse.total_usd:>10,.0f}/month, availability {refuse.availability:.1%}",
        f"no floor (PAYG) : ${none.total_usd:>10,.0f}/month, availability 100.0%",
        f"cheapest floor  : {best.floor_tpm:,.0f} tokens/min (p{100 * np.mean(d <= best.floor_tpm):.0f}), "
        f"${best.total_usd:,.0f}/month",
    ])


def floor_figure(percentile: float = 50, *, demand_tpm=None, output_fraction: float = MIX_TRACE,
                 usd_per_1m_capacity: float = _CAPACITY_USD_PER_1M):
    """Static figure: monthly cost (spill, refuse) and availability (refuse) against the floor's
    percentile of demand, 0 to 100; the chosen percentile dashed, the cheapest floor (the
    1 - u* quantile) marked. Returns the figure.
    """
    d, blended, unit = _floor_inputs(demand_tpm, output_fraction, usd_per_1m_capacity)
    floor_at_percentile(d, percentile)          # checks ``percentile`` before it is drawn
    ps = np.arange(0, 101)
    floors = np.percentile(d, ps)
    spill = [spillover_cost(d, f, unit, blended, spill=True) for f in floors]
    refuse = [spillover_cost(d, f, unit, blended, spill=False) for f in floors]
    fig, ax = new_axes("floor at percentile of demand", r"monthly cost (\$1,000)",
                       rf"{output_fraction:.0%} output mix, capacity \${usd_per_1m_capacity:.2f} per 1M tokens")
    ax.plot(ps, [r.total_usd / 1e3 for r in spill], label="floor + spill to PAYG")
    ax.plot(ps, [r.total_usd / 1e3 for r in refuse], label="floor, overflow refused")
    ax.axhline(spillover_cost(d, 0, unit, blended).total_usd / 1e3, color="grey", ls=":", label="PAYG only")
    ax.axvline(percentile, color="black", lw=0.8, ls="--")
    best_p = cheapest_floor_percentile(floor_break_even_utilization(unit, blended))
    best = spillover_cost(d, float(np.percentile(d, best_p)), unit, blended)
    ax.plot([best_p], [best.total_usd / 1e3], "o", color="black",
            label=rf"cheapest floor: p{best_p:.0f}, the 1 - u* quantile")
    ax2 = ax.twinx()
    ax2.plot(ps, [r.availability * 100 for r in refuse], color="C3", alpha=0.6, label="availability if refused")
    ax2.set_ylabel("availability if refused (%)")
    ax2.set_ylim(0, 101)
    ax2.grid(False)
    legend(fig)
    return fig


def floor_calculator(percentile: float = 50, *, demand_tpm=None, output_fraction: float = MIX_TRACE,
                     usd_per_1m_capacity: float = _CAPACITY_USD_PER_1M):
    """Interactive calculator (ipywidgets): the floor's percentile, the mix and the capacity price.

    Returns a ``VBox`` of controls, a report (:func:`floor_report`) and the figure
    (:func:`floor_figure`). In the HTML book show :func:`floor_figure` beside it.
    """
    import ipywidgets as w

    style = {"description_width": "12em"}
    controls = {
        "percentile": w.IntSlider(value=int(percentile), min=0, max=100, description="floor percentile",
                                  style=style),
        "output_fraction": w.FloatSlider(value=output_fraction, min=0, max=1, step=0.01,
                                         description="output fraction", readout_format=".0%", style=style),
        "usd_per_1m_capacity": w.FloatSlider(value=usd_per_1m_capacity, min=0.5, max=6, step=0.05,
                                             description="capacity ($ per 1M)", style=style),
    }
    report, image = w.HTML(), w.Image(format="png")

    def update(_change=None):
        v = {k: c.value for k, c in controls.items()}
        report.value = report_html(safely(floor_report, demand_tpm=demand_tpm, **v))
        image.value = figure_png(floor_figure(demand_tpm=demand_tpm, **v))
    return assemble(controls, report, image, update)
