"""servelib.engine: paged logits equal a contiguous-cache decoder's, blocks are accounted for,
every policy's invariant holds for real, and the engine decides exactly as the simulator does."""
import json

import numpy as np
import pytest
import torch

from servelib.engine import Engine, OutOfBlocks, PagedKVCache, calibrate, engine_spec, predict, step_overhead
from servelib.engine import workloads as ew
from servelib.engine.__main__ import KEYS, main
from servelib.measure import pick_device
from servelib.sim import Request, simulate, workloads


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # Tiny models gain nothing from a second thread, and on a busy machine each thread waits
    # at every barrier for a core someone else holds; restore torch's setting afterwards.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def fp32():
    return Engine("tiny", device=pick_device("cpu"), dtype="fp32")


@pytest.fixture(scope="module")
def bf16():
    return Engine("tiny", device=pick_device("cpu"), dtype="bf16")


def mixed_requests(n=30, seed=0):
    """Poisson arrivals, uneven prompts and outputs, and four requests sharing a 35-token prefix."""
    rng = np.random.default_rng(seed)
    reqs = workloads.make_requests(workloads.poisson_arrivals(n, 300.0, seed=seed), rng.integers(8, 70, n),
                                   workloads.output_lengths(n, 16, 1.0, seed=seed + 1, max_len=48), 48)
    return reqs + [Request(0.01, 50, 10, prefix_id="sys", prefix_len=35) for _ in range(4)]


PRESSURE = dict(max_batch=8, kv_capacity_tokens=320, block_size=8, admission="prompt", preemption="recompute",
                max_batched_tokens=24)


def reference_logits(engine, i, req, generated):
    """Logits of each generated token from the plain contiguous-cache decoder, fed the same tokens."""
    m = engine.model
    prompt = engine.prompt_tokens(i, req)
    cache = m.new_cache(1, len(prompt) + len(generated))
    out = [m.forward(torch.tensor([prompt]), cache, 0)[0]]
    for k in range(1, len(generated)):
        out.append(m.forward(torch.tensor([[generated[k - 1]]]), cache, len(prompt) + k - 1)[0])
    return out


@pytest.mark.parametrize("dtype, atol", [("fp32", 1e-4), ("bf16", 0.1)])
@pytest.mark.parametrize("kw", [PRESSURE, dict(policy="static", max_batch=6, kv_capacity_tokens=4096, block_size=16)],
                         ids=["continuous-preempt-chunk-prefix", "static"])
def test_paged_logits_equal_contiguous_reference(fp32, bf16, dtype, atol, kw):
    # Batched, paged, chunked, preempted and recomputed, prefix blocks shared: every generated
    # token's logits equal those of a one-sequence decoder with a contiguous cache. bf16 rounds
    # to 8 bits of mantissa: logits of size ~4 differ by a few units in the last place.
    engine = fp32 if dtype == "fp32" else bf16
    reqs = mixed_requests()
    run = engine.run(reqs, record_logits=True, **kw)
    assert run.result.n_completed == len(reqs)
    if kw is PRESSURE:
        assert run.result.n_preempted > 0 and run.result.recomputed_tokens > 0
    worst = 0.0
    for i, q in enumerate(reqs):
        assert len(run.tokens[i]) == q.output_len
        ref = reference_logits(engine, i, q, run.tokens[i])
        for got, want in zip(run.logits[i], ref):
            worst = max(worst, float((got - want.float()).abs().max()))
    assert worst < atol


def test_tokens_are_greedy_and_deterministic(fp32):
    reqs = mixed_requests(10)
    a, b = fp32.run(reqs, **PRESSURE), fp32.run(reqs, max_batch=1, kv_capacity_tokens=4096, block_size=16)
    assert a.tokens == b.tokens      # the batch a sequence runs in does not change its tokens (fp32)


