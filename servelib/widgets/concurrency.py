"""Concurrency explorer: how many sequences of a given context fit on a node of GPUs.

A thin layer over :func:`servelib.memory.capacity`: every number shown comes from it.
``concurrency_report`` is the text, ``concurrency_figure`` the static figure for the HTML
book (concurrency against context length, one line per TP degree), and
``concurrency_explorer`` the ipywidgets calculator that redraws both as the controls move.

In a chapter, the calculator cell is tagged ``remove-output`` (the HTML book cannot run it)
and the next cell draws the static figure, captioned like any other::

    # %% tags=["remove-output"]
    concurrency_explorer()

    # %%
    fig = concurrency_figure()
"""
from __future__ import annotations

from .. import _check
from ..hardware import list_gpus
from ..memory import capacity, valid_tp_degrees
from ..models import list_models
from ..plots import legend, new_axes
from ..units import fmt_bytes
from ._common import assemble, config_box, figure_png, report_html, resolve, safely

#: KV-cache element types the explorer offers, with their bytes per element.
KV_DTYPES = {"fp16/bf16": 2, "fp8": 1}
GPU_COUNTS = (1, 2, 4, 8, 16)
TP_DEGREES = (1, 2, 4, 8, 16)
CONTEXTS = tuple(2**k for k in range(9, 18))   # 512 .. 131,072 tokens


def concurrency_report(model="llama-3-70b", gpu="h100-sxm", *, n_gpus: int = 8, context_len: int = 8192,
                       kv_bytes_per_elem: float = 2, reserve_fraction: float = 0.10,
                       tp_degree: int | None = None) -> str:
    """Text report of :func:`servelib.memory.capacity` for one deployment.

    ``model`` is a preset's name, a ModelSpec, a config.json dict or its pasted text; ``gpu``
    a preset's name or a GPUSpec; ``tp_degree`` defaults to ``n_gpus``
    (one replica across the node). Lines: weights, KV per token and per sequence, KV budget
    (all per device), sequences per replica, replicas and the total.
    Raises what :func:`~servelib.memory.capacity` raises (ValueError naming the argument).
    Example: Llama-3-70B on 8 x H100 at 8k, fp16 KV, 10% reserve, TP=8 gives 183 sequences.
    """
    m, g = resolve(model, gpu)
    c = capacity(m, g, n_gpus=n_gpus, context_len=context_len, tp_degree=tp_degree,
                 bytes_per_elem=kv_bytes_per_elem, reserve_fraction=reserve_fraction)
    mixed = f" ({m.layer_mix}; marginal, past every window)" if m.layers else ""
    lines = [
        f"{m.name} on {n_gpus} x {g.name} ({fmt_bytes(g.memory_bytes)} each), TP={c.tp_degree}, "
        f"{c.replicas} replica(s)",
        f"weights per device        {fmt_bytes(c.weights_bytes_per_device)}",
        f"KV per token per device   {fmt_bytes(c.kv_bytes_per_token_per_device)}{mixed}",
        f"KV per {context_len:,}-token sequence {fmt_bytes(c.kv_bytes_per_sequence_per_device)} per device",
        f"KV budget per device      {fmt_bytes(c.kv_budget_bytes_per_device)} "
        f"(after weights, {reserve_fraction:.0%} reserve)",
        f"sequences per replica     {c.sequences_per_replica:,}",
        f"concurrent sequences      {c.concurrency:,}" + ("" if c.fits else "  (does not fit: raise TP)"),
    ]
    return "\n".join(lines)


