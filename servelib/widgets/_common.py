"""Pieces the calculators share: a figure as PNG bytes, and a report as preformatted HTML.

The calculators draw into an ``ipywidgets.Image`` and an ``ipywidgets.HTML`` rather than an
``Output`` area: both exist with the same meaning in ipywidgets 7.7 (Colab) and 8, and
their values can be read back in tests without a browser.
"""
from __future__ import annotations

import html
import io

import matplotlib.pyplot as plt

from .. import _check
from ..hardware import as_gpu
from ..models import ModelSpec, get_model


def figure_png(fig) -> bytes:
    """The figure rendered as PNG bytes; the figure is closed so repeated updates do not pile up."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def report_html(text: str) -> str:
    """Plain text as an HTML ``<pre>`` block (escaped)."""
    return f"<pre style='margin:0'>{html.escape(text)}</pre>"


def safely(report, **kwargs) -> str:
    """``report(**kwargs)``, or the error's message when the combination is impossible.

    A calculator must not die on a choice such as a TP degree that does not divide the GPU
    count; it shows why the choice is impossible instead (never a made-up number).
    """
    try:
        return report(**kwargs)
    except (ValueError, KeyError, TypeError) as exc:
        return f"not possible: {exc}"


def resolve(model, gpu):
    """``(ModelSpec, GPUSpec)`` from presets' names or the specs themselves (KeyError if unknown).

    ``model`` may also be a ``config.json`` as a dict or as pasted JSON text (starting with
    ``{``), read by :meth:`ModelSpec.from_hf_config`; a bad or partial config raises its
    error naming the field (KeyError, ValueError or TypeError).
    """
    if isinstance(model, dict) or (isinstance(model, str) and model.lstrip().startswith("{")):
        model = ModelSpec.from_hf_config(model, name="pasted config.json")
    elif isinstance(model, str):
        model = get_model(model)
    return (_check.instance("model", model, ModelSpec, "a ModelSpec, a preset name or a config.json"),
            as_gpu(gpu))


def config_box(w, style):
    """The text box a reader pastes a ``config.json`` into (empty: use the preset)."""
    return w.Textarea(value="", placeholder="paste a config.json here to use it instead of the preset",
                      description="config.json", style=style, layout=w.Layout(width="40em", height="6em"))


def assemble(controls: dict, report, image, update, *, split: int | None = None):
    """Wire a calculator: ``update`` runs now and on every change of a control.

    Returns a ``VBox`` of the controls (in two columns when ``split`` gives the first
    column's length), the report and the image, with ``.controls``, ``.report`` and
    ``.image`` kept as handles for tests and curious readers.
    """
    import ipywidgets as w

    for c in controls.values():
        c.observe(update, names="value")
    update()
    widgets = list(controls.values())
    panel = (w.VBox(widgets) if split is None
             else w.HBox([w.VBox(widgets[:split]), w.VBox(widgets[split:])]))
    box = w.VBox([panel, report, image])
    box.controls, box.report, box.image = controls, report, image
    return box
