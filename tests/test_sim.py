"""servelib.sim: hand-computed cases, the syllabus's 2.8x / 5x, and bad input."""
import math

import numpy as np
import pytest

from servelib.models import get_model
from servelib.roofline import predict_tpot_s
from servelib.sim import Request, roofline_step_time, simulate, workloads

THREE = [Request(0, 10, o) for o in (1, 3, 2)]


def test_continuous_hand_case():
    # max_batch 2, one second per step. Step 1: r0 and r1 prefill; r0 (1 token) is done.
    # Step 2: r0 retired, r2 admitted; step 3: r1 (3 tokens) and r2 (2 tokens) finish.
    r = simulate(THREE, max_batch=2, step_time_s=1.0)
    assert r.makespan_s == 3 and r.n_steps == 3
    assert list(r.latency_s) == [1, 3, 3]
    assert list(r.ttft_s) == [1, 1, 2]
    assert math.isnan(r.tpot_s[0]) and list(r.tpot_s[1:]) == [1, 1]
    assert r.mean_latency_s == pytest.approx(7 / 3)
    assert r.throughput_tokens_per_s == 2
    assert list(r.trace.batch) == [2, 2, 2] and list(r.trace.kv_used_tokens) == [22, 23, 25]


def test_static_hand_case():
    # Batch {r0, r1} runs 3 steps (its longest member) and returns both at t=3; r2 then runs 2.
    r = simulate(THREE, policy="static", max_batch=2, step_time_s=1.0)
    assert r.makespan_s == 5
    assert list(r.latency_s) == [3, 3, 5] and list(r.ttft_s) == [1, 1, 4]
    assert list(r.trace.batch) == [2, 2, 2, 1, 1]


def test_admit_before_retire_costs_a_step():
    # The finished r0 still holds its slot when step 2 admits, so r2 starts one step late.
    r = simulate(THREE, max_batch=2, step_time_s=1.0, retire_before_admit=False)
    assert list(r.latency_s) == [1, 3, 4] and r.makespan_s == 4


def test_final_admission_serializes_what_does_not_fit_together():
    two = [Request(0, 10, 10), Request(0, 10, 10)]   # final length 20 each, capacity 30
    r = simulate(two, max_batch=2, kv_capacity_tokens=30, step_time_s=1.0)
    assert list(r.latency_s) == [10, 20] and r.kv_peak_tokens == 20 and r.n_oom_killed == 0


def test_prompt_admission_kills_the_whole_batch():
    # Both admitted on 11 tokens each (prompt + first token); growing 2 tokens a step they
    # reach 30 after step 5 and the sixth step overflows: both die with 5 tokens each done.
    two = [Request(0, 10, 10), Request(0, 10, 10)]
    r = simulate(two, max_batch=2, kv_capacity_tokens=30, admission="prompt", step_time_s=1.0)
    assert r.n_oom_events == 1 and r.n_oom_killed == 2 and r.n_completed == 0
    assert r.oom_tokens_lost == 10 and r.n_oom_killed_90pct_done == 0
    assert list(r.trace.kv_allocated_tokens) == [22, 24, 26, 28, 30]
    assert list(r.status) == ["oom_killed", "oom_killed"]


def test_oom_counts_requests_ninety_percent_done():
    # A long request admitted first keeps the short ones company until memory runs out.
    reqs = [Request(0, 100, 10)] * 4 + [Request(0, 100, 400)]
    r = simulate(reqs, max_batch=8, kv_capacity_tokens=545, admission="prompt", step_time_s=1.0)
    # 5 x 101 = 505 after step 1, +5 per step: step 9 reaches 545, step 10 overflows.
    assert r.n_oom_killed == 5 and r.n_oom_killed_90pct_done == 4 and r.oom_tokens_lost == 45


