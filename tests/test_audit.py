"""The audit: each beginner mistake gets its own code, and a sound plan gets none."""
import dataclasses

import pytest

from servelib.audit import CODES, CapacityPlan, Finding, PlanError, audit, derive, right_tp_degree
from servelib.audit.examples import mistake_plans, sound_plan, war_stories
from servelib.economics import MINUTES_PER_MONTH, ptu_break_even_utilization, ptu_monthly_cost_usd
from servelib.units import GiB, KiB


def codes(plan):
    return [f.code for f in audit(plan)]


def test_sound_plan_has_no_finding():
    assert audit(sound_plan()) == []


def test_sound_plan_derives_the_syllabus_numbers():
    d = derive(sound_plan())
    assert d.kv_bytes_per_token == 320 * KiB
    assert d.kv_bytes_per_sequence == 2.5 * GiB
    assert d.weights_bytes == 140e9
    assert d.concurrency == 183
    assert (d.min_tp_degree, d.right_tp_degree) == (2, 8)


@pytest.mark.parametrize("code", sorted(mistake_plans()))
def test_each_mistake_plan_yields_exactly_its_code(code):
    assert codes(mistake_plans()[code]) == [code]


def test_every_code_has_a_mistake_plan():
    assert set(mistake_plans()) == set(CODES)


@pytest.mark.parametrize("story", war_stories(), ids=lambda w: w.slug)
def test_war_stories_yield_their_codes(story):
    assert sorted(codes(story.plan)) == sorted(story.expected)


def test_heads_for_kv_is_8x_on_a_gqa_model():
    f, = audit(mistake_plans()["attention-heads-for-kv"])
    assert (f.wrong, f.right) == (8 * 320 * KiB, 320 * KiB)


def test_heads_for_kv_in_the_concurrency_claim_alone():
    f, = audit(dataclasses.replace(sound_plan(), claimed_concurrency=22))
    assert (f.code, f.field, f.wrong, f.right) == ("attention-heads-for-kv", "claims.concurrency", 22, 183)


def test_no_reserve_203_against_183():
    f, = audit(mistake_plans()["no-working-reserve"])
    assert (f.wrong, f.right) == (203, 183)
    # The same slip made in the claim only, with the plan's reserve right.
    f, = audit(dataclasses.replace(sound_plan(), claimed_concurrency=203))
    assert (f.code, f.field) == ("no-working-reserve", "claims.concurrency")


def test_weights_exceed_one_h100_needs_tp2():
    f, = audit(mistake_plans()["weights-exceed-device"])
    assert (f.field, f.wrong, f.right) == ("deployment.tp_degree", 1, 2)
    assert derive(mistake_plans()["weights-exceed-device"]).concurrency == 0


def test_max_tp_degree_names_the_smallest_degree_meeting_the_target():
    plan = mistake_plans()["max-tp-degree"]          # target 30: TP=2 holds 4 x 10 = 40
    f, = audit(plan)
    assert (f.wrong, f.right) == (8, 2)
    assert right_tp_degree(dataclasses.replace(plan, target_concurrency=41)) == 4
    assert right_tp_degree(dataclasses.replace(plan, target_concurrency=137)) == 8
    assert right_tp_degree(dataclasses.replace(plan, target_concurrency=184)) is None


def test_batch1_throughput_is_tens_of_times_lower():
    f, = audit(mistake_plans()["batch1-benchmark"])
    assert f.right / f.wrong > 30


def test_flops_concurrency_is_flagged_with_the_memory_answer():
    f, = audit(mistake_plans()["concurrency-from-flops"])
    assert (f.wrong, f.right) == (2800, 183)


def test_generic_code_for_an_unlisted_slip():
    f, = audit(mistake_plans()["claimed-number-wrong"])
    assert (f.wrong, f.right) == (160 * KiB, 320 * KiB)
    f, = audit(dataclasses.replace(sound_plan(), claimed_concurrency=150))
    assert (f.code, f.wrong, f.right) == ("claimed-number-wrong", 150, 183)


def test_rounded_claims_pass():
    assert audit(dataclasses.replace(sound_plan(), claimed_kv_bytes_per_token=328_000)) == []


def test_static_batching_with_fixed_outputs_is_fine():
    plan = dataclasses.replace(sound_plan(), batching="static", output_lengths="fixed")
    assert audit(plan) == []