@pytest.mark.parametrize("kw", [
    PRESSURE,
    dict(max_batch=8, kv_capacity_tokens=4096, block_size=16),
    dict(max_batch=8, kv_capacity_tokens=4096, block_size=16, reserve_max=True),
    dict(policy="static", max_batch=5, kv_capacity_tokens=2048, block_size=4),
    dict(max_batch=8, kv_capacity_tokens=512, block_size=16, admission="prompt"),
], ids=["preempt", "final", "reserve-max", "static", "prompt-admission"])
def test_block_accounting(fp32, kw):
    # The engine checks its pool against the scheduler's count after every step; here: never
    # more blocks than the pool, and none left once every request has left.
    run = fp32.run(mixed_requests(), **kw)
    cache = fp32.cache(kw["kv_capacity_tokens"], kw["block_size"])
    assert cache.n_used == 0 and cache.n_free == cache.n_blocks and not cache.prefixes
    assert np.all(run.result.trace.kv_allocated_tokens <= cache.n_blocks * kw["block_size"])
    assert np.all(run.result.trace.kv_used_tokens <= run.result.trace.kv_allocated_tokens)


def test_prefix_blocks_are_shared_and_counted():
    spec = engine_spec("cpu", "tiny")
    cache = PagedKVCache(spec, 10, 4, "cpu", "fp32")
    a = cache.share_prefix("sys", 3)
    b = cache.share_prefix("sys", 3)
    assert a == b and cache.n_used == 3 and all(cache.refs[x] == 2 for x in a)
    cache.free(a)
    assert cache.n_used == 3 and "sys" in cache.prefixes
    cache.free(b)
    assert cache.n_used == 0 and not cache.prefixes
    with pytest.raises(OutOfBlocks, match="needs 11 more blocks and has 10 free"):
        cache.allocate(11)


def test_shared_prefix_holds_fewer_blocks(fp32):
    shared = [Request(0, 40, 4, prefix_id="p", prefix_len=32) for _ in range(4)]
    alone = [Request(0, 40, 4) for _ in range(4)]
    kw = dict(max_batch=4, kv_capacity_tokens=1024, block_size=16)
    a, b = fp32.run(shared, **kw).result, fp32.run(alone, **kw).result
    # 44 tokens: 3 blocks each alone (12); shared, 2 prefix blocks once + 1 own block each (6).
    assert b.kv_peak_tokens == 12 * 16 and a.kv_peak_tokens == 6 * 16


def test_final_admission_never_overflows_and_reserve_max_holds_the_final_length(fp32):
    reqs = [Request(0, 20, 10, max_output_len=100) for _ in range(6)]
    kw = dict(max_batch=6, kv_capacity_tokens=3 * 128, block_size=16)
    run = fp32.run(reqs, **kw).result
    res = fp32.run(reqs, reserve_max=True, **kw).result
    assert run.n_completed == res.n_completed == 6 and run.n_oom_killed == 0
    # Final length 120 tokens = 8 blocks: the 24-block pool takes 3 at once, whatever they hold.
    assert res.trace.batch.max() == 3 and res.kv_peak_tokens == 3 * 8 * 16
    assert run.trace.batch.max() == 3 and run.kv_peak_tokens < res.kv_peak_tokens


def test_prompt_admission_overflows_the_real_pool(fp32):
    four = [Request(0, 100, 50) for _ in range(4)]
    run = fp32.run(four, max_batch=4, kv_capacity_tokens=560, block_size=8, admission="prompt")
    assert run.result.n_oom_events == 1 and run.result.n_oom_killed == 4 and run.result.n_completed == 0
    assert len(run.oom_errors) == 1 and "needs 4 more blocks and has 2 free of 70" in run.oom_errors[0]
    sim = simulate(four, max_batch=4, kv_capacity_tokens=560, block_size=8, admission="prompt", step_time_s=0.01)
    assert run.result.oom_tokens_lost == sim.oom_tokens_lost > 0


def test_oversized_requests_are_rejected(fp32):
    reqs = [Request(0, 10, 5), Request(0, 600, 10), Request(0, 10, 5)]
    run = fp32.run(reqs, max_batch=2, kv_capacity_tokens=512, block_size=16).result
    assert run.n_rejected == 1 and run.rejections[0][0] == 1 and run.n_completed == 2


