"""Bad input gets a clear error naming the argument, never a crash elsewhere or a quiet number."""
import math

import numpy as np
import pytest

from servelib import memory, roofline
from servelib.audit import PlanError, load_plan, parse_plan
from servelib.economics import (AZURE_PTU, PtuPrice, TokenPrice, cheapest_floor, demand_trace,
                                ptu_break_even_utilization, ptu_monthly_cost_usd, self_hosted_tco,
                                spillover_cost)
from servelib.economics.scenarios import Commitment
from servelib.grading.__main__ import main as grading_main
from servelib.hardware import GPUSpec, get_gpu, ridge_point
from servelib.measure import batching_sweep, copy_bandwidth_Bps, load_profile, pick_device
from servelib.measure.__main__ import main as measure_main
from servelib.models import ModelSpec, get_model
from servelib.sim import Request, roofline_step_time, simulate, workloads
from servelib.units import fmt_bytes
from servelib.widgets import concurrency as wc
from servelib.widgets import economics as we
from servelib.widgets import roofline as wr

M = get_model("llama-3-70b")
G = get_gpu("h100-sxm")
REQS = [Request(0, 10, 5), Request(0.1, 20, 3)]
CFG = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "vocab_size": 10}

CASES = [
    # (id, call, exception type, the argument the message must name)
    ("fmt_bytes-inf", lambda: fmt_bytes(math.inf), ValueError, "n"),
    ("fmt_bytes-digits-neg", lambda: fmt_bytes(10, digits=-1), ValueError, "digits"),
    ("fmt_bytes-digits-frac", lambda: fmt_bytes(10, digits=2.5), TypeError, "digits"),
    ("hf-config-zero-heads", lambda: ModelSpec.from_hf_config({**CFG, "num_attention_heads": 0}),
     ValueError, "num_attention_heads"),
    ("hf-config-str-hidden", lambda: ModelSpec.from_hf_config({**CFG, "hidden_size": "32"}),
     TypeError, "hidden_size"),
    ("hf-config-zero-experts", lambda: ModelSpec.from_hf_config({**CFG, "num_local_experts": 0}),
     ValueError, "num_local_experts"),
    ("scaled-zero-layers", lambda: M.scaled(n_layers=0), ValueError, "n_layers"),
    ("scaled-zero-heads", lambda: M.scaled(n_heads=0), ValueError, "n_heads"),
    ("scaled-negative-hidden", lambda: M.scaled(hidden_size=-64), ValueError, "hidden_size"),
    ("huge-float-count", lambda: memory.kv_bytes_per_sequence(M, 1e308), TypeError, "context_len"),
    ("gpuspec-flops-none", lambda: GPUSpec("g", 1e9, 1e12, None), TypeError, "flops"),
    ("ridge-gpu-none", lambda: ridge_point(None), TypeError, "gpu"),
    ("capacity-gpu-int", lambda: memory.capacity(M, 3, n_gpus=8, context_len=8192), TypeError, "gpu"),
    ("min-tp-model-none", lambda: memory.min_tp_degree(None, G, context_len=8192), TypeError, "model"),
    ("kv-heads-model-none", lambda: memory.kv_heads_per_device(None, 2), TypeError, "model"),
    ("ttft-gpu-none", lambda: roofline.predict_ttft_s(M, None, 100), TypeError, "gpu"),
    ("attention-flops-number", lambda: roofline.decode_attention_flops_per_step(7e10, 10), TypeError, "model"),
    ("intensity-limit-none", lambda: roofline.decode_intensity_limit(None, 10), TypeError, "model"),
    ("steptime-gpu-none", lambda: roofline_step_time(M, None), TypeError, "gpu"),
    ("simulate-requests-none", lambda: simulate(None, max_batch=4, step_time_s=0.01), TypeError, "requests"),
    ("simulate-one-request", lambda: simulate(Request(0, 10, 5), max_batch=4, step_time_s=0.01),
     TypeError, "requests"),
    ("simulate-step-nan", lambda: simulate(REQS, max_batch=4, step_time_s=lambda b, t, k: math.nan),
     ValueError, "step_time_s"),
    ("simulate-step-negative", lambda: simulate(REQS, max_batch=4, step_time_s=lambda b, t, k: -1.0),
     ValueError, "step_time_s"),
    ("simulate-step-zero", lambda: simulate(REQS, max_batch=4, step_time_s=lambda b, t, k: 0.0),
     ValueError, "step_time_s"),
    ("simulate-step-str", lambda: simulate(REQS, max_batch=4, step_time_s=lambda b, t, k: "x"),
     TypeError, "step_time_s"),
    ("make-requests-half-token", lambda: workloads.make_requests(0, 8192.5, 10), TypeError, "prompt_len"),
    ("make-requests-nan", lambda: workloads.make_requests(0, 10, math.nan), TypeError, "output_len"),
    ("make-requests-str", lambda: workloads.make_requests(0, "ten", 5), TypeError, "prompt_len"),
    ("make-requests-shapes", lambda: workloads.make_requests([0, 1, 2], 10, [5, 6]), ValueError, "output_len"),
    ("output-lengths-seed-neg", lambda: workloads.output_lengths(5, 100, seed=-1), ValueError, "seed"),
    ("output-lengths-seed-frac", lambda: workloads.output_lengths(5, 100, seed=2.5), TypeError, "seed"),
    ("output-lengths-huge-mean", lambda: workloads.output_lengths(5, 1e308), ValueError, "mean"),
    ("output-lengths-huge-cv", lambda: workloads.output_lengths(5, 100, 1e308), ValueError, "cv"),
    ("poisson-seed-nan", lambda: workloads.poisson_arrivals(5, 1.0, seed=math.nan), TypeError, "seed"),
    ("uneven-seed-neg", lambda: workloads.uneven_outputs(-1), ValueError, "seed"),
    ("token-price-ratio-free-input", lambda: TokenPrice("m", 0, 1, None).output_to_input_ratio,
     ValueError, "usd_per_1k_input"),
    ("ptu-price-negative", lambda: PtuPrice(-2, 260, 221, None), ValueError, "usd_per_hour"),
    ("ptu-price-nan", lambda: PtuPrice(2, math.nan, 221, None), ValueError, "usd_per_month"),
    ("ptu-cost-price-none", lambda: ptu_monthly_cost_usd(1, "monthly", None), TypeError, "price"),
    ("ptu-break-even-token-price-none", lambda: ptu_break_even_utilization(0.5, token_price=None),
     TypeError, "token_price"),
    ("tco-uncountable-replicas", lambda: self_hosted_tco(1e300, 1e-300, 2.5), ValueError, "monthly_tokens"),
    ("demand-trace-huge-noise", lambda: demand_trace(1, noise=1e6), ValueError, "noise"),
    ("spillover-demand-str", lambda: spillover_cost(["a"], 10, 1, 1), TypeError, "demand_tpm"),
    ("cheapest-floor-demand-str", lambda: cheapest_floor(["a"], 1, 1), TypeError, "demand_tpm"),
    ("spillover-spill-str", lambda: spillover_cost([1, 2, 3], 1, 1, 1, spill="no"), TypeError, "spill"),
    ("commitment-zero-capacity", lambda: Commitment(100, 0), ValueError, "capacity_tokens_per_minute"),
    ("commitment-negative-price", lambda: Commitment(-100, 10), ValueError, "monthly_usd"),
    ("parse-plan-none", lambda: parse_plan(None), TypeError, "text"),
    ("parse-plan-bytes", lambda: parse_plan(b"[plan]"), TypeError, "text"),
    ("concurrency-figure-model-none", lambda: wc.concurrency_figure(None), TypeError, "model"),
    ("concurrency-figure-kv-str", lambda: wc.concurrency_figure(kv_bytes_per_elem="2"), TypeError,
     "kv_bytes_per_elem"),
    ("concurrency-figure-kv-huge", lambda: wc.concurrency_figure(kv_bytes_per_elem=math.inf), ValueError,
     "kv_bytes_per_elem"),
    ("concurrency-figure-reserve-none", lambda: wc.concurrency_figure(reserve_fraction=None), TypeError,
     "reserve_fraction"),
    ("concurrency-figure-no-contexts", lambda: wc.concurrency_figure(contexts=[]), ValueError, "contexts"),
    ("roofline-report-model-none", lambda: wr.roofline_report(None), TypeError, "model"),
    ("roofline-figure-no-batches", lambda: wr.roofline_figure(batches=[]), ValueError, "batches"),
    ("break-even-figure-commitment-str", lambda: we.break_even_figure(monthly_commitment_usd="1"),
     TypeError, "monthly_commitment_usd"),
    ("break-even-figure-input-negative", lambda: we.break_even_figure(usd_per_1m_input=-1), ValueError,
     "usd_per_1m_input"),
    ("break-even-figure-input-bool", lambda: we.break_even_figure(usd_per_1m_input=True), TypeError,
     "usd_per_1m_input"),
    ("floor-figure-percentile-150", lambda: we.floor_figure(150), ValueError, "percentile"),
    ("floor-figure-percentile-nan", lambda: we.floor_figure(math.nan), ValueError, "percentile"),
    ("floor-figure-percentile-str", lambda: we.floor_figure("50"), TypeError, "percentile"),
    ("floor-figure-demand-empty", lambda: we.floor_figure(demand_tpm=[]), ValueError, "demand_tpm"),
    ("floor-report-demand-str", lambda: we.floor_report(demand_tpm=["a"]), TypeError, "demand_tpm"),
    ("copy-bandwidth-zero-bytes", lambda: copy_bandwidth_Bps(pick_device("cpu"), 0), ValueError, "n_bytes"),
    ("copy-bandwidth-sub-element", lambda: copy_bandwidth_Bps(pick_device("cpu"), 2), ValueError, "n_bytes"),
    ("sweep-batches-int", lambda: batching_sweep(None, 5, 8), TypeError, "batches"),
]


