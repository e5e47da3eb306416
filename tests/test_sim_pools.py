"""servelib.sim's pools: several replicas, and prefill and decode apart with a KV transfer.

Hand-computed cases, invariants (every request completes once, work is conserved, the
decode pool never prefills), the degenerate case against a single replica, agreement with
servelib.disagg's analytic sizing, and bad input."""
import math

import numpy as np
import pytest

from servelib.disagg import SLO, Workload, kv_transfer_bytes, size_disaggregated, size_mixed_pool
from servelib.interconnect import get_link
from servelib.models import get_model
from servelib.roofline import serial_step_time_s, step_time_s
from servelib.sim import (PoolSpec, Request, Scheduler, kv_transfer_time, roofline_pool, roofline_step_time,
                          simulate, simulate_disaggregated, simulate_pool, sized_pool, workloads)
from servelib.sim.blocks import KVPool
from servelib.sim.core import run_modelled

M70, M8 = get_model("llama-3-70b"), get_model("llama-3-8b")
H100 = "h100-sxm"
MiB = 2**20


def test_one_request_by_hand():
    # Prefill 50 ms, transfer 2 ms, then 4 decode steps of 10 ms: TTFT 52 ms, latency 92 ms.
    r = simulate_disaggregated([Request(1.0, 100, 5)], prefill=PoolSpec(1, 0.05, 1),
                               decode=PoolSpec(1, 0.01, 8), transfer_s=0.002)
    assert r.ttft_s[0] == pytest.approx(0.052) and r.tpot_s[0] == pytest.approx(0.01)
    assert r.latency_s[0] == pytest.approx(0.092) and r.makespan_s == pytest.approx(0.092)
    assert list(r.status) == ["completed"] and r.transfer_s[0] == 0.002 and r.decode_wait_s[0] == 0
    dec = r.instances["decode"][0]
    # The decode instance starts from the prompt and the first token: 101 tokens, then +1 a step.
    assert list(dec.trace.kv_used_tokens) == [102, 103, 104, 105] and dec.ttft_s[0] == 0
    assert r.n_steps == 5 and r.n_gpus == 2 and r.policy == "disaggregated"


def test_transfer_over_a_link_by_hand():
    # Llama-3-8B keeps 128 KiB of KV a token: a 4,096-token prompt is 512 MiB, 256 MiB a shard
    # at TP=2, over a 25 GB/s link after 20 us.
    move = kv_transfer_time(M8, link_Bps=25e9, link_latency_s=20e-6, tp_degree=2)
    assert move(4096) == pytest.approx(20e-6 + 256 * MiB / 25e9)
    r = simulate_disaggregated([Request(0, 4096, 3)], prefill=PoolSpec(1, 0.1, 1), decode=PoolSpec(1, 0.01, 4),
                               transfer_s=move)
    assert r.ttft_s[0] == pytest.approx(0.1 + 20e-6 + 256 * MiB / 25e9)
    assert r.latency_s[0] == pytest.approx(r.ttft_s[0] + 2 * 0.01)
    # Pools in one NVLink domain: the H100's link, 450 GB/s a direction.
    nv = get_link(H100)
    fast = kv_transfer_time(M8, link_Bps=nv.bandwidth_Bps, link_latency_s=nv.latency_s)
    assert fast(4096) == pytest.approx(nv.latency_s + 512 * MiB / 450e9)


def test_a_request_waits_for_a_decode_slot_in_its_first_gap():
    # One decode slot. r0 decodes from 52 ms to 242 ms; r1's KV arrives at 102 ms and waits
    # 140 ms for the slot: its TTFT is unchanged, its first gap (and so its TPOT) is not.
    r = simulate_disaggregated([Request(0, 100, 20), Request(0, 100, 3)], prefill=PoolSpec(1, 0.05, 1),
                               decode=PoolSpec(1, 0.01, 1), transfer_s=0.002)
    assert list(r.ttft_s) == pytest.approx([0.052, 0.102])
    assert list(r.decode_wait_s) == pytest.approx([0.0, 0.14])
    assert list(r.latency_s) == pytest.approx([0.242, 0.262])
    assert r.tpot_s[1] == pytest.approx((0.262 - 0.102) / 2)


