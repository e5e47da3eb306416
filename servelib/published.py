"""GPU measurements published by others, to hold servelib's predictions against.

These figures were measured by other people on their hardware. The book labels them
"published", with their source, and never "measured here". Each record keeps the setup its
source states, because a figure means little without it (power limits, batch size, compiler).

Sources:

* gpt-fast, README benchmarks section (pytorch-labs/gpt-fast,
  https://github.com/pytorch-labs/gpt-fast#benchmarks): 8 x A100-80GB power-limited to 330 W,
  hybrid cube-mesh topology, batch 1, a 5-token prompt, ``torch.compile``. Its
  "memory bandwidth" column is the bytes of weights read per second per GPU. The README notes
  that, at that power limit, the achieved peak bandwidth is about 1,700 GB/s (the datasheet says
  2,039 GB/s).
* Mixtral-8x7B in gpt-fast (pytorch-labs/gpt-fast issue #225): bf16, TP=2 on A100-80GB,
  batch 1, about 96 tokens/s.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import _check

GPT_FAST_SOURCE = "gpt-fast README, benchmarks (https://github.com/pytorch-labs/gpt-fast#benchmarks)"
GPT_FAST_MIXTRAL_SOURCE = "gpt-fast issue #225 (https://github.com/pytorch-labs/gpt-fast/issues/225)"

#: Achieved peak memory bandwidth of gpt-fast's A100s at their 330 W power limit, as its
#: README states it (bytes/s).
GPT_FAST_A100_PEAK_BANDWIDTH_BPS = 1700e9


@dataclass(frozen=True)
class PublishedDecode:
    """One published decode measurement.

    ``model``: servelib preset name (:func:`servelib.models.get_model`). ``gpu``: the
    accelerator as the source names it; ``gpu_preset``: the servelib preset it corresponds
    to, or None when there is none. ``tp_degree``: devices the model is split over.
    ``weights``: ``"bf16"``, ``"int8"`` (weight-only) or ``"int4-g32"`` (weight-only, one scale
    per group of 32). ``batch``: sequences decoded together. ``tokens_per_s``: tokens per
    second of one sequence (None where the source reports out of memory).
    ``bandwidth_GBps``: the source's achieved bytes of weights per second per GPU, in GB/s
    (None where not published). ``source`` and ``note`` say where it comes from and how.
    """

    model: str
    gpu: str
    gpu_preset: str | None
    tp_degree: int
    weights: str
    batch: int
    tokens_per_s: float | None
    bandwidth_GBps: float | None
    source: str
    note: str = ""

    @property
    def tpot_s(self) -> float | None:
        """Seconds per output token (``1 / tokens_per_s``), None where out of memory."""
        return None if self.tokens_per_s is None else 1.0 / self.tokens_per_s


def _gf(model, tp, weights, tokens_per_s, bandwidth, gpu="A100-80GB (330 W)", preset="a100-80gb",
        note=""):
    return PublishedDecode(model, gpu, preset, tp, weights, 1, tokens_per_s, bandwidth,
                           GPT_FAST_SOURCE, note or "batch 1, 5-token prompt, torch.compile")


#: gpt-fast's batch-1 decode figures (README, benchmarks section), in the README's order.
GPT_FAST = (
    _gf("llama-2-7b", 1, "bf16", 104.9, 1397.31),
    _gf("llama-2-7b", 1, "int8", 155.58, 1069.20),
    _gf("llama-2-7b", 1, "int4-g32", 196.80, 862.69),
    _gf("llama-2-7b", 2, "bf16", 168.84, 1181.99),
    _gf("llama-2-7b", 4, "bf16", 254.02, 955.83),
    _gf("llama-2-7b", 8, "bf16", 328.43, 704.10),
    _gf("llama-2-70b", 1, "bf16", None, None, note="out of memory: 138 GB of bf16 weights, 80 GB card"),
    _gf("llama-2-70b", 2, "bf16", 21.32, 1481.87),
    _gf("llama-2-70b", 4, "bf16", 38.01, 1340.76),
    _gf("llama-2-70b", 8, "bf16", 62.50, 1135.29),
    _gf("llama-2-70b", 8, "int8", 80.44, 752.04),
    _gf("llama-2-70b", 8, "int4-g32", 90.77, 548.10),
    _gf("llama-2-70b", 1, "int8", 19.13, 1322.58),
    _gf("llama-2-70b", 1, "int4-g32", 25.25, 1097.66),
    _gf("llama-2-7b", 1, "bf16", 76.33, 1028.70, gpu="MI250X (one GCD)", preset=None),
)

#: Mixtral-8x7B, bf16, TP=2 on A100-80GB, batch 1 (gpt-fast issue #225): about 96 tokens/s.
GPT_FAST_MIXTRAL = PublishedDecode("mixtral-8x7b", "A100-80GB", "a100-80gb", 2, "bf16", 1, 96.0, None,
                                   GPT_FAST_MIXTRAL_SOURCE, "batch 1; about 96 tokens/s (10.4 ms a token)")

#: Speculative decoding in gpt-fast: Llama-2-70B int4 verified, Llama-2-7B int4 drafting,
#: 8 x A100 (README): 48.4 tokens/s.
GPT_FAST_SPECULATIVE_TOKENS_PER_S = 48.4


def published_decode(model: str | None = None, *, weights: str | None = None,
                     tp_degree: int | None = None) -> list[PublishedDecode]:
    """The published decode records (gpt-fast's table, then its Mixtral figure) that match
    every filter given (``None`` matches anything). Returns a new list, possibly empty (a
    known model never published at that TP degree).

    Raises ValueError, listing the known values, for a ``model`` with no published record or
    a ``weights`` format not in :data:`WEIGHT_BYTES` (a misspelt filter would otherwise
    match nothing, quietly); ValueError/TypeError for a ``tp_degree`` that is not an integer >= 1.
    """
    rows = GPT_FAST + (GPT_FAST_MIXTRAL,)
    if model is not None:
        _check.choice("model", model, sorted({r.model for r in rows}))
    if weights is not None:
        _check.choice("weights", weights, sorted(WEIGHT_BYTES))
    if tp_degree is not None:
        tp_degree = _check.positive_int("tp_degree", tp_degree)
    return [r for r in rows
            if (model is None or r.model == model) and (weights is None or r.weights == weights)
            and (tp_degree is None or r.tp_degree == tp_degree)]


#: Bytes per weight of each of gpt-fast's weight formats, scales and zero points left out
#: (int4 with groups of 32 adds a 16-bit scale and zero per group, 1/8 byte per weight).
WEIGHT_BYTES = {"bf16": 2.0, "int8": 1.0, "int4-g32": 0.5}


def weights_read_per_gpu_bytes(row: PublishedDecode) -> float:
    """Bytes of weights each GPU reads per token in ``row``'s setup, as gpt-fast lays them out.

    gpt-fast shards the transformer layers over ``tp_degree`` GPUs but keeps the (untied)
    embedding table and LM head whole on every GPU: ``((P - E) / tp + E) * bytes``, with
    ``E = 2 * vocab_size * hidden_size`` and bytes per weight from :data:`WEIGHT_BYTES`.
    (servelib's own :func:`servelib.roofline.predict_tpot_s` splits every weight, as vLLM
    does.) Raises KeyError for an unknown weight format.
    """
    from .models import get_model
    m = get_model(row.model)
    embed = 2 * m.vocab_size * m.hidden_size
    return ((m.n_params - embed) / row.tp_degree + embed) * WEIGHT_BYTES[row.weights]


def predicted_tpot_s(row: PublishedDecode, *, bandwidth_Bps: float = GPT_FAST_A100_PEAK_BANDWIDTH_BPS,
                     comm: bool = True, latency_s: float | None = None) -> float:
    """servelib's prediction for ``row``'s setup: seconds per token on gpt-fast's layout.

    The roofline (:func:`servelib.roofline.step_time_s`) of one decode step reading
    :func:`weights_read_per_gpu_bytes` at ``bandwidth_Bps`` (default: the ~1,700 GB/s the
    source says its power-limited A100s reach), plus, when ``comm``, the step's
    tensor-parallel all-reduces (:func:`servelib.roofline.tp_comm_time_s` over the A100's
    NVLink, ``latency_s`` per call if given). Raises ValueError for a row with no servelib
    GPU preset, TypeError unless ``comm`` is a bool.
    """
    _check.boolean("comm", comm)
    from .hardware import get_gpu
    from .models import get_model
    from .roofline import decode_flops_per_step, step_time_s, tp_comm_time_s
    if row.gpu_preset is None:
        raise ValueError(f"row on {row.gpu!r} has no servelib GPU preset to predict with")
    m, gpu = get_model(row.model), get_gpu(row.gpu_preset)
    flops = decode_flops_per_step(m.n_active_params, row.batch) / row.tp_degree
    t = step_time_s(flops, weights_read_per_gpu_bytes(row), gpu.peak_flops("bf16"), bandwidth_Bps)
    if comm:
        t += tp_comm_time_s(m, gpu, row.batch, row.tp_degree, latency_s=latency_s)
    return t


@dataclass(frozen=True)
class TPFit:
    """gpt-fast's tensor-parallel figures for one model fitted to ``tpot = bytes / bandwidth + 2L * allreduce``.

    ``bandwidth_Bps``: the memory bandwidth the fit finds; ``allreduce_s``: the time per
    all-reduce it finds (two per layer per token); ``tp_degrees``: the rows fitted.
    """

    model: str
    bandwidth_Bps: float
    allreduce_s: float
    tp_degrees: tuple


def fit_tp_scaling(model: str, weights: str = "bf16") -> TPFit:
    """Least-squares fit of gpt-fast's published TP >= 2 rows of ``model`` (A100, batch 1).

    Each row's time per token is modelled as its weight bytes per GPU
    (:func:`weights_read_per_gpu_bytes`) over a bandwidth ``B``, plus ``2 * n_layers``
    all-reduces of ``a`` seconds each; the fit returns ``B`` and ``a``. Raises ValueError if
    fewer than two such rows are published.
    """
    import numpy as np

    from .models import get_model
    rows = [r for r in published_decode(model, weights=weights)
            if r.tp_degree >= 2 and r.tokens_per_s is not None and r.gpu_preset == "a100-80gb"]
    if len(rows) < 2:
        raise ValueError(f"fewer than two published TP >= 2 rows for {model!r} ({weights})")
    n_ar = 2 * get_model(model).n_layers
    a = np.array([[weights_read_per_gpu_bytes(r), n_ar] for r in rows], dtype=float)
    (inv_bw, allreduce), *_ = np.linalg.lstsq(a, np.array([r.tpot_s for r in rows]), rcond=None)
    return TPFit(model, float(1.0 / inv_bw), float(allreduce), tuple(r.tp_degree for r in rows))