def test_static_returns_with_the_batch_and_pads(fp32):
    reqs = [Request(0, 10, o) for o in (1, 5, 2)]
    run = fp32.run(reqs, policy="static", max_batch=3, kv_capacity_tokens=1024)
    r = run.result
    assert np.all(r.latency_s == r.latency_s[0]) and r.n_steps == 5
    assert list(r.trace.tokens) == [30, 3, 3, 3, 3]      # finished members still computed (padding)


def test_chunked_prefill_respects_the_budget(fp32):
    reqs = [Request(0, 1, 30), Request(0, 200, 3)]
    run = fp32.run(reqs, max_batch=2, kv_capacity_tokens=1024, max_batched_tokens=40).result
    assert run.trace.tokens.max() <= 40 and run.ttft_s[1] > run.ttft_s[0]


@pytest.mark.parametrize("reqs, kw", [
    (ew.uneven(0, n=40, mean_output=12, prompt_len=16, max_batch=8)[0], dict(max_batch=8, kv_capacity_tokens=2048)),
    (ew.uneven(0, n=40, mean_output=12, prompt_len=16, max_batch=8)[0],
     dict(policy="static", max_batch=8, kv_capacity_tokens=2048)),
    (mixed_requests(), PRESSURE),
    (mixed_requests(), dict(max_batch=8, kv_capacity_tokens=400, block_size=8, admission="prompt")),
], ids=["continuous", "static", "preempt-chunk-prefix", "oom"])
def test_same_decisions_as_the_simulator_given_the_measured_step_times(fp32, reqs, kw):
    run = fp32.run(reqs, **kw)
    measured = iter(run.result.trace.step_s.tolist())
    sim = simulate(reqs, step_time_s=lambda b, t, k: next(measured), **{"block_size": 16, **kw})
    e, s = run.result, sim
    for col in ("end_s", "step_s", "batch", "decode", "tokens", "kv_used_tokens", "kv_allocated_tokens", "waiting"):
        assert np.array_equal(getattr(e.trace, col), getattr(s.trace, col)), col
    assert list(e.status) == list(s.status)
    for col in ("ttft_s", "tpot_s", "latency_s"):
        assert np.array_equal(getattr(e, col), getattr(s, col), equal_nan=True), col
    assert (e.n_preempted, e.n_oom_killed, e.recomputed_tokens) == (s.n_preempted, s.n_oom_killed, s.recomputed_tokens)


def test_open_loop_replay_waits_for_arrivals(fp32):
    reqs = [Request(0.0, 8, 4), Request(5.0, 8, 4)]
    run = fp32.run(reqs, max_batch=2, kv_capacity_tokens=256).result
    assert run.makespan_s > 5 and run.ttft_s[1] < 1
    off = fp32.run(reqs, max_batch=2, kv_capacity_tokens=256, offline=True).result
    assert off.makespan_s < 1


def test_calibration_fits_and_predicts(fp32):
    # A model fitted to the warm-up adds up to the warm-up's time, and the simulator given it
    # makes the same number of steps as the engine on an offline run (timings are not asserted).
    cal = calibrate(fp32, max_batch=8, max_context=64, max_chunk=32)
    assert len(cal.steps) == len(cal.seconds) > 50 and cal.model.fixed_s > 0
    reqs, kw = ew.uneven(1, n=24, mean_output=8, prompt_len=16, max_batch=8)
    run, pred = fp32.run(reqs, **kw), predict(reqs, cal.model, **kw)
    assert run.result.n_steps == pred.n_steps and pred.n_completed == 24