def test_round_robin_dispatch_by_hand():
    # Three prompts at t = 0 on two prefill instances: 0 and 2 go to the first, 1 to the second.
    reqs = [Request(0, 10, 2) for _ in range(3)]
    r = simulate_disaggregated(reqs, prefill=PoolSpec(2, 0.05, 1), decode=PoolSpec(3, 0.01, 1))
    assert list(r.ttft_s) == pytest.approx([0.05, 0.05, 0.10])
    assert [x.n_requests for x in r.instances["prefill"]] == [2, 1]
    # At the decode pool they arrive 0, 1 (both at 50 ms, by index), then 2.
    assert [x.n_requests for x in r.instances["decode"]] == [1, 1, 1]
    assert list(r.latency_s) == pytest.approx([0.06, 0.06, 0.11])


def test_a_one_token_answer_ends_at_the_prefill():
    r = simulate_disaggregated([Request(0, 10, 1), Request(0, 10, 2)], prefill=PoolSpec(2, 0.05, 1),
                               decode=PoolSpec(1, 0.01, 1), transfer_s=0.003)
    assert r.ttft_s[0] == r.latency_s[0] == pytest.approx(0.05) and math.isnan(r.tpot_s[0])
    assert r.transfer_s[0] == 0 and math.isnan(r.decode_wait_s[0])
    assert r.ttft_s[1] == pytest.approx(0.053) and r.instances["decode"][0].n_requests == 1


def _workload(n=400, rate=20.0, seed=3):
    arrivals = workloads.poisson_arrivals(n, rate, seed=seed)
    prompts = workloads.output_lengths(n, 1500, 0.5, seed=seed + 1)
    outputs = workloads.output_lengths(n, 150, 1.0, seed=seed + 2, max_len=1000)
    return workloads.make_requests(arrivals, prompts, outputs, max_output_len=1000)


@pytest.mark.parametrize("dispatch", ["round_robin", "random"])
@pytest.mark.parametrize("block_size", [None, 16])
def test_invariants(dispatch, block_size):
    reqs = _workload()
    prefill = roofline_pool(M8, H100, n_instances=2, tp_degree=1, max_batch=2, max_batched_tokens=4096,
                            block_size=block_size)
    decode = roofline_pool(M8, H100, n_instances=3, tp_degree=1, max_batch=24, block_size=block_size)
    move = kv_transfer_time(M8, link_Bps=50e9, link_latency_s=1e-4)
    r = simulate_disaggregated(reqs, prefill=prefill, decode=decode, transfer_s=move, dispatch=dispatch, seed=7)
    n, prompts = len(reqs), np.array([q.prompt_len for q in reqs])
    outs = np.array([q.output_len for q in reqs])
    # Every request completes, exactly once, on one prefill and one decode instance.
    assert r.n_completed == n and r.n_rejected == 0
    assert sum(x.n_completed for x in r.instances["prefill"]) == n
    assert sum(x.n_completed for x in r.instances["decode"]) == int(np.sum(outs > 1))
    # Work is conserved: every prompt token prefilled once, every later token decoded once.
    pre, dec = r.pools["prefill"], r.pools["decode"]
    assert (pre.prefill_tokens, pre.decode_tokens) == (prompts.sum(), 0)
    assert (dec.prefill_tokens, dec.decode_tokens) == (0, (outs - 1).sum())
    assert r.completed_output_tokens == outs.sum()
    # The decode pool never prefills: every token of every step is a decode token.
    for x in r.instances["decode"]:
        assert np.array_equal(x.trace.tokens, x.trace.decode)
    # Times add up: TTFT ends with the transfer, latency = TTFT + (output - 1) TPOT.
    assert np.allclose(r.transfer_s, [move(p) if o > 1 else 0 for p, o in zip(prompts, outs)])
    assert np.all(r.ttft_s >= r.transfer_s) and np.all(r.decode_wait_s[outs > 1] >= 0)
    many = outs > 1
    assert np.allclose(r.latency_s[many], r.ttft_s[many] + (outs[many] - 1) * r.tpot_s[many])
    # Memory: no instance holds more than its budget; all of it is back at the end.
    assert r.kv_peak_tokens <= decode.kv_capacity_tokens and r.kv_capacity_tokens == decode.kv_capacity_tokens
    assert 0 < dec.utilisation <= 1 and 0 < pre.prefill_busy == pytest.approx(pre.utilisation)
    assert r.trace.step_s.size == r.n_steps


