"""servelib.disagg: mixed steps, chunked prefill, KV transfer, pool sizes and their cost."""
import math

import numpy as np
import pytest

from servelib.disagg import (SLO, InfeasibleSLO, Workload, cheapest_disaggregated, cheapest_mixed_pool,
                             chunked_prefill, kv_transfer_bytes, max_prefill_tokens, mixed_step_time_s,
                             prefill_slack_tokens, size_decode_pool, size_disaggregated, size_mixed_pool,
                             size_prefill_pool, transfer_time_s, usd_per_million_tokens)
from servelib.hardware import get_gpu
from servelib.memory import capacity
from servelib.models import get_model
from servelib.queueing import max_mean_occupancy, md1_wait_s, poisson_percentile
from servelib.roofline import predict_tpot_s, predict_ttft_s
from servelib.sim import Request, roofline_step_time, simulate
from servelib.units import MiB

M = get_model("llama-3-70b")
H100 = get_gpu("h100-sxm")
WL = Workload(32, 2048, 256)
SLO_TIGHT = SLO(ttft_s=0.3, tpot_s=0.015)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_mixed_step_reduces_to_the_book_predictions(tp):
    assert mixed_step_time_s(M, H100, decode_batch=64, context_len=2304, prefill_tokens=0,
                             tp_degree=tp) == predict_tpot_s(M, H100, 64, 2304, tp_degree=tp)
    assert mixed_step_time_s(M, H100, decode_batch=0, context_len=1, prefill_tokens=2048,
                             tp_degree=tp) == predict_ttft_s(M, H100, 2048, tp_degree=tp)


