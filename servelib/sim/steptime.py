"""Step times for the simulator from the roofline model of a model on a GPU, and the
cost of swapping KV to host memory over the GPU's host link."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _check
from ..hardware import as_gpu
from ..interconnect import get_host_link
from ..memory import _kv_bytes_at, kv_bytes_per_token, weight_bytes
from ..roofline import decode_bytes_per_step, decode_weight_bytes, prefill_flops, serial_step_time_s, step_time_s


def swap_s_per_token(model, gpu=None, *, link_Bps: float | None = None, bytes_per_elem: float = 2,
                     tp_degree: int = 1) -> float:
    """Seconds to copy one token's KV cache across the host link, one way.

    ``kv_bytes_per_token(model) / link_Bps``: a sequence swapped out and back in pays it twice
    per token (the simulator counts both copies). ``link_Bps``: the link's bandwidth in bytes/s,
    one direction; by default that of ``gpu``'s host link (a preset name or GPUSpec;
    :func:`servelib.interconnect.get_host_link`, the datasheet's PCIe figure). Under tensor
    parallelism each device copies its own heads over its own link. Raises ValueError for a
    non-positive bandwidth or when neither ``gpu`` nor ``link_Bps`` is given, KeyError for a
    GPU without a host-link entry (pass ``link_Bps``).
    """
    if link_Bps is None:
        if gpu is None:
            raise ValueError("swap_s_per_token needs gpu (whose host link is used) or link_Bps (bytes/s)")
        link_Bps = get_host_link(gpu).bandwidth_Bps
    link = _check.positive("link_Bps", link_Bps)
    tp = _check.positive_int("tp_degree", tp_degree)
    return kv_bytes_per_token(model, bytes_per_elem, tp_degree=tp) / link


def roofline_step_time(model, gpu, *, dtype: str = "bf16", bytes_per_param: float = 2,
                       bytes_per_elem: float = 2, tp_degree: int = 1, link_Bps: float | None = None,
                       overlap: bool = True):
    """Return ``f(batch, tokens, kv_tokens) -> seconds``, the roofline time of one step.

    A step processing ``tokens`` tokens (decode tokens plus prefill tokens) for ``batch``
    sequences does ``2 * n_active_params * tokens`` FLOPs (:func:`servelib.roofline.prefill_flops`) and reads the weights once plus
    the ``kv_tokens`` tokens of KV in the cache
    (:func:`servelib.roofline.decode_bytes_per_step`); it takes the larger of compute time
    and memory time (:func:`servelib.roofline.step_time_s`). Under tensor parallelism each
    of ``tp_degree`` devices does its share; communication is ignored, so this is a lower
    bound. ``overlap=False`` takes their sum instead
    (:func:`servelib.roofline.serial_step_time_s`), the bound of a GPU that overlaps none
    of its arithmetic with its memory traffic. ``gpu`` is a GPUSpec or a preset name.

    For a mixture of experts the weights read are those the step's tokens route to
    (:func:`servelib.roofline.decode_weight_bytes`); for a model whose layers do not all
    cache alike the KV read is layer by layer, at the batch's mean context
    (:func:`servelib.memory.kv_bytes_per_sequence`).

    The callable's attribute ``swap_s_per_token`` is :func:`swap_s_per_token` for the same model
    over ``link_Bps`` (bytes/s one way; default: the GPU's host link,
    :func:`servelib.interconnect.get_host_link`): :func:`servelib.sim.simulate` charges it for
    swap preemption unless told otherwise. For a GPU without a host-link entry and no
    ``link_Bps`` it is None, and swap preemption then needs ``swap_s_per_token`` given to
    ``simulate``. Raises like the functions it calls.
    """
    gpu = as_gpu(gpu)
    tp = _check.positive_int("tp_degree", tp_degree)
    w = weight_bytes(model, bytes_per_param) / tp
    kv_tok = kv_bytes_per_token(model, bytes_per_elem, tp_degree=tp)
    params = model.n_active_params / tp
    peak, bw = gpu.peak_flops(dtype), gpu.hbm_bandwidth_Bps
    if not isinstance(overlap, bool):
        raise TypeError(f"overlap must be True or False, got {type(overlap).__name__} {overlap!r}")
    bound = step_time_s if overlap else serial_step_time_s

    def step_time(batch: int, tokens: int, kv_tokens: int) -> float:
        b = _check.positive_int("batch", batch)
        kv = _check.non_negative("kv_tokens", kv_tokens)
        kv_per_seq = (kv * kv_tok / b if not model.layers
                      else _kv_bytes_at(model, kv / b, bytes_per_elem, tp))
        w_step = decode_weight_bytes(model, tokens, bytes_per_param) / tp if model.is_moe else w
        return bound(prefill_flops(params, tokens), decode_bytes_per_step(w_step, kv_per_seq, b), peak, bw)

    known = link_Bps is not None or _has_host_link(gpu)
    step_time.swap_s_per_token = (swap_s_per_token(model, gpu, link_Bps=link_Bps, bytes_per_elem=bytes_per_elem,
                                                   tp_degree=tp) if known else None)
    return step_time


def _has_host_link(gpu) -> bool:
    try:
        get_host_link(gpu)
    except KeyError:
        return False
    return True


#: What a fitted step costs, term by term: the names of :class:`StepTimeModel`'s coefficients
#: and the quantity of a :class:`~servelib.sim.scheduler.Step` each one multiplies.
STEP_TERMS = {
    "fixed_s": "every step: launching the layers' operations, reading the weights, scheduling",
    "per_token_s": "each token through the matrix products (decode, padding and prefill rows)",
    "per_logit_row_s": "each row whose next-token logits are computed (LM head, sampling)",
    "per_key_s": "each key a decode row reads: rows x the longest context (attention pads to it)",
    "per_chunk_s": "each prefill chunk (its own attention call)",
    "per_prefill_pair_s": "each query-key pair prefill attention computes: n^2 / 2 for a first chunk of n "
                          "(causal kernel), n x (start + n) for a later one (masked)",
}


def step_features(step) -> tuple:
    """The quantities of a planned :class:`~servelib.sim.scheduler.Step` that
    :class:`StepTimeModel` charges, in the order of :data:`STEP_TERMS`."""
    return (1.0, step.tokens, step.decode + step.completing, (step.decode + step.padded) * step.max_context,
            len(step.chunks), sum(c * c / 2 if start == 0 else c * (start + c) for _, start, c in step.chunks))


@dataclass(frozen=True)
class StepTimeModel:
    """A step's duration as a sum of physical costs, fitted to a real engine (s).

    Each field is the cost of one unit of a term of :data:`STEP_TERMS` (s, >= 0): a fixed cost
    per step, a cost per token through the matrix products, per logits row, per key read by
    decode attention, per prefill chunk and per query-key pair of prefill attention.
    ``of_step(step)`` gives a step's seconds; :func:`servelib.sim.simulate` accepts the model
    as ``step_time_s``. ``source``: where the coefficients come from. Build one with
    :func:`fit_step_time`. Raises ValueError for a negative or non-finite coefficient.
    """

    fixed_s: float
    per_token_s: float
    per_logit_row_s: float
    per_key_s: float
    per_chunk_s: float
    per_prefill_pair_s: float
    source: str = ""

    def __post_init__(self):
        for name in STEP_TERMS:
            _check.non_negative(name, getattr(self, name))
        if not self.fixed_s > 0:
            raise ValueError(f"fixed_s must be > 0 (every step costs something), got {self.fixed_s!r}")

    @property
    def coefficients(self) -> tuple:
        """The model's coefficients in the order of :data:`STEP_TERMS`."""
        return tuple(getattr(self, name) for name in STEP_TERMS)

    def of_step(self, step) -> float:
        """Seconds for ``step`` (a :class:`~servelib.sim.scheduler.Step`)."""
        return float(sum(c * f for c, f in zip(self.coefficients, step_features(step))))

    def of_shape(self, *, decode: int = 0, max_context: int = 0, chunks=()) -> float:
        """Seconds for a step of ``decode`` decoding sequences (the longest holding ``max_context``
        tokens) and prefill ``chunks``, each ``(first position, tokens)`` and each finishing its
        prompt. Raises ValueError for negative sizes or an empty step."""
        from .scheduler import Step
        d = _check.non_negative_int("decode", decode)
        ctx = _check.non_negative_int("max_context", max_context)
        ch = tuple((k, _check.non_negative_int("chunk start", s), _check.positive_int("chunk tokens", n))
                   for k, (s, n) in enumerate(chunks))
        if not d and not ch:
            raise ValueError("a step needs decode >= 1 or at least one chunk")
        tokens = d + sum(n for _, _, n in ch)
        return self.of_step(Step(1, d + len(ch), d, 0, tokens, 0, ch, len(ch), 0, d * ctx, ctx))

    def breakdown(self, step) -> dict:
        """Seconds per term of :data:`STEP_TERMS` for ``step``."""
        return {name: c * f for name, c, f in zip(STEP_TERMS, self.coefficients, step_features(step))}