def test_every_finding_has_a_one_sentence_why():
    for code, (mistake, why) in CODES.items():
        assert mistake and why.endswith(".") and why.count(". ") == 0, code
    with pytest.raises(ValueError, match="code"):
        Finding("no-such-code", "x")


def test_audit_rejects_a_non_plan():
    with pytest.raises(TypeError, match="CapacityPlan"):
        audit({"name": "x"})


def test_two_mistakes_give_two_codes():
    plan = dataclasses.replace(sound_plan(), admission="prompt", oversize_requests="queue")
    assert codes(plan) == ["admit-on-prompt-length", "queue-never-fits"]


def test_break_even_moved_40_to_77():
    story = {w.slug: w for w in war_stories()}["break-even-moved"]
    f, = audit(story.plan)
    assert (f.field, f.wrong, round(f.right, 2)) == ("ptu.break_even_output_fraction", 0.40, 0.77)


def test_peak_sized_commitment_22_against_57():
    story = {w.slug: w for w in war_stories()}["ptu-sized-to-peak"]
    f, = audit(story.plan)
    assert (f.wrong, f.right) == (100, 43)            # the (1 - u*) quantile, not p50
    assert "22% utilisation against a 57% break-even" in f.detail
    assert round(derive(story.plan).break_even_utilization, 2) == 0.57


# --- one reasoning for break-even and floor: how capacity counts tokens decides what moves ---

def _ptu_plan(**changes):
    """The sound plan paying for 50 gpt-4o PTUs reserved monthly, capacity in input-equivalent
    tokens with an output token as 4 input tokens (the price ratio)."""
    base = dict(monthly_commitment_usd=ptu_monthly_cost_usd(50, "monthly"),
                capacity_tokens_per_month=50 * 2500 * MINUTES_PER_MONTH, output_token_weight=4.0,
                claimed_break_even_utilization=None, break_even_output_fraction=None, floor_percentile=None)
    return dataclasses.replace(sound_plan(), **{**base, **changes})


def test_sound_plan_floor_is_the_one_minus_break_even_quantile():
    d = derive(sound_plan())
    assert d.cheapest_floor_percentile == pytest.approx(100 * (1 - 0.40 * 6.25 / 4.375))   # p42.9
    assert sound_plan().floor_percentile == 43


def test_ptu_break_even_quoted_at_another_mix_is_right_when_output_weighs_the_price_ratio():
    plan = _ptu_plan(output_fraction=0.10)
    assert derive(plan).break_even_utilization == pytest.approx(ptu_break_even_utilization(0.1, "monthly"))
    # Quoted at a 50% mix and the workload now at 10%: the mix cancels, so nothing to find...
    assert audit(dataclasses.replace(plan, claimed_break_even_utilization=0.95,
                                     break_even_output_fraction=0.5)) == []
    assert audit(dataclasses.replace(plan, claimed_break_even_utilization=0.95)) == []
    # ...while the same quote on capacity counted in tokens is the war story's mistake.
    raw = dataclasses.replace(plan, output_token_weight=1.0, claimed_break_even_utilization=0.40,
                              break_even_output_fraction=0.5)
    assert codes(raw) == ["ptu-break-even-without-mix"]


def test_floor_at_p50_by_rule_is_found_where_the_break_even_is_far_from_half():
    plan = _ptu_plan(floor_percentile=50)                  # u* = 95%: the cheapest floor is p5
    f, = audit(plan)
    assert (f.code, f.wrong, f.right) == ("floor-sized-to-peak", 50, 5)
    assert "exceeded 95% of the time, p5" in f.detail
    # Near u* = 50% a p50 floor costs within the tolerance of the cheapest one: no finding.
    assert audit(dataclasses.replace(sound_plan(), floor_percentile=50)) == []
    # Hourly PTUs never pay (u* > 1): any floor is above the cheapest, which is none.
    hourly = _ptu_plan(floor_percentile=50, monthly_commitment_usd=ptu_monthly_cost_usd(50, "hourly"))
    f, = audit(hourly)
    assert f.right == 0 and "no floor pays for itself" in f.detail


