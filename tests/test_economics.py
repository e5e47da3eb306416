"""servelib.economics: the syllabus numbers exactly, hand-computed cases, properties, bad input."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servelib.economics import (AZURE_PTU, GPT_4O, MINUTES_PER_MONTH, blended_price, break_even_tokens,
                                break_even_utilization, cheapest_floor, crossover_tokens_per_month,
                                demand_trace, floor_at_percentile, payg_cost_usd, ptu_break_even_utilization,
                                ptu_capacity_tokens_per_month, ptu_monthly_cost_usd, ptu_tokens_per_minute,
                                ptu_usd_per_tpm_month, ptus_needed, replica_throughput, self_hosted_tco,
                                self_hosted_unit_cost, spillover_cost)
from servelib.memory import capacity
from servelib.models import get_model
from servelib.roofline import decode_tokens_per_s

C_IN, C_OUT = GPT_4O.usd_per_1k_input, GPT_4O.usd_per_1k_output


# --- blended price and break-even -------------------------------------------------------

def test_gpt4o_blended_prices_per_million():
    assert blended_price(C_IN, C_OUT, 0.1) * 1000 == pytest.approx(3.25, abs=1e-12)
    assert blended_price(C_IN, C_OUT, 0.5) * 1000 == pytest.approx(6.25, abs=1e-12)
    assert GPT_4O.output_to_input_ratio == 4


def test_break_even_tokens_hand_computed():
    # $13,000 at $6.25 per 1M: 2.08 B tokens.
    assert break_even_tokens(13_000, 0.00625) == pytest.approx(2.08e9)
    assert payg_cost_usd(2.08e9, 0.00625) == pytest.approx(13_000)


def test_break_even_moves_from_40_to_77_percent():
    # The chapter's documented scenario: $13,140 a month for 120,000 tokens/min of capacity.
    commitment, cap = 13_140, 120_000 * MINUTES_PER_MONTH
    at50 = break_even_utilization(commitment, cap, C_IN, C_OUT, 0.5)
    at10 = break_even_utilization(commitment, cap, C_IN, C_OUT, 0.1)
    assert at50 == pytest.approx(0.40)
    assert at10 == pytest.approx(0.40 * 6.25 / 3.25)
    assert (round(at50 * 100), round(at10 * 100)) == (40, 77)


def test_peak_sized_war_story_57_percent():
    commitment, cap = 13_140, 120_000 * MINUTES_PER_MONTH
    assert round(break_even_utilization(commitment, cap, C_IN, C_OUT, 0.25), 2) == 0.57


@given(c_in=st.floats(1e-6, 1.0), ratio=st.floats(1.01, 20), f1=st.floats(0, 1), f2=st.floats(0, 1))
def test_break_even_falls_as_output_fraction_rises(c_in, ratio, f1, f2):
    lo, hi = sorted((f1, f2))
    if hi - lo < 1e-6:
        return
    u_lo = break_even_utilization(1000, 1e9, c_in, c_in * ratio, lo)
    u_hi = break_even_utilization(1000, 1e9, c_in, c_in * ratio, hi)
    assert u_hi < u_lo


# --- PTU --------------------------------------------------------------------------------

def test_ptu_tokens_per_minute_depends_on_mix():
    assert ptu_tokens_per_minute(1, 0.0) == 2500
    assert ptu_tokens_per_minute(1, 0.5) == pytest.approx(1000)
    assert ptu_tokens_per_minute(1, 0.1) == pytest.approx(2500 / 1.3)
    assert ptu_capacity_tokens_per_month(50, 0.5) == pytest.approx(50 * 1000 * 43_800)


def test_ptu_terms():
    assert ptu_monthly_cost_usd(1, "hourly") == 2 * 730
    assert ptu_monthly_cost_usd(50, "monthly") == 13_000
    assert ptu_monthly_cost_usd(10, "yearly") == 2_210
    assert AZURE_PTU.usd_per_month_yearly < AZURE_PTU.usd_per_month < AZURE_PTU.usd_per_hour * 730


def test_ptus_needed_rounds_to_the_deployment_step():
    assert ptus_needed(0, 0.2) == 15                       # the global minimum
    assert ptus_needed(50_000, 0.5) == 50                  # exactly 50 PTUs of 1,000 tokens/min
    assert ptus_needed(50_001, 0.5) == 55
    assert ptus_needed(50_001, 0.5, min_ptus=50, step=50) == 100


def test_ptu_break_even_is_mix_free_when_weight_equals_price_ratio():
    monthly = 260 / (2500 * 43_800 * C_IN / 1000)
    for f in (0.0, 0.1, 0.5, 1.0):
        assert ptu_break_even_utilization(f, "monthly") == pytest.approx(monthly)
    assert ptu_break_even_utilization(0.3, "yearly") == pytest.approx(221 / 260 * monthly)
    assert ptu_break_even_utilization(0.3, "hourly") > 1          # hourly PTUs never beat PAYG
    # With a weight below the price ratio the mix matters again.
    assert (ptu_break_even_utilization(0.1, output_weight=2)
            > ptu_break_even_utilization(0.5, output_weight=2))
    assert ptu_usd_per_tpm_month(0.5) == pytest.approx(260 / 1000)


# --- spillover --------------------------------------------------------------------------

def test_demand_trace_is_seeded_and_shaped():
    a, b = demand_trace(seed=3), demand_trace(seed=3)
    assert np.array_equal(a, b) and not np.array_equal(a, demand_trace(seed=4))
    assert a.shape == (30 * 1440,) and a.mean() == pytest.approx(60_000)
    assert a.min() >= 0 and a.max() > 2 * np.percentile(a, 50)          # bursts above the cycle


def test_spillover_hand_computed():
    d = [10, 30]                                   # two minutes, scaled to a month
    r = spillover_cost(d, 20, floor_usd_per_tpm_month=1.0, blended_usd_per_1k=2.0, spill=True)
    scale = MINUTES_PER_MONTH / 2
    assert r.floor_usd == 20 and r.spilled_tokens == pytest.approx(10 * scale)
    assert r.payg_usd == pytest.approx(10 * scale / 1000 * 2)
    assert r.unserved_tokens == 0 and r.availability == 1
    refused = spillover_cost(d, 20, 1.0, 2.0, spill=False)
    assert refused.payg_usd == 0 and refused.availability == pytest.approx(30 / 40)
    assert refused.floor_utilization == pytest.approx(30 / 40)


def test_cheapest_floor_is_the_one_minus_break_even_quantile():
    d = demand_trace(seed=7)
    blended = blended_price(C_IN, C_OUT, 0.25)
    unit = 0.0025 * MINUTES_PER_MONTH / 1000             # $2.50 per 1M tokens of capacity
    best = cheapest_floor(d, unit, blended)
    u_star = break_even_utilization(unit, MINUTES_PER_MONTH, C_IN, C_OUT, 0.25)
    assert best.floor_tpm == pytest.approx(np.quantile(d, 1 - u_star), rel=0.01)
    for p in (0, 30, 50, 70, 100):
        assert best.total_usd <= spillover_cost(d, floor_at_percentile(d, p), unit, blended).total_usd


trace_args = dict(seed=st.integers(0, 10_000), mean=st.floats(1e3, 1e6))


@settings(max_examples=25, deadline=None)
@given(**trace_args, floor=st.floats(0, 1e7))
def test_with_spill_nothing_is_ever_unserved(seed, mean, floor):
    d = demand_trace(days=2, mean_tpm=mean, seed=seed)
    r = spillover_cost(d, floor, 0.1, 0.004, spill=True)
    assert r.unserved_tokens == 0 and r.availability == 1
    assert r.floor_tokens + r.spilled_tokens == pytest.approx(r.demand_tokens)


@settings(max_examples=25, deadline=None)
@given(**trace_args, f1=st.floats(0, 1e7), f2=st.floats(0, 1e7))
def test_without_spill_unserved_never_rises_with_the_floor(seed, mean, f1, f2):
    d = demand_trace(days=2, mean_tpm=mean, seed=seed)
    lo, hi = sorted((f1, f2))
    assert (spillover_cost(d, hi, 0.1, 0.004, spill=False).unserved_tokens
            <= spillover_cost(d, lo, 0.1, 0.004, spill=False).unserved_tokens)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), u_star=st.floats(0.05, 0.95))
def test_on_a_bursty_trace_the_cheapest_floor_is_strictly_inside(seed, u_star):
    d = demand_trace(days=7, seed=seed)
    blended = 0.004
    unit = u_star * MINUTES_PER_MONTH * blended / 1000       # dedicated capacity at break-even u*
    best = cheapest_floor(d, unit, blended)
    assert 0 < best.floor_tpm < d.max()
    assert best.total_usd < spillover_cost(d, 0, unit, blended).total_usd
    assert best.total_usd < spillover_cost(d, d.max(), unit, blended).total_usd


# --- self-hosting -----------------------------------------------------------------------

def test_self_hosted_unit_cost():
    assert self_hosted_unit_cost(44_600, 6e9) == pytest.approx(44_600 / 6e6)


def test_replica_throughput_from_the_serving_model():
    m = get_model("llama-3-70b")
    r = replica_throughput(m, "h100-sxm", batch=64, context_len=4096, output_fraction=0.25, tp_degree=4)
    assert r.batch == 64
    assert r.decode_tokens_per_s == decode_tokens_per_s(m, "h100-sxm", 64, 4096, tp_degree=4)
    expect = 1 / (0.25 / r.decode_tokens_per_s + 0.75 / r.prefill_tokens_per_s)
    assert r.tokens_per_s == pytest.approx(expect) and r.tokens_per_gpu_s == pytest.approx(expect / 4)
    # The batch is capped at what the KV cache allows.
    big = replica_throughput(m, "h100-sxm", batch=10_000, context_len=4096, output_fraction=1, tp_degree=4)
    conc = capacity(m, "h100-sxm", n_gpus=4, context_len=4096, tp_degree=4).concurrency
    assert big.batch == big.max_batch == conc
    assert big.tokens_per_s == pytest.approx(decode_tokens_per_s(m, "h100-sxm", conc, 4096, tp_degree=4))
    with pytest.raises(ValueError, match="tp_degree"):
        replica_throughput(m, "h100-sxm", batch=1, context_len=4096, output_fraction=0.5, tp_degree=1)


def _story_throughput():
    return replica_throughput(get_model("llama-3-70b"), "h100-sxm", batch=64, context_len=4096,
                              output_fraction=0.25, tp_degree=4).tokens_per_gpu_s


DEPLOY = dict(gpus_per_replica=4, min_replicas=2, usd_per_engineer_year=180_000)


def test_tco_itemised_and_the_three_times_story():
    t = self_hosted_tco(6e9, _story_throughput(), 2.50, n_engineers=2, **DEPLOY)
    assert (t.n_replicas, t.n_gpus) == (2, 8)
    assert t.gpu_usd == 8 * 730 * 2.50 and t.engineering_usd == 30_000
    assert t.idle_usd == pytest.approx(t.gpu_usd * (1 - t.utilization))
    assert t.unit_cost_usd_per_1k / t.gpu_only_usd_per_1k == pytest.approx(44_600 / 14_600)
    assert round(t.unit_cost_usd_per_1k / t.gpu_only_usd_per_1k) == 3
    payg = blended_price(C_IN, C_OUT, 0.25)
    assert t.gpu_only_usd_per_1k < payg < t.unit_cost_usd_per_1k       # won on GPU hours, lost in full


def test_crossover_between_4_and_5_billion_tokens():
    payg = blended_price(C_IN, C_OUT, 0.25)
    v = crossover_tokens_per_month(payg, _story_throughput(), 2.50, n_engineers=0.25, **DEPLOY)
    assert 4e9 <= v <= 5e9
    assert v == pytest.approx((14_600 + 3_750) / payg * 1000)
    at = self_hosted_tco(v, _story_throughput(), 2.50, n_engineers=0.25, **DEPLOY)
    assert at.total_usd == pytest.approx(payg_cost_usd(v, payg))
    # Two engineers push it past 10 B; a replica dearer than the PAYG value it carries: never.
    assert crossover_tokens_per_month(payg, _story_throughput(), 2.50, n_engineers=2, **DEPLOY) > 1e10
    assert crossover_tokens_per_month(payg, 1.0, 2.50, **DEPLOY) == math.inf


def test_crossover_on_the_staircase():
    # One-GPU replicas of 1e9 tokens/month at 100% and $1,000 each, no engineers, PAYG $2/1M:
    # volume v costs ceil(v/1e9) * 1000 vs 2e-3 * v/1000 -> equal at 0.5 B on the first step.
    rate = 1e9 / (730 * 3600)
    v = crossover_tokens_per_month(0.002, rate, 1000 / 730, max_utilization=1.0)
    assert v == pytest.approx(0.5e9)


# --- bad input --------------------------------------------------------------------------

@pytest.mark.parametrize("call, name", [
    (lambda: blended_price(C_IN, C_OUT, 1.5), "output_fraction"),
    (lambda: blended_price(C_IN, C_OUT, -0.1), "output_fraction"),
    (lambda: blended_price(-1, C_OUT, 0.5), "usd_per_1k_input"),
    (lambda: blended_price(C_IN, -1, 0.5), "usd_per_1k_output"),
    (lambda: break_even_tokens(-5, 0.003), "monthly_commitment_usd"),
    (lambda: break_even_tokens(5, 0), "blended_usd_per_1k"),
    (lambda: break_even_utilization(100, -1, C_IN, C_OUT, 0.5), "capacity_tokens_per_month"),
    (lambda: break_even_utilization(100, 1e9, C_IN, C_OUT, 2), "output_fraction"),
    (lambda: payg_cost_usd(-1, 0.003), "tokens"),
    (lambda: ptu_tokens_per_minute(-1, 0.5), "n_ptu"),
    (lambda: ptu_monthly_cost_usd(1, "weekly"), "term"),
    (lambda: spillover_cost([1, 2], -1, 0.1, 0.003), "floor_tpm"),
    (lambda: spillover_cost([1, -2], 1, 0.1, 0.003), "demand_tpm"),
    (lambda: spillover_cost([1, 2], 1, 0.1, -0.003), "blended_usd_per_1k"),
    (lambda: floor_at_percentile([1, 2], 101), "percentile"),
    (lambda: demand_trace(diurnal_amplitude=1.2), "diurnal_amplitude"),
    (lambda: self_hosted_unit_cost(-1, 1e9), "fixed_monthly_usd"),
    (lambda: self_hosted_unit_cost(1000, 0), "monthly_tokens"),
    (lambda: self_hosted_tco(-1, 100, 2.5), "monthly_tokens"),
    (lambda: self_hosted_tco(1e9, 100, 2.5, max_utilization=1.5), "max_utilization"),
    (lambda: self_hosted_tco(1e9, 100, 2.5, n_engineers=-1), "n_engineers"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