def _nnls(x, y):
    """Least squares with every coefficient >= 0 and the first (the fixed cost) in the model:
    every subset of terms is solved and the best feasible one kept (six terms: 32 small solves)."""
    k = x.shape[1]
    best, best_err = None, math.inf
    for mask in range(1, 2 ** k, 2):
        cols = [j for j in range(k) if mask >> j & 1]
        sol, *_ = np.linalg.lstsq(x[:, cols], y, rcond=None)
        if np.any(sol < 0):
            continue
        err = float(np.sum((x[:, cols] @ sol - y) ** 2))
        if err < best_err:
            best_err, best = err, dict(zip(cols, sol))
    return np.array([best.get(j, 0.0) for j in range(k)])


def fit_step_time(steps, seconds, *, source: str = "", iterations: int = 5) -> StepTimeModel:
    """Fit a :class:`StepTimeModel` to measured steps: ``steps`` (Step objects) and their
    ``seconds`` (same length).

    Every coefficient is kept >= 0 (the exact non-negative least-squares solution, found by
    solving each subset of terms). The errors are taken relative to the *fitted* time,
    by reweighting ``iterations`` times (a step's weight is 1 / its fitted time): short decode
    steps count as much as long prefills, and, unlike weighting by the measured time, a step
    that other work on the machine delayed is not discounted, so the model keeps the *mean*
    step time that a run's total is made of. Raises ValueError if the lengths differ, if
    fewer steps than terms are given, or if a time is not positive.
    """
    x = np.array([step_features(s) for s in steps], dtype=float)
    y = np.asarray(seconds, dtype=float)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"steps ({x.shape[0]}) and seconds ({y.shape[0]}) must have the same length")
    k = len(STEP_TERMS)
    if y.shape[0] < k:
        raise ValueError(f"need at least {k} measured steps to fit {k} terms, got {y.shape[0]}")
    if not np.all(np.isfinite(y) & (y > 0)):
        raise ValueError("seconds must all be positive and finite")
    coef = _nnls(x, y)
    for _ in range(_check.non_negative_int("iterations", iterations)):
        w = 1 / np.maximum(x @ coef, 1e-3 * np.median(y))
        coef = _nnls(x * w[:, None], y * w)
    return StepTimeModel(*(float(c) for c in coef), source=source)