def test_self_hosting_story_triples_the_unit_cost():
    story = {w.slug: w for w in war_stories()}["self-hosting-won-then-lost"]
    f, = audit(story.plan)
    assert round(f.right / f.wrong) == 3


def test_sound_plan_crossover_between_4_and_5_billion():
    assert 4e9 <= derive(sound_plan()).crossover_tokens_per_month <= 5e9


def test_tokens_per_ptu_constant_found_from_the_numbers_too():
    plan = mistake_plans()["tokens-per-ptu-constant"]
    f, = audit(plan)
    assert f.right < f.wrong
    # Stated as "mix-adjusted" but equal to the datasheet's input-only rate: still caught.
    assert codes(dataclasses.replace(plan, capacity_estimate="mix-adjusted")) == ["tokens-per-ptu-constant"]


def test_static_batching_finding_comes_from_the_simulator():
    f, = audit(mistake_plans()["static-batching-uneven-outputs"])
    assert round(f.wrong / f.right, 1) == 2.8 and "5.0x lower mean latency" in f.detail


# --- plans that cannot work: a target, a latency or a token budget the hardware cannot meet ---

def test_a_target_no_tp_degree_meets():
    f, = audit(dataclasses.replace(sound_plan(), target_concurrency=200))
    # The report already said "none meets the target"; 183 is the most any TP degree holds.
    assert (f.code, f.field, f.wrong, f.right) == ("target-concurrency-unmet", "deployment.target_concurrency",
                                                   200, 183)
    assert codes(dataclasses.replace(sound_plan(), target_concurrency=183)) == []


def test_latency_targets_below_the_roofline():
    plan = dataclasses.replace(sound_plan(), ttft_slo_s=0.01, tpot_slo_s=0.001)
    d = derive(plan)
    f, = audit(plan)
    assert (f.code, f.field, f.wrong) == ("slo-below-roofline", "slo.tpot_s", 1.0)
    assert f.right == pytest.approx(d.tpot_s * 1e3) and round(f.right) == 24
    assert "36.2 ms against a 10 ms TTFT target" in f.detail
    # TTFT alone missed: named by its own field.
    f, = audit(dataclasses.replace(plan, tpot_slo_s=0.05))
    assert (f.field, f.wrong, round(f.right)) == ("slo.ttft_s", 10, 36)
    assert codes(dataclasses.replace(plan, ttft_slo_s=0.05, tpot_slo_s=0.05)) == []


def test_token_budget_below_the_batch():
    f, = audit(dataclasses.replace(sound_plan(), max_batched_tokens=1))
    assert (f.code, f.field, f.wrong, f.right) == ("token-budget-below-batch", "serving.max_batched_tokens", 1, 256)
    # The simulator's own rule: a budget equal to the batch is accepted.
    assert codes(dataclasses.replace(sound_plan(), max_batched_tokens=256)) == []


@pytest.mark.parametrize("changes, table", [
    # Each value in range; together the arithmetic leaves a float's range.
    (dict(monthly_commitment_usd=1e300, usd_per_1k_input=1e-300, monthly_tokens=1e20), "ptu"),
    (dict(n_params=1e300, usd_per_1k_output=1e300, capacity_tokens_per_month=1e-300), "ptu"),
    (dict(monthly_tokens=1e300, gpu_usd_per_hour=1e300), "self_hosting"),
])
def test_unpriceable_tables_are_named(changes, table):
    plan = dataclasses.replace(sound_plan(), **changes)
    with pytest.raises(PlanError, match=f"^{table}: cannot be priced"):
        audit(plan)


def test_no_speed_to_quote_is_no_crash():
    # Shared tiers on a deployment that does not fit: the finding stands, without a TPOT.
    plan = dataclasses.replace(mistake_plans()["shared-interactive-batch"], context_len=10_000_000)
    assert "shared-interactive-batch" in codes(plan) and "weights-exceed-device" in codes(plan)
    # A parameter override far below the preset keeps at least one active parameter.
    from servelib.audit import plan_model
    from servelib.audit.examples import moe_plan
    tiny = dataclasses.replace(moe_plan(), n_params=1.0, claimed_concurrency=None)
    assert (plan_model(tiny).n_params, plan_model(tiny).n_active_params) == (1, 1)
    derive(tiny)                          # once a ValueError: n_active_params rounded to 0