@pytest.mark.parametrize("block_size", [None, 16])
def test_a_decode_instance_leaves_no_memory_behind(block_size):
    # Prompts whose prompt + first token fill whole blocks: the next token opens a block in the
    # very step the request is admitted. A tight budget makes requests wait for memory.
    reqs = [Request(0.001 * k, 16 * (1 + k % 3) - 1, 2 + k % 40) for k in range(60)]
    pool = KVPool(400, block_size, "final")
    sched = Scheduler(reqs, pool, static=False, max_batch=64, preemption=None, budget_tokens=math.inf,
                      prefilled=True)
    run_modelled(sched, 0.01, None)
    assert all(s == 5 for s in sched.st)                          # completed
    assert pool.alloc == pool.commit == pool.used_tokens == 0 and pool.peak_alloc * pool.unit <= 400
    assert sched.recomputed == 0 and sched.first_t == sched.arr


def test_zero_transfer_and_ample_pools_match_one_replica():
    # Requests far apart: a request alone on one replica takes the same prefill step and the
    # same decode steps as on two pools with nothing between them.
    step = roofline_step_time(M8, H100)
    reqs = workloads.make_requests(np.arange(20) * 10.0, 512, workloads.output_lengths(20, 64, seed=1))
    one = simulate(reqs, max_batch=8, step_time_s=step)
    two = simulate_disaggregated(reqs, prefill=PoolSpec(2, step, 1), decode=PoolSpec(2, step, 8))
    for name in ("ttft_s", "tpot_s", "latency_s"):
        assert np.allclose(getattr(one, name), getattr(two, name), rtol=1e-12, equal_nan=True), name
    # Overlapping requests with an instance each: every one sees its own prefill and decode alone.
    burst = [Request(0, 1000 + 100 * k, 50) for k in range(6)]
    r = simulate_disaggregated(burst, prefill=PoolSpec(6, step, 1), decode=PoolSpec(6, step, 8),
                               transfer_s=0.001)
    alone = [simulate([q], max_batch=1, step_time_s=step) for q in burst]
    assert np.allclose(r.ttft_s, [a.ttft_s[0] + 0.001 for a in alone], rtol=1e-12)
    assert np.allclose(r.tpot_s, [a.tpot_s[0] for a in alone], rtol=1e-12)
    assert np.all(r.decode_wait_s == 0)


def test_a_pool_of_one_is_simulate_and_round_robin_splits_the_stream():
    step = roofline_step_time(M8, H100)
    reqs = _workload(200)
    kw = dict(max_batch=16, kv_capacity_tokens=200_000, max_batched_tokens=2048)
    one = simulate(reqs, step_time_s=step, **kw)
    pool = simulate_pool(reqs, PoolSpec(1, step, **kw))
    for name in ("ttft_s", "tpot_s", "latency_s"):
        assert np.array_equal(getattr(one, name), getattr(pool, name), equal_nan=True), name
    two = simulate_pool(reqs, PoolSpec(2, step, **kw))
    halves = [simulate(reqs[k::2], step_time_s=step, **kw) for k in (0, 1)]   # arrivals are sorted
    assert np.allclose(two.ttft_s[0::2], halves[0].ttft_s) and np.allclose(two.latency_s[1::2], halves[1].latency_s)
    assert two.n_gpus == 2 and list(two.pools) == ["mixed"] and np.all(np.isnan(two.decode_wait_s))
    assert two.pools["mixed"].prefill_tokens == sum(q.prompt_len for q in reqs)


