"""servelib.sim pieces the engine shares: the Scheduler driven by hand, the fitted step-time
model, swap charged over the GPU's host link by default, and the run metrics (goodput, Little's law)."""
import math

import numpy as np
import pytest

from servelib.hardware import get_gpu, list_gpus
from servelib.interconnect import get_host_link, get_link
from servelib.memory import kv_bytes_per_token
from servelib.models import get_model
from servelib.sim import (Request, Scheduler, StepTimeModel, fit_step_time, roofline_step_time, simulate,
                          swap_s_per_token, workloads)
from servelib.sim.blocks import KVPool
from servelib.sim.core import result
from servelib.sim.scheduler import Step


def poisson_chat(n=300, seed=0, rate=20.0):
    return workloads.make_requests(workloads.poisson_arrivals(n, rate, seed=seed), 128,
                                   workloads.output_lengths(n, 50, 1.0, seed=seed + 1, max_len=400), 400)


def test_one_pool_driven_by_hand_equals_simulate():
    # The executor interface: next_step / end_step / wait_until reproduce simulate() exactly,
    # so another executor (a real engine, or one pool of a disaggregated pair) can drive it.
    reqs = poisson_chat(rate=500.0)
    kw = dict(max_batch=16, kv_capacity_tokens=3000, block_size=16, admission="prompt", preemption="recompute",
              max_batched_tokens=256)
    want = simulate(reqs, step_time_s=lambda b, t, k: 0.001 + 1e-5 * t, **kw)
    sched = Scheduler(reqs, KVPool(3000, 16, "prompt"), static=False, max_batch=16, preemption="recompute",
                      budget_tokens=256)
    while True:
        step = sched.next_step()
        if step is None:
            if sched.finished:
                break
            sched.wait_until(sched.next_arrival_s)
            continue
        assert step.tokens <= 256 and step.batch <= 16
        sched.end_step(0.001 + 1e-5 * step.tokens)
    got = result(sched, "continuous")
    assert got.makespan_s == want.makespan_s and np.array_equal(got.trace.batch, want.trace.batch)
    assert np.array_equal(got.ttft_s, want.ttft_s, equal_nan=True) and got.n_preempted == want.n_preempted > 0


def test_step_knows_its_decode_contexts():
    # Two 10-token prompts decoding: at step s each holds 10 + (s - 1) tokens... plus the first.
    sched = Scheduler([Request(0, 10, 5), Request(0, 20, 5)], KVPool(None, None, "final"), static=False,
                      max_batch=2, preemption=None, budget_tokens=math.inf, detail=True)
    first = sched.next_step()
    assert first.chunks == ((0, 0, 10), (1, 0, 20)) and first.completing == 2 and first.logit_rows == 2
    sched.end_step(1.0)
    second = sched.next_step()
    assert (second.decode, second.decode_context_tokens, second.max_context) == (2, 11 + 21, 21)


def make_step(decode=0, lens=(), chunks=()):
    lens = list(lens) or [0] * decode
    return Step(1, len(lens) + len(chunks), len(lens), 0, len(lens) + sum(c for _, c in chunks), 0,
                tuple((k, s, c) for k, (s, c) in enumerate(chunks)), len(chunks), 0, sum(lens), max(lens, default=0))


def test_fit_recovers_a_known_step_time_model():
    truth = StepTimeModel(1e-3, 2e-5, 5e-5, 1e-8, 3e-4, 1e-9)
    steps = [make_step(lens=[L] * b) for b in (1, 4, 16, 64) for L in (16, 256, 2048)]
    steps += [make_step(chunks=[(s, c)]) for c in (8, 64, 512) for s in (0, 1024)]
    steps += [make_step(lens=[128] * 8, chunks=[(0, 64)] * 3)]
    got = fit_step_time(steps, [truth.of_step(s) for s in steps])
    assert got.coefficients == pytest.approx(truth.coefficients, rel=1e-6)
    assert sum(got.breakdown(steps[-1]).values()) == pytest.approx(truth.of_step(steps[-1]))


def test_fit_keeps_coefficients_non_negative_and_checks_input():
    steps = [make_step(lens=[16] * b) for b in (1, 2, 4, 8, 16, 32, 64)]
    secs = [0.002 - 1e-6 * b for b in (1, 2, 4, 8, 16, 32, 64)]     # faster with more tokens: unphysical
    got = fit_step_time(steps, secs)
    assert min(got.coefficients) >= 0 and got.fixed_s > 0
    with pytest.raises(ValueError, match="same length"):
        fit_step_time(steps, secs[:-1])
    with pytest.raises(ValueError, match="positive"):
        fit_step_time(steps, [0.0] * len(steps))
    with pytest.raises(ValueError, match="per_token_s"):
        StepTimeModel(1e-3, -1e-5, 0, 0, 0, 0)


def test_simulate_takes_a_step_time_model():
    model = StepTimeModel(1e-3, 1e-4, 0, 0, 0, 0)
    reqs = [Request(0, 10, o) for o in (1, 3, 2)]
    r = simulate(reqs, max_batch=2, step_time_s=model)
    # Steps of 20, 1 + 10 and 2 tokens (r2 prefills beside r1 decoding): 3 ms fixed + 33 tokens.
    assert r.makespan_s == pytest.approx(3e-3 + 1e-4 * (20 + 11 + 2))


