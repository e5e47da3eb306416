"""The audit: each beginner mistake gets its own code, and a sound plan gets none."""
import dataclasses

import pytest

from servelib.audit import CODES, CapacityPlan, Finding, audit, derive, right_tp_degree
from servelib.audit.examples import mistake_plans, sound_plan, war_stories
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
    assert (f.wrong, f.right) == (100, 50)
    assert "22% utilisation against a 57% break-even" in f.detail
    assert round(derive(story.plan).break_even_utilization, 2) == 0.57


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