def test_a_request_too_long_for_a_decode_instance_is_turned_away_before_its_prefill():
    reqs = [Request(0, 100, 10), Request(0, 300, 10)]
    r = simulate_disaggregated(reqs, prefill=PoolSpec(1, 0.05, 1), decode=PoolSpec(1, 0.01, 4, kv_capacity_tokens=200))
    assert list(r.status) == ["completed", "rejected"] and r.rejections[0][0] == 1
    assert "decode instance" in r.rejections[0][1] and r.pools["prefill"].prefill_tokens == 100
    # A prompt too long for a prefill instance is rejected there, with that instance's reason.
    r = simulate_disaggregated(reqs, prefill=PoolSpec(1, 0.05, 1, kv_capacity_tokens=200), decode=PoolSpec(1, 0.01, 4))
    assert list(r.status) == ["completed", "rejected"] and r.rejections[0][1].startswith("prefill instance")


def test_roofline_step_time_without_overlap_is_the_sum():
    over, serial = roofline_step_time(M8, H100), roofline_step_time(M8, H100, overlap=False)
    from servelib.hardware import get_gpu
    g = get_gpu(H100)
    flops, bytes_ = 2 * M8.n_params * 300, 2 * M8.n_params + 5000 * 128 * 1024
    assert over(4, 300, 5000) == pytest.approx(step_time_s(flops, bytes_, g.peak_flops("bf16"), g.hbm_bandwidth_Bps))
    assert serial(4, 300, 5000) == pytest.approx(serial_step_time_s(flops, bytes_, g.peak_flops("bf16"),
                                                                    g.hbm_bandwidth_Bps))
    with pytest.raises(TypeError, match="overlap"):
        roofline_step_time(M8, H100, overlap="no")


# -- agreement with servelib.disagg's sizing ------------------------------------------------------
# The chapter's scenario: Llama-3-70B on H100s, 32 requests/s of 2,048 + 256 tokens, TTFT p90
# within 300 ms, every step within 15 ms, a 50 GB/s link with 100 us of latency.
WL, SLO_TIGHT = Workload(32, 2048, 256), SLO(0.3, 0.015)
LINK = dict(link_Bps=50e9, link_latency_s=1e-4)


@pytest.fixture(scope="module")
def sized():
    split = size_disaggregated(M70, H100, WL, SLO_TIGHT, prefill_tp=4, decode_tp=4, **LINK)
    reqs = workloads.make_requests(workloads.poisson_arrivals(1500, 32, seed=1), 2048, 256)
    return split, reqs


@pytest.mark.parametrize("dispatch", ["random", "round_robin"])
def test_pools_sized_by_servelib_disagg_meet_the_slo_in_the_simulation(sized, dispatch):
    split, reqs = sized
    r = simulate_disaggregated(reqs, prefill=sized_pool(M70, H100, split.prefill),
                               decode=sized_pool(M70, H100, split.decode),
                               transfer_s=kv_transfer_time(M70, tp_degree=4, **LINK), dispatch=dispatch, seed=2)
    assert r.n_completed == 1500 and r.n_gpus == split.n_gpus == 24
    assert r.transfer_s[0] == pytest.approx(split.transfer_s)
    # The targets hold: TTFT p90 within the target and under the sizing's own bound (Kingman's
    # bound on the M/D/1 wait); every decode step within the TPOT target (the sizing takes the
    # step at the mean context; 0.1% covers contexts above it at a full batch).
    ttft90 = r.percentile("ttft_s", 90)
    assert ttft90 <= split.prefill.ttft_s <= SLO_TIGHT.ttft_s
    assert r.itl_percentile_s(100) <= SLO_TIGHT.tpot_s * 1.001
    # Load as predicted: each prefill instance busy lambda t_p / n, within 5% (a finite run);
    # decode batches no fuller than the sizing's mean, which takes every step at the full batch.
    assert r.pools["prefill"].utilisation == pytest.approx(split.prefill.prefill_busy, rel=0.05)
    assert 0.7 * split.decode.mean_batch < r.pools["decode"].mean_batch <= split.decode.mean_batch
    # With the prefill pool sized for its average load, random dispatch (the sizing's assumption)
    # misses the target; round robin evens out the gaps between a pool's arrivals and meets it.
    busy = math.ceil(32 * split.prefill.prefill_s)
    fewer = PoolSpec(busy, sized_pool(M70, H100, split.prefill).step_time_s, 1, tp_degree=4)
    short = simulate_disaggregated(reqs, prefill=fewer, decode=sized_pool(M70, H100, split.decode),
                                   transfer_s=split.transfer_s, dispatch=dispatch, seed=2)
    assert (short.percentile("ttft_s", 90) > SLO_TIGHT.ttft_s) == (dispatch == "random")


