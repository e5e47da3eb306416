"""Roofline and batching explorer: what batching does to a decode step.

A thin layer over :mod:`servelib.roofline` (:func:`~servelib.roofline.predict_tpot_s`,
:func:`~servelib.roofline.decode_tokens_per_s`, the FLOPs and bytes of a decode step) and
:func:`servelib.hardware.ridge_point`. ``roofline_report`` is the text,
``roofline_figure`` the static figure for the HTML book (the roofline with the decode
step at each batch size, and throughput and time per token against batch), and
``roofline_explorer`` the ipywidgets calculator.

In a chapter, the calculator cell is tagged ``remove-output`` (the HTML book cannot run it)
and the next cell draws the static figure, captioned like any other::

    # %% tags=["remove-output"]
    roofline_explorer()

    # %%
    fig = roofline_figure()
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from .. import _check
from ..hardware import list_gpus, ridge_point
from ..memory import capacity, kv_bytes_per_sequence
from ..models import list_models
from ..plots import apply_style, label, legend
from ..roofline import (decode_attention_flops_per_step, decode_bytes_per_step, decode_flops_per_step,
                        decode_tokens_per_s, decode_weight_bytes, predict_tpot_s)
from ._common import assemble, config_box, figure_png, report_html, resolve, safely

BATCHES = tuple(2**k for k in range(0, 11))      # 1 .. 1,024 sequences
CONTEXTS = tuple(2**k for k in range(9, 18))     # 512 .. 131,072 tokens


def decode_point(model, gpu, batch: int, context_len: int, *, dtype: str = "bf16", tp_degree: int = 1) -> dict:
    """One decode step on one device as the roofline sees it.

    Returns a dict: ``intensity`` (FLOP/byte: the step's FLOPs, weights' and attention's,
    over its bytes, both from :mod:`servelib.roofline`, per device under TP), ``tpot_s``
    (:func:`predict_tpot_s`), ``tokens_per_s`` (:func:`decode_tokens_per_s`, all sequences
    of the replica) and ``utilization`` (achieved FLOP/s over the dtype's dense peak, in
    [0, 1]). 16-bit weights and KV cache; a mixture of experts reads only the experts the
    batch routes to; communication ignored (a lower bound on time).
    Raises ValueError for a bad size, an unknown dtype on this GPU, or a TP degree the KV
    heads cannot be split over.
    """
    m, g = resolve(model, gpu)
    tp = _check.positive_int("tp_degree", tp_degree)
    flops = (decode_flops_per_step(m.n_active_params, batch)
             + decode_attention_flops_per_step(m, context_len, batch)) / tp
    bytes_moved = decode_bytes_per_step(decode_weight_bytes(m, batch) / tp,
                                        kv_bytes_per_sequence(m, context_len, tp_degree=tp), batch)
    tpot = predict_tpot_s(m, g, batch, context_len, dtype=dtype, tp_degree=tp)
    return {"intensity": flops / bytes_moved, "tpot_s": tpot,
            "tokens_per_s": decode_tokens_per_s(m, g, batch, context_len, dtype=dtype, tp_degree=tp),
            "utilization": flops / tpot / g.peak_flops(dtype)}


def roofline_report(model="llama-3-8b", gpu="h100-sxm", *, batch: int = 1, context_len: int = 4096,
                    dtype: str = "bf16", tp_degree: int = 1) -> str:
    """Text report: ridge point, the decode step's intensity, utilization, TPOT and throughput.

    Also how many sequences of ``context_len`` the KV memory allows (10% reserve,
    :func:`servelib.memory.capacity`), since a batch larger than that cannot be run.
    Example: Llama-3-8B on an H100 in bf16 at batch 1 runs near 1 FLOP/byte against a ridge
    point of 295: a fraction of a percent of the GPU's compute.
    """
    m, g = resolve(model, gpu)
    p = decode_point(m, g, batch, context_len, dtype=dtype, tp_degree=tp_degree)
    fit = capacity(m, g, n_gpus=tp_degree, context_len=context_len, tp_degree=tp_degree).concurrency
    ridge = ridge_point(g, dtype)
    bound = "compute" if p["intensity"] >= ridge else "memory bandwidth"
    return "\n".join([
        f"{m.name} on {g.name} ({dtype}), TP={tp_degree}, batch {batch}, context {context_len:,} tokens",
        f"ridge point              {ridge:,.0f} FLOP/byte",
        f"decode step intensity    {p['intensity']:,.2f} FLOP/byte  ({bound}-bound)",
        f"compute utilization      {p['utilization']:.2%}",
        f"time per output token    {p['tpot_s'] * 1e3:,.2f} ms",
        f"decode throughput        {p['tokens_per_s']:,.0f} tokens/s",
        f"KV memory fits           {fit:,} sequences at this context"
        + ("  (this batch does not fit)" if batch > fit else ""),
    ])


def roofline_figure(model="llama-3-8b", gpu="h100-sxm", *, context_len: int = 4096, dtype: str = "bf16",
                    tp_degree: int = 1, batches=BATCHES):
    """Static figure, two panels, for a model decoding at ``context_len`` on one device.

    Top: the roofline (attainable FLOP/s against arithmetic intensity, log-log) with the
    ridge point and the decode step at each batch size. Bottom: decode throughput
    (tokens/s) and time per output token (ms) against batch size. In both panels a batch
    beyond what the KV memory holds (:func:`servelib.memory.capacity`, 10% reserve) is drawn
    hollow, and the legend says so: it cannot run. Returns the matplotlib figure.
    """
    m, g = resolve(model, gpu)
    batches = list(batches)
    if not batches:
        raise ValueError("batches must hold at least one batch size")
    apply_style()
    peak, bw, ridge = g.peak_flops(dtype), g.hbm_bandwidth_Bps, ridge_point(g, dtype)
    fit = capacity(m, g, n_gpus=tp_degree, context_len=context_len, tp_degree=tp_degree).concurrency
    pts = [decode_point(m, g, b, context_len, dtype=dtype, tp_degree=tp_degree) for b in batches]

    # One panel above the other, so each stays readable at a phone's width.
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(5.6, 7.2))
    xs = [ridge / 1000, ridge * 10]
    ax1.plot([xs[0], ridge, xs[1]], [xs[0] * bw, peak, peak], color="black", lw=1.5, label="roofline")
    ax1.axvline(ridge, color="grey", ls="--", lw=0.8)
    ok = [b <= fit for b in batches]
    colors = plt.get_cmap("viridis")([i / max(1, len(pts) - 1) for i in range(len(pts))])
    ax1.scatter([p["intensity"] for p in pts], [p["utilization"] * peak for p in pts], zorder=3,
                edgecolors=colors, facecolors=[c if o else "none" for c, o in zip(colors, ok)],
                label=f"decode step, batch {batches[0]:,} to {batches[-1]:,}")
    ax1.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte)",
            ylabel="attained FLOP/s", title=f"{g.name}, {dtype}")
    if not all(ok):
        ax1.scatter([], [], facecolors="none", edgecolors="grey", label=f"hollow: beyond the {fit:,} "
                    "sequences the KV memory holds")

    ax2.plot(batches, [p["tokens_per_s"] for p in pts], color="C0", label="throughput")
    ax2.scatter(batches, [p["tokens_per_s"] for p in pts], color="C0",
                facecolors=["C0" if o else "none" for o in ok])
    ax2.set(xscale="log", yscale="log", xlabel="batch size (sequences)", ylabel="decode throughput (tokens/s)",
            title=f"{m.name}, context {context_len:,} tokens")
    ax2.set_xscale("log", base=2)
    twin = ax2.twinx()
    twin.plot(batches, [p["tpot_s"] * 1e3 for p in pts], color="C1", ls="--", label="time per token")
    twin.set_ylabel("time per output token (ms)")
    twin.grid(False)
    legend(fig)
    label(ax1, f"ridge {ridge:,.0f}", (ridge, peak))
    return fig


def roofline_explorer(model: str = "llama-3-8b", gpu: str = "h100-sxm", batch: int = 1,
                      context_len: int = 4096, dtype: str = "bf16", tp_degree: int = 1):
    """Interactive calculator (ipywidgets): model, GPU, dtype, TP degree, batch, context.

    A ``config.json`` pasted into the text box replaces the preset model.

    Returns a ``VBox`` of controls, a text report (:func:`roofline_report`) and a figure
    (:func:`roofline_figure`), redrawn whenever a control changes; a choice the GPU or the
    model does not allow (bf16 on a T4, say) shows its reason instead of a number. Works
    with ipywidgets 7.7 (Colab) and 8. In the HTML book show :func:`roofline_figure` beside it.
    """
    import ipywidgets as w

    style = {"description_width": "9em"}
    controls = {
        "model": w.Dropdown(options=list_models(), value=model, description="model", style=style),
        "gpu": w.Dropdown(options=list_gpus(), value=gpu, description="GPU", style=style),
        "dtype": w.Dropdown(options=["fp16", "bf16", "fp8"], value=dtype, description="dtype", style=style),
        "tp_degree": w.Dropdown(options=(1, 2, 4, 8), value=tp_degree, description="TP degree", style=style),
        "batch": w.SelectionSlider(options=BATCHES, value=batch, description="batch", style=style),
        "context_len": w.SelectionSlider(options=CONTEXTS, value=context_len, description="context (tokens)",
                                         style=style),
        "config": config_box(w, style),
    }
    report = w.HTML()
    image = w.Image(format="png")

    def update(_change=None):
        v = {k: c.value for k, c in controls.items()}
        v["model"] = v.pop("config").strip() or v["model"]      # a pasted config.json wins
        report.value = report_html(safely(roofline_report, **v))
        v.pop("batch")
        try:
            image.value = figure_png(roofline_figure(**v))
        except (ValueError, KeyError) as exc:   # the report already says why; no stale figure
            image.value = b""
            report.value += report_html(f"no figure: {exc}")

    return assemble(controls, report, image, update, split=3)
