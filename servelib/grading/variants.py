"""Per-student variants of the exercises: declared inputs, seeded draws, statements.

An exercise's reference takes its inputs as keyword arguments whose defaults are the
book's values; its registration declares which inputs may vary and the statement::

    @exercise("kv-2", rtol=1e-3, unit="GiB",
              vary={"model": ("llama-3-8b", "mistral-7b"), "context_len": (8192, 16_384, 32_768)},
              text="**kv-2.** For {model} ({model.n_layers} layers, {model.n_kv_heads} KV heads, "
                   "`head_dim` {model.head_dim}), how many GiB of fp16 KV cache does one "
                   "{context_len:,}-token sequence take?")
    def _kv_sequence_gib(model="llama-3-8b", context_len=32_768): ...

``text`` is a :meth:`str.format` template over the inputs, or a function of them returning
the statement (where it shows a figure derived from an input, say ``output_len - 1``). An
input named ``model`` (or ending in ``_model``) appears as a :class:`ModelFacts` (``{model}``
is its name as the book prints it, ``{model.n_layers}``, ``{model.billions}`` ...), one named
``gpu`` (or ending in ``_gpu``) as a :class:`GPUFacts`. Rendered with the defaults, the template is the
chapter's statement word for word (a test holds the two together), so the book and the
self-study notebooks show the default variant, and a student's notebook shows theirs.

A student's variant draws each varying input from its declared values with a seed per
exercise and input: HMAC-SHA256 of the instructor's secret over the student id, the
exercise id and the input name. Without the secret nobody can tell which values a student
got, and adding an exercise or an input changes no other draw.
"""
from __future__ import annotations

import hashlib
import hmac
import itertools
import re
import textwrap

from ..hardware import get_gpu
from ..memory import kv_bytes_per_token
from ..models import get_model
from ..units import GiB, KiB
from .registry import Exercise

#: How the book prints the model and GPU presets.
MODEL_LABELS = {"llama-3-8b": "Llama-3-8B", "llama-3-70b": "Llama-3-70B", "llama-2-7b": "Llama-2-7B",
                "llama-2-70b": "Llama-2-70B", "mistral-7b": "Mistral-7B", "mixtral-8x7b": "Mixtral-8x7B",
                "qwen2.5-7b": "Qwen2.5-7B", "falcon-7b": "Falcon-7B"}
GPU_LABELS = {"a100-40gb": "A100 40GB", "a100-80gb": "A100 80GB", "h100-sxm": "H100 SXM",
              "h100-pcie": "H100 PCIe", "h200": "H200", "l4": "L4", "l40s": "L40S", "t4": "T4",
              "b200": "B200", "mi300x": "MI300X"}


class ModelFacts:
    """A model preset as a statement shows it: ``{model}`` is its label (``Llama-3-8B``);
    ``n_layers``, ``n_heads``, ``n_kv_heads``, ``head_dim``, ``vocab_size``, ``hidden_size``
    are its integers;
    ``billions`` its parameter count in billions to two decimals (``8.03``);
    ``kv_kib_per_token`` its fp16 KV cache per token in KiB (``128``)."""

    def __init__(self, name: str):
        spec = get_model(name)
        self.name, self.label = spec.name, MODEL_LABELS.get(spec.name, spec.name)
        self.n_layers, self.n_heads = spec.n_layers, spec.n_heads
        self.n_kv_heads, self.head_dim = spec.n_kv_heads, spec.head_dim
        self.vocab_size, self.hidden_size = spec.vocab_size, spec.hidden_size
        self.billions = f"{spec.n_params / 1e9:.2f}"
        self.kv_kib_per_token = f"{kv_bytes_per_token(spec) / KiB:g}"

    def __format__(self, spec: str) -> str:
        return format(self.label, spec)