def test_a_mixed_pool_sized_by_servelib_disagg_meets_the_slo_in_the_simulation(sized):
    _, reqs = sized
    pool = size_mixed_pool(M70, H100, WL, SLO_TIGHT, tp_degree=8)
    r = simulate_pool(reqs, sized_pool(M70, H100, pool), dispatch="random", seed=2)
    assert r.n_completed == 1500 and r.n_gpus == pool.n_gpus == 16
    assert r.percentile("ttft_s", 90) <= pool.ttft_s <= SLO_TIGHT.ttft_s
    assert r.itl_percentile_s(100) <= SLO_TIGHT.tpot_s * 1.001
    assert r.pools["mixed"].prefill_busy == pytest.approx(pool.prefill_busy, rel=0.1)
    # Sized for the overlapped bound, the same pool fails if the GPU overlaps nothing.
    serial = simulate_pool(reqs, sized_pool(M70, H100, pool, overlap=False))
    assert serial.itl_percentile_s(100) > SLO_TIGHT.tpot_s


# -- bad input ---------------------------------------------------------------------------------------
REQS = [Request(0, 10, 5)]
OK = PoolSpec(1, 0.01, 4)


@pytest.mark.parametrize("call, exc, name", [
    (lambda: PoolSpec(0, 0.01, 4), ValueError, "n_instances"),
    (lambda: PoolSpec(1, 0.01, 0), ValueError, "max_batch"),
    (lambda: PoolSpec(1, 0.01, 4, tp_degree=0), ValueError, "tp_degree"),
    (lambda: PoolSpec(1, -0.01, 4), ValueError, "step_time_s"),
    (lambda: PoolSpec(1, 0.01, 4, max_batched_tokens=2), ValueError, "max_batched_tokens"),
    (lambda: PoolSpec(1, 0.01, 4, kv_capacity_tokens=0), ValueError, "kv_capacity_tokens"),
    (lambda: PoolSpec(1, 0.01, 4, kv_capacity_tokens=8, block_size=16), ValueError, "block_size"),
    (lambda: simulate_disaggregated(REQS, prefill=None, decode=OK), TypeError, "prefill"),
    (lambda: simulate_disaggregated(REQS, prefill=OK, decode=0.01), TypeError, "decode"),
    (lambda: simulate_disaggregated(REQS, prefill=OK, decode=OK, transfer_s=-1), ValueError, "transfer_s"),
    (lambda: simulate_disaggregated(REQS, prefill=OK, decode=OK, transfer_s=math.inf), ValueError, "transfer_s"),
    (lambda: simulate_disaggregated(REQS, prefill=OK, decode=OK, transfer_s=lambda p: math.nan), ValueError,
     "transfer_s"),
    (lambda: simulate_disaggregated(REQS, prefill=OK, decode=OK, dispatch="least_loaded"), ValueError, "dispatch"),
    (lambda: simulate_disaggregated(REQS, prefill=OK, decode=OK, seed=-1), ValueError, "seed"),
    (lambda: simulate_disaggregated(Request(0, 10, 5), prefill=OK, decode=OK), TypeError, "requests"),
    (lambda: simulate_pool(REQS, "pool"), TypeError, "pool"),
    (lambda: simulate_pool([REQS[0], 3], OK), TypeError, "requests"),
    (lambda: kv_transfer_time(M8, link_Bps=0), ValueError, "link_Bps"),
    (lambda: kv_transfer_time(M8, link_Bps=1e9, link_latency_s=-1), ValueError, "link_latency_s"),
    (lambda: kv_transfer_time(M8, link_Bps=1e9, tp_degree=0), ValueError, "tp_degree"),
    (lambda: roofline_pool(M70, "l4", n_instances=1, tp_degree=1, max_batch=4), ValueError, "tp_degree"),
    (lambda: sized_pool(M70, H100, OK), TypeError, "pool"),
])
def test_bad_input_names_the_argument(call, exc, name):
    with pytest.raises(exc, match=name):
        call()