@pytest.mark.parametrize("call, exc, arg", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_naming_the_argument(call, exc, arg):
    with pytest.raises(exc) as info:
        call()
    assert arg in str(info.value)


def test_float_counts_stay_exact_up_to_2_to_the_53():
    assert memory.kv_bytes_per_sequence(M, 8192.0) == memory.kv_bytes_per_sequence(M, 8192)
    assert memory.kv_bytes_per_sequence(M, np.float64(2.0**53)) > 0


def test_make_requests_keeps_whole_float_lengths():
    r = workloads.make_requests([0.0, 1.0], np.array([128.0, 64.0]), [5, 6])
    assert [(x.prompt_len, x.output_len) for x in r] == [(128, 5), (64, 6)]


def test_heavy_tailed_lengths_never_wrap_negative():
    x = workloads.output_lengths(1000, 1e15, cv=100, seed=1)
    assert x.min() >= 1 and x.max() <= 2**53


def test_load_plan_names_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_bytes(b"\xff\xfe[plan]\n")
    with pytest.raises(PlanError, match="plan.toml.*UTF-8"):
        load_plan(path)


def test_load_profile_names_a_file_that_is_not_json(tmp_path):
    path = tmp_path / "p.json"
    path.write_text("not json")
    with pytest.raises(ValueError, match="p.json.*not JSON"):
        load_profile(path)


def test_audit_cli_reports_a_non_utf8_plan(tmp_path, capsys):
    from servelib.__main__ import main
    path = tmp_path / "bin.toml"
    path.write_bytes(b"\xff\xfe")
    assert main([str(path)]) == 2
    assert "bin.toml" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["-j", "\u00b2"], ["--shard", "\u00b2/4"]])
