"""Speculative decoding: the tokens a round yields, what a round costs, where it stops paying."""
import math

import pytest

from servelib.hardware import ridge_point
from servelib.memory import capacity
from servelib.models import get_model
from servelib.published import GPT_FAST_SPECULATIVE_TOKENS_PER_S, published_decode
from servelib.roofline import critical_batch, predict_tpot_s
from servelib.speculative import (crossover_batch, crossover_batch_estimate, expected_tokens_per_step,
                                  implied_acceptance_rate, pass_time_s, simulate_tokens_per_step,
                                  speculative_concurrency, speculative_estimate)

T, D = get_model("llama-3-70b"), get_model("llama-3-8b")
KW = dict(context_len=512, acceptance_rate=0.8, draft_len=4, tp_degree=8)


def test_expected_tokens_exact_values():
    assert expected_tokens_per_step(0.8, 4) == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096)
    assert expected_tokens_per_step(0.5, 2) == 1.75
    assert expected_tokens_per_step(1, 4) == 5 and expected_tokens_per_step(0, 4) == 1
    assert expected_tokens_per_step(0.9, 0) == 1
    assert expected_tokens_per_step(1 - 1e-12, 3) == pytest.approx(4)


def test_expected_tokens_grow_with_rate_and_length_within_bounds():
    for k in (1, 2, 4, 8):
        vals = [expected_tokens_per_step(a / 10, k) for a in range(11)]
        assert vals == sorted(vals) and vals[0] == 1 and vals[-1] == k + 1
    for a in (0.3, 0.7):
        vals = [expected_tokens_per_step(a, k) for k in range(10)]
        assert vals == sorted(vals) and vals[-1] < 1 / (1 - a)


@pytest.mark.parametrize("a, k", [(0.5, 4), (0.8, 4), (0.9, 8), (0.7, 1)])
def test_simulation_agrees_with_the_formula(a, k):
    assert simulate_tokens_per_step(a, k, 40_000, seed=1) == pytest.approx(expected_tokens_per_step(a, k), rel=0.02)


def test_pass_time_of_one_token_is_the_tpot():
    for b, ctx, tp in ((1, 512, 1), (64, 4096, 2), (300, 128, 8), (2048, 32_768, 8)):
        assert pass_time_s(T, "h100-sxm", batch=b, new_tokens=1, context_len=ctx, tp_degree=tp) == \
            predict_tpot_s(T, "h100-sxm", b, ctx, tp_degree=tp)


def test_a_verification_pass_counts_attention_for_every_new_token():
    # By hand: Llama-3-70B, 80 layers of 64 heads of 128; 5 new tokens per sequence, each
    # scoring and summing 4,096 cached keys: 4 * 80 * 64 * 128 * 4,096 FLOPs, beside 2P.
    b, n, ctx, tp = 1024, 5, 4096, 8
    flops = n * b * (2 * T.n_params + 4 * 80 * 64 * 128 * ctx) / tp
    moved = (2 * T.n_params + b * 2 * 80 * 8 * 128 * 2 * ctx) / tp
    by_hand = max(flops / 989.5e12, moved / 3.35e12)
    assert flops / 989.5e12 > moved / 3.35e12                       # compute-bound: attention shows
    assert pass_time_s(T, "h100-sxm", batch=b, new_tokens=n, context_len=ctx, tp_degree=tp) == \
        pytest.approx(by_hand, rel=1e-12)


def test_batch1_speedup_is_e_over_one_plus_kc():
    e = speculative_estimate(T, D, "h100-sxm", batch=1, **KW)
    c = e.draft_step_s / e.target_step_s
    assert e.verify_step_s == pytest.approx(e.target_step_s, rel=1e-3)        # memory-bound: free arithmetic
    assert e.speedup == pytest.approx(expected_tokens_per_step(0.8, 4) / (1 + 4 * c), rel=1e-3)
    assert e.round_s == pytest.approx(4 * e.draft_step_s + e.verify_step_s)
    assert e.pays and e.tokens_per_s == pytest.approx(e.speedup * e.baseline_tokens_per_s)