def test_every_gpu_preset_but_the_b200_has_a_host_link_with_a_source():
    for name in list_gpus():
        if name == "b200":                      # no datasheet figure: swap needs link_Bps there
            with pytest.raises(KeyError, match="known"):
                get_host_link(name)
            continue
        host = get_host_link(name)
        assert host.gpu == name and host.source and host.generation.startswith("PCIe Gen")
        # A card whose GPUs talk over PCIe talks to its host over the same slot.
        if get_link(name).kind == "pcie":
            assert host.bandwidth_Bps == get_link(name).bandwidth_Bps
    assert get_host_link(get_gpu("h100-sxm")) is get_host_link("H100-SXM ")
    # Datasheets print both directions together: PCIe Gen5 x16 128 GB/s, Gen4 64, Gen3 32.
    assert [get_host_link(g).bandwidth_Bps for g in ("h100-sxm", "a100-80gb", "t4")] == [64e9, 32e9, 16e9]
    with pytest.raises(TypeError):
        get_host_link(3)


def test_swap_is_charged_over_the_gpus_host_link_by_default():
    m = get_model("llama-3-8b")
    assert kv_bytes_per_token(m, 2) == 131072                                # 128 KiB a token
    assert swap_s_per_token(m, "h100-sxm") == pytest.approx(131072 / 64e9)   # over Gen5 x16
    assert swap_s_per_token(m, "l4") == pytest.approx(131072 / 32e9)         # Gen4 x16: twice as long
    assert swap_s_per_token(m, link_Bps=1e9) == pytest.approx(131072 / 1e9)
    assert swap_s_per_token(m, "h100-sxm", tp_degree=8) == pytest.approx(131072 / 8 / 64e9)
    with pytest.raises(ValueError, match="gpu"):
        swap_s_per_token(m)
    step = roofline_step_time(m, "h100-sxm")
    assert step.swap_s_per_token == swap_s_per_token(m, "h100-sxm")
    assert roofline_step_time(m, "a100-80gb").swap_s_per_token == 2 * step.swap_s_per_token
    assert roofline_step_time(m, "b200").swap_s_per_token is None                # no figure, none assumed
    assert roofline_step_time(m, "b200", link_Bps=64e9).swap_s_per_token == step.swap_s_per_token
    reqs = workloads.make_requests(0.0, np.random.default_rng(0).integers(64, 1024, 400),
                                   workloads.output_lengths(400, 200, 1.0, seed=1, max_len=2048), 2048)
    kw = dict(max_batch=256, kv_capacity_tokens=30_000, block_size=16, admission="prompt", preemption="swap",
              step_time_s=step)
    charged, free = simulate(reqs, **kw), simulate(reqs, swap_s_per_token=0.0, **kw)
    assert charged.swapped_tokens == free.swapped_tokens > 0
    assert charged.makespan_s - free.makespan_s == pytest.approx(charged.swapped_tokens * step.swap_s_per_token,
                                                                 rel=1e-9)
    with pytest.raises(ValueError, match="swap_s_per_token"):
        simulate(reqs, **dict(kw, step_time_s=roofline_step_time(m, "b200")))


def test_swap_without_a_cost_is_an_error():
    two = [Request(0, 10, 10), Request(0, 10, 10)]
    with pytest.raises(ValueError, match="swap_s_per_token"):
        simulate(two, max_batch=2, kv_capacity_tokens=30, admission="prompt", block_size=4, preemption="swap",
                 step_time_s=1.0)


def test_goodput_and_summary_hand_case():
    # Latencies [1, 3, 3], TTFT [1, 1, 2], TPOT [nan, 1, 1] over a 3 s makespan.
    r = simulate([Request(0, 10, o) for o in (1, 3, 2)], max_batch=2, step_time_s=1.0)
    assert r.goodput_rps(ttft_slo_s=1.0, tpot_slo_s=1.0) == pytest.approx(2 / 3)
    assert r.goodput_rps(ttft_slo_s=2.0, tpot_slo_s=1.0) == pytest.approx(3 / 3)
    assert r.goodput_rps(ttft_slo_s=2.0, tpot_slo_s=0.5) == pytest.approx(1 / 3)   # only the 1-token answer
    s = r.summary(ttft_slo_s=1.0, tpot_slo_s=1.0)
    assert (s["makespan_s"], s["n_completed"], s["ttft_p50_s"], s["goodput_rps"]) == (3.0, 3, 1.0, pytest.approx(2 / 3))
    with pytest.raises(ValueError, match="ttft_slo_s"):
        r.goodput_rps(0, 1)


def test_littles_law_holds_on_a_simulated_run():
    # Requests in the system (time-averaged from the trace) = arrival rate x mean time in system.
    r = simulate(poisson_chat(2000), max_batch=32, step_time_s=0.01)
    assert r.n_completed == 2000
    lam = r.n_completed / r.makespan_s
    assert r.mean_in_system() == pytest.approx(lam * r.mean_latency_s, rel=0.02)
