"""FLOPs, bytes and time of the two phases of inference.

Conventions: a matrix-vector or matrix-matrix product with P weights costs 2P FLOPs per
token (one multiply, one add); the attention term (scores and weighted sum over the
context) is separate and small until contexts are long.
"""
from __future__ import annotations

from . import _check


def prefill_flops(n_params: float, n_tokens: int) -> float:
    """FLOPs to process a prompt of ``n_tokens`` through ``n_params`` weights: ``2 * P * N``.

    The attention term is left out (see the roofline chapter). Raises ValueError for
    non-positive inputs.
    """
    return 2 * _check.positive("n_params", n_params) * _check.positive_int("n_tokens", n_tokens)


def decode_flops_per_step(n_params: float, batch: int = 1) -> float:
    """FLOPs of one decode step for ``batch`` sequences: ``2 * P * B`` (attention left out)."""
    return 2 * _check.positive("n_params", n_params) * _check.positive_int("batch", batch)


def generation_flops(n_params: float, prompt_len: int, n_new_tokens: int, *, kv_cache: bool = True) -> float:
    """FLOPs (weights only) to read a prompt and generate ``n_new_tokens`` tokens.

    The prefill pass over the prompt yields the first new token; each later token is one
    more forward pass. With a KV cache a pass handles only the newest token:
    ``2P(prompt + n - 1)``, linear in ``n``. Without one, pass t re-runs all
    ``prompt + t - 1`` tokens so far: ``2P(n * prompt + n(n - 1)/2)``, quadratic in ``n``.
    """
    p = _check.positive("n_params", n_params)
    s = _check.positive_int("prompt_len", prompt_len)
    n = _check.positive_int("n_new_tokens", n_new_tokens)
    if kv_cache:
        return 2 * p * (s + n - 1)
    return 2 * p * (n * s + n * (n - 1) / 2)
