"""Audit codes for quantization counted by its bytes and speculative decoding at large batch."""
import dataclasses

import pytest

from servelib.audit import PlanError, audit, derive, parse_plan, plan_model, plan_to_toml
from servelib.audit.examples import mistake_plans, sound_plan
from servelib.precision import quantized_weight_bytes
from servelib.quantization import quantized_decode_speedup


def codes(plan):
    return [f.code for f in audit(plan)]


def test_int4_claimed_as_4x_is_bounded_by_the_ideal_kernel():
    plan = mistake_plans()["quantization-speedup-from-bytes"]
    f, = audit(plan)
    d = derive(plan)
    ceiling = quantized_decode_speedup(plan_model(plan), plan.gpu, "int4-g32", batch=d.decode_batch,
                                       context_len=plan.context_len, tp_degree=plan.tp_degree, bandwidth_ratio=1.0)
    assert (f.wrong, f.right) == (4.0, ceiling)
    m = plan_model(plan)
    assert f.right < quantized_weight_bytes(m, "bf16") / quantized_weight_bytes(m, "int4-g32") < 4
    assert "62% of bandwidth" in f.detail


def test_a_claim_at_the_ceiling_is_not_flagged_and_one_above_is():
    plan = mistake_plans()["quantization-speedup-from-bytes"]
    ceiling = audit(plan)[0].right
    assert codes(dataclasses.replace(plan, claimed_quantized_speedup=round(ceiling, 2))) == []
    assert codes(dataclasses.replace(plan, claimed_quantized_speedup=ceiling * 1.05)) == [
        "quantization-speedup-from-bytes"]


def test_speculation_at_large_batch_names_the_batch_where_it_stops_paying():
    f, = audit(mistake_plans()["speculative-at-large-batch"])
    # The draft's weights and cache leave room for 127 of the plan's 183 sequences.
    assert (f.field, f.wrong, f.right) == ("speculative.draft_model", 127, 37)
    assert "holds 127 sequences, not 183" in f.detail and "0.85x" in f.detail


def test_speculation_that_pays_at_the_plan_batch_is_not_flagged():
    plan = dataclasses.replace(sound_plan(), draft_model="llama-3-8b", draft_len=4, acceptance_rate=0.9)
    assert codes(plan) == []


@pytest.mark.parametrize("changes, field", [
    (dict(quantize_weights="int4-g32"), "quantization.claimed_decode_speedup"),
    (dict(claimed_quantized_speedup=2.0), "quantization.weights"),
    (dict(quantize_weights="int4-g32", claimed_quantized_speedup=2.0, bytes_per_param=1.0),
     "deployment.bytes_per_param"),
    (dict(quantize_weights="bf16", claimed_quantized_speedup=2.0), "quantization.weights"),
    (dict(draft_model="llama-3-8b"), "speculative.draft_len"),
    (dict(draft_model="llama-2-7b", draft_len=4, acceptance_rate=0.8), "speculative.draft_model"),
    (dict(draft_model="llama-3-8b", draft_len=4, acceptance_rate=1.5), "speculative.acceptance_rate"),
    (dict(quantize_weights="int3", claimed_quantized_speedup=2.0), "quantization.weights"),
])
def test_inconsistent_tables_are_invalid_plans(changes, field):
    with pytest.raises(PlanError) as e:
        dataclasses.replace(sound_plan(), **changes)
    assert e.value.field == field


def test_new_tables_round_trip_through_toml():
    for name in ("quantization-speedup-from-bytes", "speculative-at-large-batch"):
        plan = mistake_plans()[name]
        text = plan_to_toml(plan)
        assert "[quantization]" in text or "[speculative]" in text
        assert parse_plan(text) == plan
