"""The audit's one-pool-tight-slos code: whole prompts in decode steps under a TPOT target."""
import dataclasses

import pytest

from servelib.audit import CapacityPlan, PlanError, audit, derive, parse_plan, plan_to_toml
from servelib.audit.examples import mistake_plans, sound_plan
from servelib.audit.pools import plan_workload
from servelib.economics import SECONDS_PER_MONTH

PLAN = mistake_plans()["one-pool-tight-slos"]


def test_the_finding_gives_the_stretched_step_and_the_target():
    f, = audit(PLAN)
    assert (f.code, f.field, f.unit) == ("one-pool-tight-slos", "serving.pools", "ms per step")
    # 183 decodes and a 2,048-token prompt at TP=8: 2 x 70e9 x 2,231 / 8 FLOPs at 989.5 TFLOP/s.
    assert f.wrong == pytest.approx(2 * 70e9 * (183 + 2048) / 8 / 989.5e12 * 1e3, rel=1e-9)
    assert f.right == pytest.approx(30)
    assert "chunks of at most 1,513 prompt tokens" in f.detail
    assert "one pool with chunked prefill needs 8 GPUs" in f.detail and "16 GPUs (8 prefill + 8 decode)" in f.detail


def test_chunks_that_fit_the_target_clear_it():
    d = derive(PLAN)
    assert audit(dataclasses.replace(PLAN, max_batched_tokens=d.decode_batch + 1513)) == []
    assert [f.code for f in audit(dataclasses.replace(PLAN, max_batched_tokens=d.decode_batch + 1514))] == [
        "one-pool-tight-slos"]


def test_separate_pools_or_a_loose_target_clear_it():
    assert audit(dataclasses.replace(PLAN, pools="disaggregated")) == []
    assert audit(dataclasses.replace(PLAN, tpot_slo_s=0.05)) == []
    # A target the decode step alone misses is a different problem (batch or TP), with its own code.
    assert [f.code for f in audit(dataclasses.replace(PLAN, tpot_slo_s=0.02))] == ["slo-below-roofline"]
    assert audit(sound_plan()) == []


def test_a_stated_link_adds_the_transfer_time():
    f, = audit(dataclasses.replace(PLAN, kv_link_Bps=50e9))
    assert "80 MiB of KV per device per request, 1.7 ms over the link" in f.detail


def test_plan_workload_from_the_mix():
    wl = plan_workload(PLAN)
    assert (wl.prompt_len, wl.output_len) == (2048, 683)          # 2,048 x 0.25 / 0.75
    assert wl.arrival_rate_per_s == pytest.approx(5.75e9 / SECONDS_PER_MONTH / 2731)


def test_slo_table_round_trips_and_is_validated():
    assert parse_plan(plan_to_toml(PLAN)) == PLAN
    base = dict(name="x", model="llama-3-8b", gpu="h100-sxm", n_gpus=1, tp_degree=1, context_len=4096,
                reserve_fraction=0.1, prompt_len=1024, max_batch=64)
    with pytest.raises(PlanError, match="workload.output_fraction: is required when the plan has a \\[slo\\]"):
        CapacityPlan(**base, ttft_slo_s=0.5, tpot_slo_s=0.03)
    with pytest.raises(PlanError, match="slo.tpot_s: is required"):
        CapacityPlan(**base, ttft_slo_s=0.5, output_fraction=0.2, monthly_tokens=1e9)
    with pytest.raises(PlanError, match="slo.percentile"):
        dataclasses.replace(PLAN, slo_percentile=100)
    with pytest.raises(PlanError, match="serving.pools"):
        dataclasses.replace(PLAN, pools="split")