def test_speedup_falls_past_the_verify_ridge_and_crosses_one():
    bstar = critical_batch(T, ridge_point("h100-sxm"), 512)
    ups = [speculative_estimate(T, D, "h100-sxm", batch=b, **KW).speedup for b in (8, 64, 128, 256, 512)]
    assert ups == sorted(ups, reverse=True)
    x = crossover_batch(T, D, "h100-sxm", **KW)
    assert speculative_estimate(T, D, "h100-sxm", batch=x - 1, **KW).pays
    assert not speculative_estimate(T, D, "h100-sxm", batch=x, **KW).pays
    assert bstar / 5 < x < bstar


def test_closed_form_matches_the_scan_at_short_context():
    one = speculative_estimate(T, D, "h100-sxm", batch=1, **{**KW, "context_len": 1})
    est = crossover_batch_estimate(critical_batch(T, ridge_point("h100-sxm"), 1), 0.8, 4,
                                   one.draft_step_s / one.target_step_s)
    scan = crossover_batch(T, D, "h100-sxm", **{**KW, "context_len": 1})
    assert abs(est - scan) <= 1 and scan == 172
    assert crossover_batch_estimate(300, 0.3, 4, 0.2) == 0.0          # E - kc <= 1: never pays
    assert crossover_batch_estimate(300, 1.0, 4, 0.0) == 300


def test_long_contexts_keep_it_paying_and_a_poor_draft_never_pays():
    assert crossover_batch(T, D, "h100-sxm", **{**KW, "context_len": 8192}, max_batch=512) is None
    assert crossover_batch(T, T, "h100-sxm", **KW) == 1       # a draft as large as the target


def test_implied_acceptance_round_trip_and_gpt_fast():
    for a in (0.3, 0.6, 0.9):
        c, k = 0.1, 4
        s = expected_tokens_per_step(a, k) / (1 + k * c)
        assert implied_acceptance_rate(s, k, c) == pytest.approx(a, abs=1e-9)
    alone = published_decode("llama-2-70b", weights="int4-g32", tp_degree=1)[0].tokens_per_s
    drafter = published_decode("llama-2-7b", weights="int4-g32", tp_degree=1)[0].tokens_per_s
    a = implied_acceptance_rate(GPT_FAST_SPECULATIVE_TOKENS_PER_S / alone, 4, alone / drafter)
    assert round(a, 2) == 0.72


def test_concurrency_with_a_draft_in_memory():
    alone = capacity(T, "h100-sxm", n_gpus=8, context_len=8192).concurrency
    both = speculative_concurrency(T, D, "h100-sxm", context_len=8192, tp_degree=8)
    assert both < alone == 183
    # By hand: per device, (80 GiB - (70.55e9 + 8.03e9) x 2 / 8) x 0.9 over (320 + 128) KiB x 8192 / 8.
    budget = (80 * 2**30 - (T.n_params + D.n_params) * 2 / 8) * 0.9
    assert both == math.floor(budget / ((320 + 128) * 1024 * 8192 / 8))


@pytest.mark.parametrize("call, err, match", [
    (lambda: expected_tokens_per_step(1.2, 4), ValueError, "acceptance_rate"),
    (lambda: expected_tokens_per_step(-0.1, 4), ValueError, "acceptance_rate"),
    (lambda: expected_tokens_per_step(float("nan"), 4), ValueError, "acceptance_rate"),
    (lambda: expected_tokens_per_step("0.8", 4), TypeError, "acceptance_rate"),
    (lambda: expected_tokens_per_step(0.8, -1), ValueError, "draft_len"),
    (lambda: expected_tokens_per_step(0.8, 2.5), TypeError, "draft_len"),
    (lambda: simulate_tokens_per_step(0.8, 4, 0), ValueError, "n_steps"),
    (lambda: speculative_estimate(T, "llama-3-8b", "h100-sxm", batch=1, **KW), TypeError, "draft"),
    (lambda: speculative_estimate(T, D, "h100-sxm", batch=0, **KW), ValueError, "batch"),
    (lambda: crossover_batch(T, D, "h100-sxm", max_batch=0, **KW), ValueError, "max_batch"),
    (lambda: crossover_batch_estimate(0, 0.8, 4, 0.1), ValueError, "critical_batch"),
    (lambda: implied_acceptance_rate(9.0, 4, 0.1), ValueError, "outside"),
    (lambda: implied_acceptance_rate(1.5, 0, 0.1), ValueError, "draft_len"),
])
def test_bad_input(call, err, match):
    with pytest.raises(err, match=match):
        call()