def test_grading_cli_rejects_non_ascii_digits(tmp_path, capsys, argv):
    with pytest.raises(SystemExit) as info:
        grading_main(["grade", str(tmp_path), *argv])
    assert info.value.code == 2
    assert "must be" in capsys.readouterr().err


def test_measure_cli_refuses_a_folder_as_output_before_measuring(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        measure_main(["--out", str(tmp_path), "--device", "cpu"])
    assert info.value.code == 2
    assert "--out" in capsys.readouterr().err


def test_measure_cli_names_an_unavailable_device(tmp_path, capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(SystemExit) as info:
        measure_main(["--out", str(tmp_path / "p.json"), "--device", "cuda"])
    assert info.value.code == 2
    assert "--device" in capsys.readouterr().err


def test_spillover_accepts_numpy_bools():
    assert spillover_cost([1, 2, 3], 1, 1, 1, spill=np.bool_(False)).unserved_tokens > 0
    assert ptu_monthly_cost_usd(2, "monthly", AZURE_PTU) == 520


@pytest.mark.parametrize("kwargs,match", [
    (dict(block_size=10**9), "block_size must be at most"),
    (dict(block_size=64, kv_capacity_tokens=32), "must not exceed kv_capacity_tokens"),
])
def test_simulate_rejects_block_sizes_that_cannot_work(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate([Request(0.0, 8, 4)], max_batch=1, step_time_s=0.01, **kwargs)