class GPUFacts:
    """A GPU preset as a statement shows it: ``{gpu}`` is its label (``H100 SXM``);
    ``memory_gib`` (``80``), ``bf16_tflops`` and ``fp16_tflops`` (dense, ``989.5``),
    ``tb_per_s`` (``3.35``) and ``gb_per_s`` (``3,350``) of memory bandwidth."""

    def __init__(self, name: str):
        spec = get_gpu(name)
        self.name, self.label = spec.name, GPU_LABELS.get(spec.name, spec.name)
        self.memory_gib = f"{spec.memory_bytes / GiB:g}"
        self.bf16_tflops = f"{spec.flops.get('bf16', 0) / 1e12:,g}"
        self.fp16_tflops = f"{spec.flops.get('fp16', 0) / 1e12:,g}"
        self.tb_per_s = f"{spec.hbm_bandwidth_Bps / 1e12:g}"
        self.gb_per_s = f"{spec.hbm_bandwidth_Bps / 1e9:,g}"

    def __format__(self, spec: str) -> str:
        return format(self.label, spec)


def _shown(name: str, value):
    if name == "model" or name.endswith("_model"):
        return ModelFacts(value)
    if name == "gpu" or name.endswith("_gpu"):
        return GPUFacts(value)
    return value


def inputs_for(ex: Exercise, given: dict | None = None) -> dict:
    """Every keyword input of ``ex``'s reference: the defaults, with ``given`` put in.

    Raises ValueError if ``given`` names an input that does not vary, or a value outside
    the declared ones (a variant the instructor did not hand out).
    """
    given = dict(given or {})
    vary = ex.vary or {}
    for name, value in given.items():
        if name not in vary:
            varying = ", ".join(vary) or "none"
            raise ValueError(f"{ex.id} has no varying input {name!r} (inputs that vary: {varying})")
        if value not in vary[name]:
            raise ValueError(f"{ex.id}: {name}={value!r} is not one of its variants {list(vary[name])}")
    return {**ex.defaults, **given}


def render(ex: Exercise, given: dict | None = None) -> str:
    """The statement of ``ex`` for the inputs ``given`` (the book's own when None).

    Raises ValueError if ``ex`` declares no statement, or for inputs :func:`inputs_for` refuses.
    """
    if not ex.text:
        raise ValueError(f"{ex.id} declares no statement (text=)")
    shown = {name: _shown(name, v) for name, v in inputs_for(ex, given).items()}
    return ex.text(**shown) if callable(ex.text) else ex.text.format(**shown)


def all_variants(ex: Exercise):
    """Every combination of ``ex``'s varying inputs, as dicts (one empty dict if none vary)."""
    vary = ex.vary or {}
    for combo in itertools.product(*vary.values()):
        yield dict(zip(vary, combo))


def draw(ex: Exercise, student: str, secret: bytes) -> dict:
    """The varying inputs of ``student``'s variant of ``ex`` (see the module doc)."""
    if not secret:
        raise ValueError("the instructor's secret is empty")
    out = {}
    for name, values in (ex.vary or {}).items():
        digest = hmac.new(secret, f"{student}\0{ex.id}\0{name}".encode(), hashlib.sha256).digest()
        out[name] = values[int.from_bytes(digest, "big") % len(values)]
    return out


def normalise(text: str) -> str:
    """``text`` with every run of white space made one space: how statements are compared."""
    return " ".join(text.split())


def statement_start(markdown: str, exercise_id: str) -> int | None:
    """Where the statement ``**kv-3.** ...`` of ``exercise_id`` starts in a markdown cell, or None.

    A statement runs from that marker to the end of its cell (the exercise's code cell follows).
    """
    m = re.search(r"(?m)^\*\*" + re.escape(exercise_id) + r"\.\*\*", markdown)
    return m.start() if m else None


def wrap(text: str, width: int = 92) -> str:
    """``text`` wrapped to ``width`` columns, paragraph by paragraph (blank lines kept)."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(textwrap.fill(normalise(p), width, break_long_words=False, break_on_hyphens=False)
                       for p in paragraphs)


def literal(value) -> str:
    """``value`` as Python source for a ``check`` call (``16_384``, ``0.25``, ``"l4"``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return repr(value)
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def check_call(exercise_id: str, answer: str, given: dict) -> str:
    """The ``check(...)`` call a student's notebook shows: ``check("kv-2", answer, context_len=16_384)``."""
    args = "".join(f", {k}={literal(v)}" for k, v in given.items())
    return f'check("{exercise_id}", {answer}{args})'
