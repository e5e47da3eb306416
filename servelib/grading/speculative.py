"""Exercises of the chapter "Speculative decoding" (notebooks/09_speculative.ipynb).

Each reference takes the exercise's inputs as keyword arguments, the book's values as
defaults; ``vary`` and ``text`` declare the per-student variants (see
:mod:`servelib.grading.variants`). The target is Llama-3-70B drafted by Llama-3-8B (one
tokenizer) on eight H100s; statements print the sizes a roofline estimate needs.
"""
from ..hardware import ridge_point
from ..models import get_model
from ..published import GPT_FAST_SPECULATIVE_TOKENS_PER_S, published_decode
from ..roofline import critical_batch
from ..speculative import (crossover_batch, crossover_batch_estimate, expected_tokens_per_step,
                           implied_acceptance_rate, speculative_estimate)
from .registry import exercise

_RATES = (0.6, 0.7, 0.8, 0.9)
#: The two models as a statement describes them for a roofline estimate at batch 1.
_PAIR = ("Llama-3-70B (70.55 billion parameters, 320 KiB of KV cache per token) is drafted by Llama-3-8B "
         "(8.03 billion parameters, 128 KiB per token)")
#: The same, with what attention's FLOPs need.
_PAIR_ATTENTION = ("Llama-3-70B (70.55 billion parameters; 80 layers of 64 attention heads of size 128; 320 KiB of "
                   "KV cache per token) is drafted by Llama-3-8B (8.03 billion parameters; 32 layers of 32 heads "
                   "of size 128; 128 KiB per token)")


def _int4_tokens_per_s(model):
    row, = published_decode(model, weights="int4-g32", tp_degree=1)
    return row.tokens_per_s


@exercise("spec-1", rtol=1e-3, unit="tokens per round",
          vary={"acceptance_rate": _RATES, "draft_len": (2, 3, 4, 5, 6)},
          text="**spec-1.** A draft proposes {draft_len} tokens per round and each is accepted with probability "
               "{acceptance_rate}, independently. How many tokens does a round yield on average?")
def _expected_tokens(acceptance_rate=0.7, draft_len=5):
    return expected_tokens_per_step(acceptance_rate, draft_len)


@exercise("spec-2", rtol=1e-3, unit="x",
          vary={"context_len": (512, 1024, 2048, 4096), "acceptance_rate": _RATES, "draft_len": (2, 3, 4, 5, 6)},
          text="**spec-2.** " + _PAIR + ", both bf16 on eight H100s (TP=8), at {context_len:,}-token contexts, "
               "$\\alpha = {acceptance_rate}$, $k = {draft_len}$. By the roofline, what is the speed-up at batch 1?")
def _batch1_speedup(target="llama-3-70b", draft="llama-3-8b", gpu="h100-sxm", tp_degree=8, context_len=1024,
                    acceptance_rate=0.8, draft_len=4):
    return speculative_estimate(get_model(target), get_model(draft), gpu, batch=1, context_len=context_len,
                                acceptance_rate=acceptance_rate, draft_len=draft_len, tp_degree=tp_degree).speedup


@exercise("spec-3", rtol=0, unit="sequences",
          vary={"context_len": (256, 512, 1024), "acceptance_rate": _RATES, "draft_len": (3, 4, 5, 6)},
          text="**spec-3.** " + _PAIR_ATTENTION + ", both bf16 on eight H100 SXMs (TP=8; 989.5 dense bf16 "
               "TFLOP/s and 3.35 TB/s each), at {context_len:,}-token contexts, $\\alpha = {acceptance_rate}$, "
               "$k = {draft_len}$. By the roofline, attention's FLOPs counted, what is the smallest batch at "
               "which speculation no longer pays?")
def _crossover(target="llama-3-70b", draft="llama-3-8b", gpu="h100-sxm", tp_degree=8, context_len=512,
               acceptance_rate=0.8, draft_len=4):
    return crossover_batch(get_model(target), get_model(draft), gpu, context_len=context_len,
                           acceptance_rate=acceptance_rate, draft_len=draft_len, tp_degree=tp_degree)