@pytest.mark.parametrize("preemption, recomputed, swapped", [("recompute", 12, 0), ("swap", 0, 24)])
def test_preemption_hand_case(preemption, recomputed, swapped):
    # Paged, 4-token blocks, 7 blocks. Each request takes 3 blocks (11 tokens); at step 3
    # both need a fourth block: the newest (r1, 12 tokens) is preempted, waits 8 steps for
    # r0 to finish, and comes back for its last 8 tokens.
    two = [Request(0, 10, 10), Request(0, 10, 10)]
    r = simulate(two, max_batch=2, kv_capacity_tokens=30, admission="prompt", block_size=4,
                 preemption=preemption, step_time_s=1.0, swap_s_per_token=0.0)
    assert list(r.latency_s) == [10, 18] and r.n_preempted == 1 and r.preempted_steps == 8
    assert (r.recomputed_tokens, r.swapped_tokens) == (recomputed, swapped)
    assert r.trace.kv_allocated_tokens.max() <= 28


def test_swap_time_is_charged():
    two = [Request(0, 10, 10), Request(0, 10, 10)]
    r = simulate(two, max_batch=2, kv_capacity_tokens=30, admission="prompt", block_size=4,
                 preemption="swap", step_time_s=1.0, swap_s_per_token=0.5)
    assert r.makespan_s == 18 + 0.5 * 24


def test_rejection_and_starvation():
    two = [Request(0, 10, 10), Request(0, 10, 10)]
    big = Request(0, 25, 10)
    r = simulate(two + [big], max_batch=2, kv_capacity_tokens=30, step_time_s=1.0)
    assert r.n_rejected == 1 and r.rejections[0][0] == 2 and "35 tokens" in r.rejections[0][1]
    assert r.n_completed == 2
    r = simulate([big] + two, max_batch=2, kv_capacity_tokens=30, step_time_s=1.0, reject_oversized=False)
    assert r.n_rejected == 0 and r.n_starved == 3 and r.n_completed == 0


def test_paged_fragmentation_and_prefix_sharing():
    # Four requests sharing a 32-token system prompt, 16-token blocks, one step each.
    shared = [Request(0, 40, 1, prefix_id="sys", prefix_len=32) for _ in range(4)]
    alone = [Request(0, 40, 1) for _ in range(4)]
    a = simulate(shared, max_batch=4, block_size=16, admission="prompt", step_time_s=1.0)
    b = simulate(alone, max_batch=4, block_size=16, admission="prompt", step_time_s=1.0)
    # Alone: 41 tokens -> 3 blocks each, 12 blocks. Shared: 2 prefix blocks + 1 own block each.
    assert b.kv_peak_tokens == 12 * 16 and a.kv_peak_tokens == (2 + 4) * 16
    assert b.kv_peak_used_tokens == 4 * 41 and a.kv_peak_used_tokens == 32 + 4 * 9


def test_contiguous_reservation_wastes_what_paging_saves():
    reqs = [Request(0, 100, 50, max_output_len=1000) for _ in range(8)]
    c = simulate(reqs, max_batch=8, kv_capacity_tokens=100_000, step_time_s=1.0)
    p = simulate(reqs, max_batch=8, kv_capacity_tokens=100_000, block_size=16, step_time_s=1.0)
    assert c.kv_peak_tokens == 8 * 1100 and p.kv_peak_tokens == 8 * 10 * 16
    assert c.kv_waste_fraction > 0.8 and p.kv_waste_fraction < 0.1


def test_chunked_prefill_hand_case():
    # 40 tokens per step. r0 (1-token prompt) decodes from step 2; r1's 100-token prompt is
    # prefilled 39 + 39 + 22 tokens and yields its first token at step 3, not step 1.
    reqs = [Request(0, 1, 10), Request(0, 100, 2)]
    r = simulate(reqs, max_batch=2, max_batched_tokens=40, step_time_s=1.0)
    assert list(r.ttft_s) == [1, 3] and list(r.latency_s) == [10, 4]
    assert list(r.trace.tokens[:4]) == [40, 40, 23, 2]
    plain = simulate(reqs, max_batch=2, step_time_s=1.0)
    assert list(plain.ttft_s) == [1, 1] and plain.trace.tokens[0] == 101


def test_step_time_callable_and_roofline():
    m = get_model("llama-3-8b")
    f = roofline_step_time(m, "h100-sxm")
    assert f(8, 8, 8 * 2048) == pytest.approx(predict_tpot_s(m, "h100-sxm", 8, 2048))
    r = simulate(THREE, max_batch=2, step_time_s=lambda b, tok, kv: 0.001 * tok)
    assert r.makespan_s == pytest.approx(0.001 * (20 + 11 + 2))


