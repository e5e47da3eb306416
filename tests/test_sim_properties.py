"""servelib.sim: invariants that hold for every workload (hypothesis)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from servelib.sim import Request, simulate

requests = st.lists(
    st.builds(lambda a, p, o, extra: Request(a, p, o, o + extra),
              st.integers(0, 30).map(float), st.integers(1, 60), st.integers(1, 40), st.integers(0, 30)),
    min_size=1, max_size=25)
common = dict(step_time_s=1.0)


@settings(max_examples=60, deadline=None)
@given(requests, st.integers(1, 6), st.integers(20, 400), st.sampled_from([None, 4, 16]))
def test_final_admission_invariants(reqs, max_batch, cap, block):
    r = simulate(reqs, max_batch=max_batch, kv_capacity_tokens=cap, block_size=block, **common)
    final = np.array([q.final_len for q in reqs])
    unit = block or 1
    fits = -(-final // unit) <= cap // unit
    # Rejected exactly when the final length can never fit; everyone else completes.
    assert list(r.status == "rejected") == list(~fits)
    assert np.all(r.status[fits] == "completed")
    assert r.n_oom_killed == 0 and r.n_preempted == 0
    # The memory held never exceeds the budget, and holds at least what is stored.
    assert np.all(r.trace.kv_allocated_tokens <= cap)
    assert np.all(r.trace.kv_used_tokens <= r.trace.kv_allocated_tokens)
    assert np.all(r.trace.batch <= max_batch)
    # Tokens are conserved: prompts prefilled once, every output token produced once.
    done = [q for q, ok in zip(reqs, fits) if ok]
    assert r.trace.tokens.sum() == sum(q.prompt_len + q.output_len - 1 for q in done)
    assert r.trace.decode.sum() + len(done) == sum(q.output_len for q in done)
    # Causality: first token after arrival, last after first.
    ok = r.status == "completed"
    assert np.all(r.ttft_s[ok] >= 1) and np.all(r.latency_s[ok] >= r.ttft_s[ok])


@settings(max_examples=60, deadline=None)
@given(requests, st.integers(1, 6), st.one_of(st.none(), st.integers(100, 400)))
def test_static_never_beats_continuous_on_makespan(reqs, max_batch, cap):
    kw = dict(max_batch=max_batch, kv_capacity_tokens=cap, **common)
    s, c = simulate(reqs, policy="static", **kw), simulate(reqs, policy="continuous", **kw)
    if c.n_completed:
        assert c.makespan_s <= s.makespan_s
        assert c.n_completed == s.n_completed


@settings(max_examples=60, deadline=None)
@given(requests, st.integers(1, 6), st.integers(60, 300), st.sampled_from([1, 4, 16]),
       st.sampled_from(["recompute", "swap"]), st.one_of(st.none(), st.integers(6, 64)))
def test_preemption_completes_everyone_safely(reqs, max_batch, cap, block, mode, chunk):
    max_batched = None if chunk is None else max(chunk, max_batch)
    r = simulate(reqs, max_batch=max_batch, kv_capacity_tokens=cap, block_size=block,
                 admission="prompt", preemption=mode, max_batched_tokens=max_batched, swap_s_per_token=0.0,
                 **common)
    # Over-commit with preemption never kills anything: every request that fits completes.
    assert r.n_oom_killed == 0
    assert r.n_completed + r.n_rejected == len(reqs)
    assert np.all(r.trace.kv_allocated_tokens <= cap)
    assert np.all(r.trace.kv_allocated_tokens - r.trace.kv_used_tokens < block * np.maximum(r.trace.batch, 1))
    if max_batched is not None:
        assert np.all(r.trace.tokens <= max_batched)
    # Work is conserved: every prompt prefilled once plus what preemption recomputed, and
    # every output token produced once (by a decode step, or by a prefill that completes).
    done = [q for q, s in zip(reqs, r.status) if s == "completed"]
    assert (r.trace.tokens - r.trace.decode).sum() == sum(q.prompt_len for q in done) + r.recomputed_tokens
    produced = r.trace.decode.sum() + r.n_completed
    if mode == "swap":
        assert r.recomputed_tokens == 0 or r.n_preempted > 0
        assert produced == sum(q.output_len for q in done) or r.recomputed_tokens > 0
    else:
        assert r.swapped_tokens == 0
        assert produced <= sum(q.output_len for q in done) <= produced + r.n_preempted


@settings(max_examples=40, deadline=None)
@given(requests, st.integers(1, 6), st.integers(20, 300))
def test_prompt_admission_without_preemption_accounts_for_everyone(reqs, max_batch, cap):
    r = simulate(reqs, max_batch=max_batch, kv_capacity_tokens=cap, admission="prompt", **common)
    assert r.n_completed + r.n_rejected + r.n_oom_killed == len(reqs)
    assert np.all(r.trace.kv_allocated_tokens <= cap)
    assert (r.n_oom_killed > 0) == (r.n_oom_events > 0)


def test_recompute_prefill_preempted_midway_is_counted_once():
    # Found by the property above: a request preempted while re-prefilling after an earlier
    # recompute preemption had its processed tokens counted twice.
    reqs = [Request(0.0, 1, 22, 22), Request(0.0, 1, 20, 20), Request(1.0, 8, 23, 25), Request(8.0, 39, 6, 27)]
    r = simulate(reqs, max_batch=6, kv_capacity_tokens=94, block_size=1, admission="prompt",
                 preemption="recompute", max_batched_tokens=34, **common)
    assert r.n_completed == 4 and r.n_preempted >= 2
    assert (r.trace.tokens - r.trace.decode).sum() == sum(q.prompt_len for q in reqs) + r.recomputed_tokens