@exercise("spec-4", rtol=1e-2, unit="sequences",
          vary={"gpu": ("h100-sxm", "a100-80gb", "h200", "mi300x"), "acceptance_rate": _RATES,
                "draft_len": (2, 3, 4, 5)},
          text="**spec-4.** Estimate where speculation stops paying for Llama-3-70B drafted by Llama-3-8B (70.55 "
               "and 8.03 billion parameters; 320 and 128 KiB of KV cache per token) on {gpu}s "
               "({gpu.bf16_tflops} dense bf16 TFLOP/s, {gpu.tb_per_s} TB/s), $\\alpha = {acceptance_rate}$, "
               "$k = {draft_len}$, with the closed form $B^* (E - k c)/(k + 1)$ for short contexts: $B^*$ is "
               "Llama-3-70B's critical batch on that GPU in bf16 at a 1-token context, and $c$ the draft's "
               "step time over the target's at batch 1 (same context).")
def _crossover_closed_form(target="llama-3-70b", draft="llama-3-8b", gpu="h100-sxm", acceptance_rate=0.8,
                           draft_len=4):
    t, d = get_model(target), get_model(draft)
    b1 = speculative_estimate(t, d, gpu, batch=1, context_len=1, acceptance_rate=acceptance_rate,
                              draft_len=draft_len)
    return crossover_batch_estimate(critical_batch(t, ridge_point(gpu), 1), acceptance_rate, draft_len,
                                    b1.draft_step_s / b1.target_step_s)


def _spec5_text(tokens_per_s, draft_len, **_):
    alone = "25.25 and 196.80 tokens/s for the two models alone"
    if tokens_per_s == GPT_FAST_SPECULATIVE_TOKENS_PER_S and draft_len == 4:
        return (f"**spec-5.** gpt-fast published {tokens_per_s:g} tokens/s for Llama-2-70B (int4) drafted by "
                f"Llama-2-7B (int4) with $k = 4$ on one A100, and {alone}. What acceptance rate do these "
                f"figures imply?")
    return (f"**spec-5.** A benchmark measures {tokens_per_s:g} tokens/s for Llama-2-70B (int4) drafted by "
            f"Llama-2-7B (int4) with $k = {draft_len}$ on one A100, where gpt-fast published {alone}. What "
            f"acceptance rate do these figures imply?")


@exercise("spec-5", rtol=1e-2, unit="",
          vary={"tokens_per_s": (40.0, 44.0, GPT_FAST_SPECULATIVE_TOKENS_PER_S, 52.0, 56.0), "draft_len": (3, 4, 5)},
          text=_spec5_text)
def _implied_acceptance(target="llama-2-70b", draft="llama-2-7b", draft_len=4,
                        tokens_per_s=GPT_FAST_SPECULATIVE_TOKENS_PER_S):
    alone, drafter = _int4_tokens_per_s(target), _int4_tokens_per_s(draft)
    return implied_acceptance_rate(tokens_per_s / alone, draft_len, alone / drafter)


@exercise("spec-6", rtol=0, unit="tokens",
          vary={"context_len": (512, 2048, 8192), "acceptance_rate": (0.6, 0.7, 0.75, 0.8, 0.85)},
          text="**spec-6.** " + _PAIR + ", both bf16 on eight H100s (TP=8), at {context_len:,}-token contexts "
               "and $\\alpha = {acceptance_rate}$. Which draft length $k$ from 1 to 10 gives the largest "
               "speed-up at batch 1?")
def _best_draft_len(target="llama-3-70b", draft="llama-3-8b", gpu="h100-sxm", tp_degree=8, context_len=512,
                    acceptance_rate=0.8, max_draft_len=10):
    t, d = get_model(target), get_model(draft)
    return max(range(1, max_draft_len + 1), key=lambda k: speculative_estimate(
        t, d, gpu, batch=1, context_len=context_len, acceptance_rate=acceptance_rate, draft_len=k,
        tp_degree=tp_degree).speedup)