def test_tiers_reported_separately():
    reqs = [Request(0, 10, 5, tier="batch"), Request(0, 10, 2)]
    r = simulate(reqs, max_batch=2, step_time_s=1.0)
    assert r.percentile("latency_s", 50, tier="batch") == 5
    assert r.percentile("latency_s", 50, tier="interactive") == 2



@pytest.mark.parametrize("max_batch", [16, 256])
def test_shared_deployment_starves_chat_whatever_the_batch_size(max_batch):
    # Two replicas, chat arriving at 4/s and 1,000 documents dumped at t = 0. Shared, both
    # replicas serve both tiers first come first served, so chat queues behind documents;
    # split, chat has a replica of its own. Observed ratio about 3,000x at max_batch 16 and
    # 860x at 256; a factor of 100 leaves a wide margin.
    step = roofline_step_time(get_model("llama-3-8b"), "h100-sxm")
    chat = workloads.make_requests(workloads.poisson_arrivals(200, 4.0, seed=0), 256,
                                   workloads.output_lengths(200, 100, 1.0, seed=1, max_len=512), 512)
    docs = workloads.make_requests(0.0, 1000, workloads.output_lengths(1000, 200, 0.5, seed=2, max_len=512),
                                   512, tier="batch")
    both = sorted(chat + docs, key=lambda q: q.arrival_s)
    shared = [simulate(half, max_batch=max_batch, step_time_s=step) for half in (both[0::2], both[1::2])]
    split = simulate(chat, max_batch=16, step_time_s=step)
    shared_ttft = np.concatenate([r.ttft_s[r.tier == "interactive"] for r in shared])
    assert all(r.n_completed == len(r.status) for r in shared) and split.n_completed == len(chat)
    assert np.percentile(shared_ttft, 99) > 100 * split.percentile("ttft_s", 99)

def test_syllabus_uneven_outputs_reproduced():
    kw = workloads.uneven_outputs(seed=0)
    st, co = simulate(policy="static", **kw), simulate(policy="continuous", **kw)
    assert st.makespan_s / co.makespan_s == pytest.approx(2.8, rel=0.1)
    assert st.mean_latency_s / co.mean_latency_s == pytest.approx(5.0, rel=0.1)
    assert round(st.makespan_s / co.makespan_s, 1) == 2.8
    assert round(st.mean_latency_s / co.mean_latency_s, 1) == 5.0


def test_workload_generators():
    x = workloads.output_lengths(20_000, 256, 1.0, seed=1)
    assert x.min() >= 1 and x.mean() == pytest.approx(256.5, rel=0.03)
    assert np.all(workloads.output_lengths(5, 100, 0.0) == 100)
    a = workloads.poisson_arrivals(20_000, 4.0, seed=2)
    assert a[0] == 0 and np.all(np.diff(a) >= 0) and len(a) / a[-1] == pytest.approx(4.0, rel=0.03)
    b = workloads.bursty_arrivals(10, 1.0, 4, seed=0)
    assert len(b) == 10 and b[0] == b[3] and b[4] == b[7]
    assert np.array_equal(workloads.output_lengths(50, 10, seed=3), workloads.output_lengths(50, 10, seed=3))


@pytest.mark.parametrize("kwargs, name", [
    (dict(max_batch=0), "max_batch"),
    (dict(policy="dynamic"), "policy"),
    (dict(admission="maybe"), "admission"),
    (dict(kv_capacity_tokens=-5), "kv_capacity_tokens"),
    (dict(block_size=0), "block_size"),
    (dict(preemption="evict", admission="prompt"), "preemption"),
    (dict(preemption="swap"), "preemption"),
    (dict(max_batched_tokens=1), "max_batched_tokens"),
    (dict(step_time_s=0), "step_time_s"),
    (dict(swap_s_per_token=-1), "swap_s_per_token"),
    (dict(policy="static", max_batched_tokens=64), "max_batched_tokens"),
])
def test_bad_simulate_arguments_name_themselves(kwargs, name):
    base = dict(max_batch=2, step_time_s=1.0)
    with pytest.raises((ValueError, TypeError), match=name):
        simulate(THREE, **{**base, **kwargs})