@pytest.mark.parametrize("kwargs, name", [
    (dict(preemption="swap", admission="prompt"), "recompute"),
    (dict(preemption="recompute"), "preemption"),
    (dict(max_batch=0), "max_batch"),
    (dict(kv_capacity_tokens=8), "kv_capacity_tokens"),
    (dict(block_size=0), "block_size"),
    (dict(reserve_max=True, admission="prompt"), "reserve_max"),
    (dict(policy="static", max_batched_tokens=16), "max_batched_tokens"),
    (dict(offline=1), "offline"),
])
def test_bad_run_arguments_name_themselves(fp32, kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        fp32.run([Request(0, 4, 2)], **{"max_batch": 2, **kwargs})


def test_a_failed_run_leaves_nothing_behind(fp32):
    # A run that fails mid-way (here its clock, after a step has taken blocks) must not
    # leave those blocks held in the pool the next run of the same shape reuses.
    reqs, kw = mixed_requests(6), dict(max_batch=2, kv_capacity_tokens=256, block_size=16)
    readings = iter(range(3))

    def clock():
        return float(next(readings))      # StopIteration at the 4th reading, mid-run

    with pytest.raises(StopIteration):
        fp32.run(reqs, clock=clock, **kw)
    assert fp32.cache(256, 16).n_used > 0       # what the failure left ...
    again = fp32.run(reqs, **kw)                # ... the next run starts without
    fresh = Engine("tiny", device="cpu", dtype="fp32").run(reqs, **kw)
    assert again.tokens == fresh.tokens and again.result.n_completed == len(reqs)


@pytest.mark.parametrize("clock, exc, match", [
    (lambda: "t", TypeError, "clock must return seconds as a number"),
    (lambda: float("nan"), ValueError, "clock must return a finite"),
    (lambda: None, TypeError, "clock"),
    (iter([5.0, 4.0, 3.0, 2.0, 1.0]).__next__, ValueError, "clock went back"),
    ("perf_counter", TypeError, "clock must be a function"),
])
def test_bad_clocks_name_the_clock(fp32, clock, exc, match):
    with pytest.raises(exc, match=match):
        fp32.run([Request(0, 4, 2)], max_batch=2, clock=clock)


def test_engine_takes_a_device_name_and_checks_its_arguments():
    e = Engine("tiny", device="cpu", seed=3)
    assert e.device.kind == "cpu" and e.seed == 3
    for kwargs, exc, name in [(dict(device=3), TypeError, "device"), (dict(device="tpu"), ValueError, "device"),
                              (dict(seed=1.5), TypeError, "seed"), (dict(seed=-1), ValueError, "seed"),
                              (dict(seed=True), TypeError, "seed")]:
        with pytest.raises(exc, match=name):
            Engine("tiny", **kwargs)


def test_engine_spec_sizes():
    assert engine_spec("cpu", "small").n_params < engine_spec("cuda", "small").n_params
    with pytest.raises(ValueError, match="size"):
        engine_spec("cpu", "huge")


def test_cli_writes_measured_and_predicted(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["--workload", "uneven", "--policy", "static", "--size", "tiny", "--threads", "1",
                 "--requests", "24", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    for k in ("makespan_s", "mean_latency_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "throughput_tokens_per_s",
              "n_completed"):
        assert k in doc and k in doc["predicted"]
    assert set(KEYS) <= set(doc["predicted"])
    assert doc["n_completed"] == doc["predicted"]["n_completed"] == 24
    assert doc["device"]["kind"] == "cpu" and doc["threads"] == 1
    assert "measured" in capsys.readouterr().out


@pytest.mark.parametrize("args, flag", [
    (["--workload", "uneven", "--rate", "3"], "--rate"),
    (["--workload", "poisson", "--rate", "-1"], "--rate"),
    (["--workload", "poisson", "--rate", "inf"], "--rate"),
    (["--workload", "poisson", "--rate", "nan"], "--rate"),
    (["--workload", "poisson", "--rate", "1e-320"], "--rate"),
    (["--max-batched-tokens", "0"], "--max-batched-tokens"),
    (["--max-batched-tokens", "39"], "--max-batched-tokens"),     # below uneven's 40 slots
    (["--block-size", "100000000"], "--block-size"),
    (["--slo-ttft", "inf"], "--slo-ttft"),
    (["--slo-tpot", "0"], "--slo-tpot"),
])
def test_cli_usage_errors_exit_2_with_one_line(tmp_path, capsys, args, flag):
    with pytest.raises(SystemExit) as e:
        main([*args, "--size", "tiny", "--out", str(tmp_path / "r.json")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and flag in err.splitlines()[-1] and "Traceback" not in err


def test_step_overhead_times_both_sides(fp32):
    o = step_overhead(fp32, 2, 24, rounds=1, steps=4)
    assert (o.batch, o.context_len) == (2, 24) and o.bare_s > 0 and o.engine_s > 0
    assert o.ratio == pytest.approx(o.engine_s / o.bare_s)


def test_cpu_padding_buckets():
    # Hand-computed buckets, and the property that makes them worth having: every count is
    # covered by a bucket at most one step above it, and a chapter-sized workload meets few
    # enough shapes for oneDNN's 1,024-kernel cache.
    from servelib.engine.model import padded_keys, padded_rows
    assert [padded_rows(n) for n in (1, 8, 9, 16, 64, 65, 97)] == [1, 8, 16, 16, 64, 96, 128]
    assert [padded_keys(n) for n in (1, 129, 256, 257, 513)] == [32, 160, 256, 320, 640]
    assert padded_rows(0) == 0       # a step that wants no logits runs the output layer over no rows
    for n in range(1, 2000):
        assert 0 <= padded_rows(n) - n < (1 if n <= 8 else 8 if n <= 64 else 32)
        assert 0 <= padded_keys(n) - n < (32 if n <= 256 else 64 if n <= 512 else 128)
    rows = {padded_rows(n) for n in range(1, 1065)}
    keys = {padded_keys(n) for n in range(1, 577)}
    batches = {padded_rows(n) for n in range(1, 41)}
    assert len(rows) == 8 + 7 + 32 and len(keys) == 13 and len(batches) == 12
    assert 5 * len(rows) + 2 * len(keys) * len(batches) < 1024


def test_warm_shapes_counts_every_product(fp32):
    from servelib.engine.model import warm_shapes
    # rows 1..20 -> 1..8, 16, 24 (10 counts) x 5 products; keys 1..40 -> 32, 64; batches 1..3
    assert warm_shapes(fp32.model, max_rows=20, max_batch=3, max_context=40) == 10 * 5 + 2 * 3 * 2
    assert warm_shapes(fp32.model, max_rows=20.0, max_batch=3, max_context=40) == 62    # a whole float is fine


@pytest.mark.parametrize("name, call, exc", [
    ("rows", lambda m, toy: m.padded_rows(-5), ValueError),
    ("rows", lambda m, toy: m.padded_rows(2.5), TypeError),
    ("rows", lambda m, toy: m.padded_rows(float("nan")), TypeError),
    ("rows", lambda m, toy: m.padded_rows(True), TypeError),
    ("keys", lambda m, toy: m.padded_keys(-5), ValueError),
    ("keys", lambda m, toy: m.padded_keys(float("inf")), TypeError),
    ("max_rows", lambda m, toy: m.warm_shapes(toy, max_rows=-3, max_batch=1, max_context=1), ValueError),
    ("max_rows", lambda m, toy: m.warm_shapes(toy, max_rows=2.5, max_batch=1, max_context=1), TypeError),
    ("max_batch", lambda m, toy: m.warm_shapes(toy, max_rows=2, max_batch=-1, max_context=1), ValueError),
    ("max_context", lambda m, toy: m.warm_shapes(toy, max_rows=2, max_batch=1, max_context=0), ValueError),
    ("model", lambda m, toy: m.warm_shapes("x", max_rows=2, max_batch=1, max_context=1), TypeError),
])
def test_padding_and_warm_up_check_their_arguments(fp32, name, call, exc):
    from servelib.engine import model
    with pytest.raises(exc, match=f"^{name} must be"):
        call(model, fp32.model)
