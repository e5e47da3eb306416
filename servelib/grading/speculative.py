"""Exercises of the chapter "Speculative decoding" (notebooks/09_speculative.ipynb).

Each reference takes the exercise's inputs as keyword arguments, the book's values as
defaults, so that variants of an exercise can draw other models, rates and lengths.
"""
from ..hardware import ridge_point
from ..models import get_model
from ..published import GPT_FAST_SPECULATIVE_TOKENS_PER_S, published_decode
from ..roofline import critical_batch
from ..speculative import (crossover_batch, crossover_batch_estimate, expected_tokens_per_step,
                           implied_acceptance_rate, speculative_estimate)
from .registry import exercise


def _int4_tokens_per_s(model):
    row, = published_decode(model, weights="int4-g32", tp_degree=1)
    return row.tokens_per_s


@exercise("spec-1", rtol=1e-6, unit="tokens per round")
def _expected_tokens(acceptance_rate=0.7, draft_len=5):
    return expected_tokens_per_step(acceptance_rate, draft_len)


@exercise("spec-2", rtol=1e-3, unit="x")
def _batch1_speedup(target="llama-3-70b", draft="llama-3-8b", gpu="h100-sxm", tp_degree=8, context_len=1024,
                    acceptance_rate=0.8, draft_len=4):
    return speculative_estimate(get_model(target), get_model(draft), gpu, batch=1, context_len=context_len,
                                acceptance_rate=acceptance_rate, draft_len=draft_len, tp_degree=tp_degree).speedup


@exercise("spec-3", rtol=0, unit="sequences")
def _crossover(target="llama-3-70b", draft="llama-3-8b", gpu="h100-sxm", tp_degree=8, context_len=512,
               acceptance_rate=0.8, draft_len=4):
    return crossover_batch(get_model(target), get_model(draft), gpu, context_len=context_len,
                           acceptance_rate=acceptance_rate, draft_len=draft_len, tp_degree=tp_degree)


@exercise("spec-4", rtol=1e-2, unit="sequences")
def _crossover_closed_form(target="llama-3-70b", draft="llama-3-8b", gpu="h100-sxm", acceptance_rate=0.8,
                           draft_len=4):
    t, d = get_model(target), get_model(draft)
    b1 = speculative_estimate(t, d, gpu, batch=1, context_len=1, acceptance_rate=acceptance_rate,
                              draft_len=draft_len)
    return crossover_batch_estimate(critical_batch(t, ridge_point(gpu), 1), acceptance_rate, draft_len,
                                    b1.draft_step_s / b1.target_step_s)


@exercise("spec-5", rtol=1e-2, unit="")
def _implied_acceptance(target="llama-2-70b", draft="llama-2-7b", draft_len=4,
                        tokens_per_s=GPT_FAST_SPECULATIVE_TOKENS_PER_S):
    alone, drafter = _int4_tokens_per_s(target), _int4_tokens_per_s(draft)
    return implied_acceptance_rate(tokens_per_s / alone, draft_len, alone / drafter)


@exercise("spec-6", rtol=0, unit="tokens")
def _best_draft_len(target="llama-3-70b", draft="llama-3-8b", gpu="h100-sxm", tp_degree=8, context_len=512,
                    acceptance_rate=0.8, max_draft_len=10):
    t, d = get_model(target), get_model(draft)
    return max(range(1, max_draft_len + 1), key=lambda k: speculative_estimate(
        t, d, gpu, batch=1, context_len=context_len, acceptance_rate=acceptance_rate, draft_len=k,
        tp_degree=tp_degree).speedup)