@pytest.mark.parametrize("kwargs, name", [
    (dict(arrival_s=-1, prompt_len=1, output_len=1), "arrival_s"),
    (dict(arrival_s=0, prompt_len=0, output_len=1), "prompt_len"),
    (dict(arrival_s=0, prompt_len=1, output_len=1.5), "output_len"),
    (dict(arrival_s=0, prompt_len=1, output_len=10, max_output_len=5), "max_output_len"),
    (dict(arrival_s=0, prompt_len=1, output_len=1, tier="gold"), "tier"),
    (dict(arrival_s=0, prompt_len=8, output_len=1, prefix_len=4), "prefix_id"),
    (dict(arrival_s=0, prompt_len=8, output_len=1, prefix_id="a", prefix_len=9), "prefix_len"),
    (dict(arrival_s=0, prompt_len=8, output_len=1, prefix_id=["x"], prefix_len=4), "prefix_id"),
    (dict(arrival_s=0, prompt_len=8, output_len=1, prefix_id=1.0, prefix_len=4), "prefix_id"),
    (dict(arrival_s=0, prompt_len=8, output_len=1, prefix_id=True, prefix_len=4), "prefix_id"),
    (dict(arrival_s=0, prompt_len=1, output_len=10**12), "output_len"),
    (dict(arrival_s=0, prompt_len=10**7 + 1, output_len=1), "prompt_len"),
    (dict(arrival_s=0, prompt_len=1, output_len=1, max_output_len=10**7 + 1), "max_output_len"),
])
def test_bad_requests_name_the_field(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        Request(**kwargs)


def test_lengths_up_to_the_bound_and_int_prefix_ids_are_accepted():
    assert Request(0, 10**7, 10**7).final_len == 2 * 10**7
    # An int prefix id groups requests exactly as a str one does.
    by_int = simulate([Request(0, 40, 1, prefix_id=7, prefix_len=32) for _ in range(4)], max_batch=4,
                      step_time_s=1.0, kv_capacity_tokens=1000, block_size=16)
    by_str = simulate([Request(0, 40, 1, prefix_id="7", prefix_len=32) for _ in range(4)], max_batch=4,
                      step_time_s=1.0, kv_capacity_tokens=1000, block_size=16)
    assert by_int.kv_peak_tokens == by_str.kv_peak_tokens == 2 * 16 + 4 * 16


@pytest.mark.parametrize("arrival_s, step_s", [
    (1e15, 1e-9),                   # 1e15 + 1e-9 == 1e15: the clock would never move
    (2.0**43 - 8 * 2**-10, 2**-10),  # exact until t crosses 2**43, inside a run of decode steps
])
def test_a_clock_that_cannot_count_the_step_is_an_error(arrival_s, step_s):
    with pytest.raises(ValueError, match="arrival_s.*step_time_s"):
        simulate([Request(arrival_s, 1, 100)], max_batch=4, step_time_s=step_s)
    # Just inside float64's reach the figures are exact: 100 steps of 2**-10 s.
    r = simulate([Request(2.0**42 - 8 * 2**-10, 1, 100)], max_batch=4, step_time_s=2**-10)
    assert r.makespan_s == 100 * 2**-10 and r.ttft_s[0] == 2**-10


def test_make_requests_names_an_argument_that_is_not_flat():
    with pytest.raises(ValueError, match="prompt_len.*shape \\(1, 2\\)"):
        workloads.make_requests(0, [[1, 2]], 1)
    with pytest.raises(ValueError, match="arrival_s"):
        workloads.make_requests(np.zeros((2, 2)), 1, 1)


def test_a_rate_whose_mean_gap_overflows_is_named():
    with pytest.raises(ValueError, match="rate_per_s"):
        workloads.poisson_arrivals(3, 1e-320)


def test_requests_must_be_requests():
    with pytest.raises(TypeError, match=r"requests\[0\]"):
        simulate([(0, 1, 1)], max_batch=1, step_time_s=1.0)