def concurrency_figure(model="llama-3-70b", gpu="h100-sxm", *, n_gpus: int = 8, context_len: int = 8192,
                       kv_bytes_per_elem: float = 2, reserve_fraction: float = 0.10,
                       tp_degrees=None, contexts=CONTEXTS):
    """Static figure: concurrent sequences on ``n_gpus`` devices against context length.

    One line per TP degree in ``tp_degrees`` (default: those in ``TP_DEGREES`` dividing
    ``n_gpus`` that the model's KV heads allow); the dashed line marks ``context_len``.
    Degrees at which the weights do not fit show no points. Returns the matplotlib figure
    (log-log axes: tokens against sequences).
    """
    m, g = resolve(model, gpu)
    n_gpus = _check.positive_int("n_gpus", n_gpus)
    # Checked before the title formats them, so a bad value is named rather than mis-formatted.
    kv_bytes_per_elem = _check.positive("kv_bytes_per_elem", kv_bytes_per_elem)
    reserve_fraction = _check.fraction("reserve_fraction", reserve_fraction, open_right=True)
    contexts = list(contexts)
    if not contexts:
        raise ValueError("contexts must hold at least one context length")
    if tp_degrees is None:
        tp_degrees = [t for t in TP_DEGREES if n_gpus % t == 0 and t in valid_tp_degrees(m)]
    fig, ax = new_axes("context length (tokens)", "concurrent sequences",
                       f"{m.name} on {n_gpus} x {g.name}, KV {kv_bytes_per_elem:g} B/elem, "
                       f"{reserve_fraction:.0%} reserve", logx=True, logy=True)
    for tp in tp_degrees:
        pts = [(ctx, capacity(m, g, n_gpus=n_gpus, context_len=ctx, tp_degree=tp,
                              bytes_per_elem=kv_bytes_per_elem,
                              reserve_fraction=reserve_fraction).concurrency) for ctx in contexts]
        pts = [(x, y) for x, y in pts if y > 0]   # a log axis has no 0: where nothing fits, no point
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o",
                label=f"TP={tp}" if pts else f"TP={tp} (does not fit)")
    ax.axvline(_check.positive_int("context_len", context_len), color="grey", lw=0.8, ls="--")
    legend(fig, title="tensor parallel")
    return fig


def concurrency_explorer(model: str = "llama-3-70b", gpu: str = "h100-sxm", n_gpus: int = 8,
                         context_len: int = 8192, kv_dtype: str = "fp16/bf16",
                         reserve_fraction: float = 0.10, tp_degree: int = 8):
    """Interactive calculator (ipywidgets): model, GPU, GPU count, context, KV dtype, reserve, TP.

    A ``config.json`` pasted into the text box replaces the preset model (any family
    :meth:`servelib.models.ModelSpec.from_hf_config` reads); a bad or partial one shows
    the error naming the field.

    Returns a ``VBox`` of controls, a text report (:func:`concurrency_report`) and a figure
    (:func:`concurrency_figure`), redrawn whenever a control changes. An impossible choice
    (a TP degree that does not divide the GPU count, say) shows its reason instead of a
    number. Works with ipywidgets 7.7 (Colab) and 8. In the HTML book the widget cannot run:
    show :func:`concurrency_figure` beside it.
    """
    import ipywidgets as w

    _check.choice("kv_dtype", kv_dtype, tuple(KV_DTYPES))
    style = {"description_width": "9em"}
    controls = {
        "model": w.Dropdown(options=list_models(), value=model, description="model", style=style),
        "gpu": w.Dropdown(options=list_gpus(), value=gpu, description="GPU", style=style),
        "n_gpus": w.Dropdown(options=GPU_COUNTS, value=n_gpus, description="GPUs", style=style),
        "tp_degree": w.Dropdown(options=TP_DEGREES, value=tp_degree, description="TP degree", style=style),
        "context_len": w.Dropdown(options=CONTEXTS, value=context_len, description="context (tokens)",
                                  style=style),
        "kv_dtype": w.Dropdown(options=list(KV_DTYPES), value=kv_dtype, description="KV dtype",
                               style=style),
        "reserve_fraction": w.FloatSlider(value=reserve_fraction, min=0.0, max=0.5, step=0.01,
                                          description="reserve", readout_format=".0%", style=style),
        "config": config_box(w, style),
    }
    report = w.HTML()
    image = w.Image(format="png")

    def update(_change=None):
        v = {k: c.value for k, c in controls.items()}
        # A pasted config.json wins over the preset.
        kwargs = dict(model=v["config"].strip() or v["model"], gpu=v["gpu"], n_gpus=v["n_gpus"],
                      context_len=v["context_len"],
                      kv_bytes_per_elem=KV_DTYPES[v["kv_dtype"]], reserve_fraction=v["reserve_fraction"])
        report.value = report_html(safely(concurrency_report, tp_degree=v["tp_degree"], **kwargs))
        try:
            image.value = figure_png(concurrency_figure(**kwargs))
        except (ValueError, KeyError, TypeError):   # the report already says why; no stale figure
            image.value = b""

    return assemble(controls, report, image, update, split=4)