def test_mixed_step_by_hand():
    # 64 decodes at 2,304 tokens and a 2,048-token prompt on 4 H100s: 2 x 70.55e9 x 2,112 / 4
    # FLOPs at 989.5 TFLOP/s (75.3 ms) against weights, KV read and KV written at 3.35 TB/s.
    p, tp = 70_553_706_496, 4
    compute = 2 * p * (64 + 2048) / tp / 989.5e12
    kv_tok = 2 * 80 * (8 // tp) * 128 * 2
    memory = (2 * p / tp + 64 * 2304 * kv_tok + 2048 * kv_tok) / 3.35e12
    got = mixed_step_time_s(M, H100, decode_batch=64, context_len=2304, prefill_tokens=2048, tp_degree=tp)
    assert got == pytest.approx(max(compute, memory), rel=1e-12) and round(got * 1e3, 1) == 75.3
    serial = mixed_step_time_s(M, H100, decode_batch=64, context_len=2304, prefill_tokens=2048, tp_degree=tp,
                               overlap=False)
    assert serial == pytest.approx(compute + memory, rel=1e-12)
    # The prompt makes the step 5.3x a decode step.
    assert round(got / predict_tpot_s(M, H100, 64, 2304, tp_degree=tp), 1) == 5.3


def test_prefill_slack_is_where_the_step_turns_compute_bound():
    kw = dict(decode_batch=64, context_len=2304, tp_degree=4)
    p = prefill_slack_tokens(M, H100, **kw)

    def bound(n):
        ser = mixed_step_time_s(M, H100, prefill_tokens=n, overlap=False, **kw)
        return mixed_step_time_s(M, H100, prefill_tokens=n, **kw), ser

    # Memory-bound up to p: compute < memory, so max < sum / 2 + ... ; compute-bound from p + 1.
    per_token = 2 * M.n_active_params / 4 / 989.5e12
    for n, memory_bound in ((p, True), (p + 1, False)):
        t, ser = bound(n)
        compute = per_token * (64 + n)
        assert (compute <= ser - compute) == memory_bound
    # Up to the slack the step grows only by the KV written (microseconds), then 2P/(tp peak) a token.
    base = mixed_step_time_s(M, H100, prefill_tokens=0, **kw)
    assert bound(p)[0] - base < 0.01 * base
    assert bound(p + 1000)[0] - bound(p + 999)[0] == pytest.approx(per_token, rel=1e-6)
    assert p == 332
    # A batch that is already compute-bound has no slack.
    assert prefill_slack_tokens(M, H100, decode_batch=2000, context_len=1, tp_degree=4) == 0


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("target", [0.015, 0.02, 0.05])
def test_max_prefill_tokens_is_the_largest_chunk_within_the_target(overlap, target):
    kw = dict(decode_batch=64, context_len=2304, tp_degree=4, overlap=overlap)
    p = max_prefill_tokens(M, H100, step_target_s=target, **kw)
    assert p == 0 or mixed_step_time_s(M, H100, prefill_tokens=p, **kw) <= target
    assert mixed_step_time_s(M, H100, prefill_tokens=p + 1, **kw) > target
    # Compute-bound chunks: about target x tp x peak / 2P tokens in all, decode tokens included.
    if overlap:
        assert p + 64 == pytest.approx(target * 4 * 989.5e12 / (2 * M.n_active_params), abs=1)
    assert max_prefill_tokens(M, H100, step_target_s=0.01, **kw) == 0      # the decode step alone is 14 ms


def test_chunked_prefill_bounds_the_stall_and_spreads_the_work():
    kw = dict(prompt_len=2048, decode_batch=64, context_len=2304, tp_degree=4)
    whole = chunked_prefill(M, H100, **kw)
    assert whole.n_steps == 1 and whole.ttft_s == whole.step_s
    assert whole.step_s == mixed_step_time_s(M, H100, decode_batch=64, context_len=2304, prefill_tokens=2048,
                                             tp_degree=4)
    c512 = chunked_prefill(M, H100, max_batched_tokens=512, **kw)
    assert c512.n_steps == math.ceil(2048 / (512 - 64))
    assert c512.step_s < whole.step_s / 4 and c512.ttft_s > whole.ttft_s
    # Chunks within the slack ride in the decode steps: almost no stall in all, at the cost of TTFT.
    c256 = chunked_prefill(M, H100, max_batched_tokens=256, **kw)
    assert c256.total_stall_s < 0.01 * whole.total_stall_s and c256.ttft_s > 2 * whole.ttft_s
    # Without overlap every chunk adds its arithmetic: the total stall does not shrink.
    ser = [chunked_prefill(M, H100, max_batched_tokens=c, overlap=False, **kw).total_stall_s for c in (None, 512, 256)]
    assert min(ser) > 0.95 * max(ser)
    with pytest.raises(ValueError, match="max_batched_tokens"):
        chunked_prefill(M, H100, max_batched_tokens=64, **kw)


def test_chunked_prefill_matches_the_simulator_when_compute_bound():
    # A prompt prefilled in 1,024-token steps beside 32 long decodes, on the simulator's roofline
    # step times: its TTFT is the same sum of compute-bound steps.
    tp = 8
    decodes = [Request(0.0, 2048, 2000) for _ in range(32)]       # prefilled within 1.2 s
    prompt = Request(2.0, 4096, 2)
    r = simulate(decodes + [prompt], max_batch=64, max_batched_tokens=1024,
                 step_time_s=roofline_step_time(M, H100, tp_degree=tp))
    cp = chunked_prefill(M, H100, prompt_len=4096, decode_batch=32, context_len=2048 + 200,
                         max_batched_tokens=1024, tp_degree=tp)
    start = r.trace.end_s[r.trace.end_s >= 2.0][0]        # the prompt waits for the step under way
    assert 2.0 + r.ttft_s[-1] - start == pytest.approx(cp.ttft_s, rel=0.01)


def test_kv_transfer_bytes_and_time():
    assert kv_transfer_bytes(M, 2048) == 640 * MiB
    assert kv_transfer_bytes(M, 2048, tp_degree=8) == 80 * MiB
    assert kv_transfer_bytes(M, 2048, tp_degree=8, bytes_per_elem=1) == 40 * MiB
    assert transfer_time_s(80 * MiB, 50e9, 1e-4) == pytest.approx(1e-4 + 80 * 2**20 / 50e9)
    assert transfer_time_s(0, 1e9) == 0


def test_prefill_pool_is_the_fewest_instances_within_the_ttft_target():
    pool = size_prefill_pool(M, H100, WL, SLO_TIGHT, tp_degree=4, transfer_s=0.002)
    t_p = predict_ttft_s(M, H100, 2048, tp_degree=4)
    assert pool.prefill_s == t_p and pool.n_gpus == 4 * pool.n_instances
    assert pool.ttft_s <= SLO_TIGHT.ttft_s
    assert pool.ttft_s == pytest.approx(md1_wait_s(32 / pool.n_instances, t_p, 90) + t_p + 0.002)
    fewer = pool.n_instances - 1
    assert 32 / fewer * t_p >= 1 or md1_wait_s(32 / fewer, t_p, 90) + t_p + 0.002 > SLO_TIGHT.ttft_s
    # On means the same pool needs no more instances than at p90.
    mean = size_prefill_pool(M, H100, WL, SLO(0.3, 0.015, None), tp_degree=4, transfer_s=0.002)
    assert mean.n_instances <= pool.n_instances


def test_decode_pool_batch_step_and_occupancy():
    pool = size_decode_pool(M, H100, WL, SLO_TIGHT, tp_degree=4)
    ctx = 2048 + 128
    assert pool.step_s == predict_tpot_s(M, H100, pool.batch, ctx, tp_degree=4) <= 0.015
    mem = capacity(M, H100, n_gpus=4, context_len=2304, tp_degree=4).sequences_per_replica
    assert pool.batch == mem or predict_tpot_s(M, H100, pool.batch + 1, ctx, tp_degree=4) > 0.015
    assert poisson_percentile(pool.mean_batch, 90) <= pool.batch
    fewer = 32 / (pool.n_instances - 1) * 255 * pool.step_s if pool.n_instances > 1 else math.inf
    assert fewer > max_mean_occupancy(pool.batch, 90)


def test_mixed_pool_meets_both_targets():
    pool = size_mixed_pool(M, H100, WL, SLO_TIGHT, tp_degree=8)
    assert pool.step_s <= 0.015 and pool.ttft_s <= 0.3
    assert pool.step_s == mixed_step_time_s(M, H100, decode_batch=pool.batch, context_len=2176,
                                            prefill_tokens=pool.max_batched_tokens - pool.batch, tp_degree=8)
    assert pool.rate_per_instance * pool.n_instances >= 32 > pool.rate_per_instance * (pool.n_instances - 1)
    assert 0 < pool.prefill_busy < 1


def test_mixed_pool_sizing_holds_in_the_simulator():
    # One of the sized instances, its share of the arrivals, its batch and chunk: both targets met.
    from servelib.sim import workloads
    pool = size_mixed_pool(M, H100, WL, SLO_TIGHT, tp_degree=8)
    cap = capacity(M, H100, n_gpus=8, context_len=2304, tp_degree=8)
    arrivals = workloads.poisson_arrivals(2000, 32 / pool.n_instances, seed=1)
    r = simulate(workloads.make_requests(arrivals, 2048, 256), max_batch=pool.batch,
                 kv_capacity_tokens=int(cap.kv_budget_bytes_per_device // cap.kv_bytes_per_token_per_device),
                 max_batched_tokens=pool.max_batched_tokens, step_time_s=roofline_step_time(M, H100, tp_degree=8))
    assert r.n_completed == 2000
    assert r.percentile("ttft_s", 90) <= 0.3 and r.trace.step_s.max() <= 0.015 * 1.001


def test_the_chapter_scenario():
    # 32 requests/s of 2,048 + 256 tokens, p90 TTFT 300 ms, 15 ms a token, Llama-3-70B on H100s.
    mixed = {ov: size_mixed_pool(M, H100, WL, SLO_TIGHT, tp_degree=8, overlap=ov) for ov in (True, False)}
    split = {ov: size_disaggregated(M, H100, WL, SLO_TIGHT, prefill_tp=8, decode_tp=4, link_Bps=50e9,
                                    link_latency_s=1e-4, overlap=ov) for ov in (True, False)}
    assert [mixed[ov].n_gpus for ov in (True, False)] == [16, 32]
    assert [split[ov].n_gpus for ov in (True, False)] == [24, 28]
    d = split[True]
    assert (d.prefill.n_instances, d.decode.n_instances) == (2, 2)
    assert d.kv_bytes_per_shard == 80 * MiB and round(d.transfer_s * 1e3, 2) == 1.78


def test_cheapest_searches_the_tp_degrees():
    mixed = cheapest_mixed_pool(M, H100, WL, SLO_TIGHT)
    assert (mixed.tp_degree, mixed.n_gpus) == (8, 16)
    split = cheapest_disaggregated(M, H100, WL, SLO_TIGHT, link_Bps=50e9, link_latency_s=1e-4)
    everything = [size_disaggregated(M, H100, WL, SLO_TIGHT, prefill_tp=a, decode_tp=b, link_Bps=50e9,
                                     link_latency_s=1e-4).n_gpus for a in (4, 8) for b in (4, 8)]
    assert split.n_gpus == min(everything) == 24
    assert cheapest_mixed_pool(M, H100, WL, SLO(0.3, 0.001)) is None


def test_infeasible_targets_say_why():
    with pytest.raises(InfeasibleSLO, match="prefill takes"):
        size_prefill_pool(M, H100, WL, SLO(0.05, 0.015), tp_degree=2)
    with pytest.raises(InfeasibleSLO, match="decode step of one sequence"):
        size_decode_pool(M, H100, WL, SLO(0.3, 0.015), tp_degree=2)
    with pytest.raises(InfeasibleSLO, match="no batch"):
        size_mixed_pool(M, H100, WL, SLO(0.3, 0.015), tp_degree=2)
    with pytest.raises(InfeasibleSLO, match="does not fit"):
        size_decode_pool(M, H100, WL, SLO_TIGHT, tp_degree=1)
    assert issubclass(InfeasibleSLO, ValueError)


def test_cost_per_million_tokens_by_hand():
    # 24 GPUs at $2.50 an hour carrying 32 x 2,304 tokens a second: $60 / 265.4M tokens an hour.
    usd = usd_per_million_tokens(24, WL, 2.5)
    assert usd == pytest.approx(24 * 2.5 / (32 * 2304 * 3600 / 1e6), rel=1e-12)
    assert round(usd, 3) == 0.226


@pytest.mark.parametrize("call, exc, name", [
    (lambda: Workload(0, 2048, 256), ValueError, "arrival_rate_per_s"),
    (lambda: Workload(1, 2048, 1), ValueError, "output_len"),
    (lambda: Workload(1, 20.5, 4), TypeError, "prompt_len"),
    (lambda: SLO(0, 0.01), ValueError, "ttft_s"),
    (lambda: SLO(1, 0.01, 100), ValueError, "percentile"),
    (lambda: mixed_step_time_s(M, H100, decode_batch=0, context_len=1, prefill_tokens=0), ValueError,
     "decode_batch"),
    (lambda: mixed_step_time_s(M, H100, decode_batch=-1, context_len=1, prefill_tokens=0), ValueError,
     "decode_batch"),
    (lambda: mixed_step_time_s(M, H100, decode_batch=1, context_len=1, prefill_tokens=1, overlap="no"),
     TypeError, "overlap"),
    (lambda: mixed_step_time_s("llama", H100, decode_batch=1, context_len=1, prefill_tokens=1), TypeError,
     "model"),
    (lambda: transfer_time_s(1, 0), ValueError, "bandwidth_Bps"),
    (lambda: transfer_time_s(1, 1e9, -1), ValueError, "latency_s"),
    (lambda: size_decode_pool(M, H100, (32, 2048, 256), SLO_TIGHT, tp_degree=4), TypeError, "workload"),
    (lambda: size_decode_pool(M, H100, WL, (0.3, 0.015), tp_degree=4), TypeError, "slo"),
    (lambda: size_prefill_pool(M, H100, WL, SLO_TIGHT, tp_degree=4, transfer_s=-1), ValueError, "transfer_s"),
    (lambda: usd_per_million_tokens(0, WL), ValueError, "n_gpus"),
])
def test_bad_input_names_the_argument(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def test_workload_properties():
    assert (WL.decode_tokens, WL.final_len, WL.mean_decode_context) == (255, 2304, 2176)
    assert WL.tokens_per_s == 32 * 2304
    assert np.isclose(Workload(0.5, 10, 3).tokens_per_s, 6.5)


def test_cheapest_pools_try_only_degrees_that_split_the_model():
    # Falcon-7B has 71 attention heads: only TP 1 splits it. The default search skips 2, 4
    # and 8; a degree given explicitly that does not split the model is named.
    falcon = get_model("falcon-7b")
    wl, slo = Workload(arrival_rate_per_s=1.0, prompt_len=512, output_len=128), SLO(ttft_s=2.0, tpot_s=0.1)
    pool = cheapest_mixed_pool(falcon, "h100-sxm", wl, slo)
    assert pool is not None and pool.tp_degree == 1
    with pytest.raises(ValueError, match="tp_degree"):
        cheapest_mixed_pool(falcon, "h100-sxm", wl, slo, tp_degrees=(1, 2))
