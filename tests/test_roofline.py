"""Roofline arithmetic: the syllabus's numbers exactly, and the invariants of intensity."""
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelib.hardware import get_gpu, ridge_point
from servelib.memory import kv_bytes_per_sequence, weight_bytes
from servelib.models import get_model
from servelib.roofline import (arithmetic_intensity, attainable_flops, compute_utilization, critical_batch,
                               decode_attention_flops_per_step, decode_bytes_per_step, decode_flops_per_step,
                               decode_intensity, decode_intensity_limit, predict_tpot_s, prefill_attention_flops,
                               prefill_flops, serial_step_time_s, step_time_s)
from servelib.units import GiB

LLAMA70 = get_model("llama-3-70b")


def test_prefill_is_2pn_and_attention_is_separate():
    assert prefill_flops(70e9, 2048) == 2 * 70e9 * 2048
    # Causal attention by hand for 1 layer, 1 head of size 1, 3 tokens: 2*(1+2+3)*2 = 24.
    tiny = get_model("llama-3-8b").scaled(n_layers=1, hidden_size=128, n_heads=1, n_kv_heads=1)
    assert prefill_attention_flops(tiny, 3) == 2 * 1 * 1 * 128 * 3 * 4
    assert decode_attention_flops_per_step(tiny, 10, batch=2) == 4 * 128 * 10 * 2


def test_attention_share_of_prefill_grows_with_prompt():
    share = [prefill_attention_flops(LLAMA70, s) / prefill_flops(LLAMA70.n_params, s) for s in (512, 8192, 32768)]
    assert share[0] < 0.01 < share[1] < share[2]


def test_decode_bytes_are_w_plus_b_kv():
    assert decode_bytes_per_step(140e9, 2.5 * GiB, 8) == 140e9 + 8 * 2.5 * GiB
    assert decode_flops_per_step(70e9, 8) == 2 * 70e9 * 8
    with pytest.raises(ValueError, match="batch"):
        decode_bytes_per_step(1e9, 1e6, 0)


def test_h100_ridge_is_about_295():
    assert round(ridge_point("h100-sxm", "bf16")) == 295


def test_batch1_fp16_intensity_is_about_one_flop_per_byte():
    for ctx in (1, 2048, 8192):
        assert 0.8 < decode_intensity(LLAMA70, 1, ctx, attention=False) <= 1
        assert 0.95 < decode_intensity(LLAMA70, 1, ctx) < 1.2
    # Exactly (2P + 4 L H d c) / (2P + KV) with 2-byte weights; weights only: 2P / (2P + KV).
    kv = kv_bytes_per_sequence(LLAMA70, 8192)
    attn = 4 * 80 * 64 * 128 * 8192
    assert decode_intensity(LLAMA70, 1, 8192) == pytest.approx(
        (2 * LLAMA70.n_params + attn) / (weight_bytes(LLAMA70) + kv), rel=1e-12)
    assert decode_intensity(LLAMA70, 1, 8192, attention=False) == pytest.approx(
        2 * LLAMA70.n_params / (weight_bytes(LLAMA70) + kv), rel=1e-12)


def test_batch1_decode_uses_about_a_third_of_a_percent_of_an_h100():
    u = compute_utilization(decode_intensity(LLAMA70, 1, 1), ridge_point("h100-sxm"))
    assert round(u * 100, 1) == 0.3
    assert compute_utilization(1000, 295) == 1.0


def test_critical_batch_is_where_intensity_crosses_the_ridge():
    r = ridge_point("h100-sxm")
    b = critical_batch(LLAMA70, r, 1)
    assert decode_intensity(LLAMA70, b, 1) >= r > decode_intensity(LLAMA70, b - 1, 1)
    assert 290 < b < 300
    # At 8k the limit (2P + A)/KV is ~61 FLOP/byte (53 without attention), under the ridge:
    # no batch makes decode compute-bound.
    assert round(decode_intensity_limit(LLAMA70, 8192)) == 61
    assert round(decode_intensity_limit(LLAMA70, 8192, attention=False)) == 53
    assert critical_batch(LLAMA70, r, 8192) is None
    assert critical_batch(LLAMA70, r, 1024) < critical_batch(LLAMA70, r, 1024, attention=False)


@pytest.mark.parametrize("name,floor", [("llama-3-70b", 8), ("llama-3-8b", 4), ("llama-2-7b", 1)])
def test_attention_sets_a_floor_under_the_intensity_limit(name, floor):
    # Attention's own intensity is 4 L H d c / (2 L H_kv d c b) = 2 (H / H_kv) / b: the GQA
    # group size over the element bytes, whatever the context. So the limit tends to it
    # from above as the context grows, instead of to 0 as 2P/KV does.
    m = get_model(name)
    limits = [decode_intensity_limit(m, c) for c in (2048, 32768, 1 << 22)]
    assert limits[0] > limits[1] > limits[2] > floor
    assert limits[2] == pytest.approx(floor, rel=0.05)
    assert decode_intensity_limit(m, 1 << 22, attention=False) < 0.05 * floor


@given(st.integers(1, 2000), st.integers(1, 32768))
def test_intensity_grows_with_batch_but_stays_under_the_limit(batch, ctx):
    i1, i2 = decode_intensity(LLAMA70, batch, ctx), decode_intensity(LLAMA70, batch + 1, ctx)
    assert i1 < i2 < decode_intensity_limit(LLAMA70, ctx)


def test_step_time_takes_the_larger_of_compute_and_memory():
    assert step_time_s(1e12, 1e9, 1e12, 1e9) == 1.0
    assert step_time_s(2e12, 1e9, 1e12, 1e9) == 2.0
    assert step_time_s(1e12, 3e9, 1e12, 1e9) == 3.0
    assert arithmetic_intensity(10, 5) == 2
    assert attainable_flops(1.0, 989.5e12, 3.35e12) == 3.35e12
    assert attainable_flops(1e4, 989.5e12, 3.35e12) == 989.5e12
    with pytest.raises(ValueError, match="bytes_moved"):
        arithmetic_intensity(1, 0)


def test_batch1_70b_decode_is_memory_bound_on_h100():
    # TP=2: each H100 reads half of ~141 GB at 3.35 TB/s: about 21 ms per token.
    t = predict_tpot_s(LLAMA70, "h100-sxm", 1, 1024, tp_degree=2)
    gpu = get_gpu("h100-sxm")
    w_half = weight_bytes(LLAMA70) / 2
    assert t == pytest.approx((w_half + kv_bytes_per_sequence(LLAMA70, 1024, tp_degree=2)) / gpu.hbm_bandwidth_Bps)
    assert 0.020 < t < 0.022
    assert not math.isnan(t)


def test_serial_step_time_is_the_no_overlap_bound():
    assert serial_step_time_s(1e12, 1e9, 1e12, 1e9) == 2.0          # at the ridge: twice the roofline
    assert serial_step_time_s(1e12, 1e6, 1e12, 1e9) == pytest.approx(1.001)


@given(st.floats(0, 1e15), st.floats(0, 1e12), st.floats(1e9, 1e15), st.floats(1e9, 1e13))
def test_roofline_and_serial_bounds_lie_within_2x(flops, bytes_moved, peak, bw):
    lo, hi = step_time_s(flops, bytes_moved, peak, bw), serial_step_time_s(flops, bytes_moved, peak, bw)
    assert lo <= hi <= 2 * lo * (1 + 1e-12)


# ---- mixtures of experts read only the experts a step touches -------------------------------

def test_expected_experts_touched():
    from servelib.roofline import expected_experts_touched
    assert expected_experts_touched(8, 2, 1) == pytest.approx(2)
    assert expected_experts_touched(8, 2, 2) == pytest.approx(8 * (1 - 0.75**2)) == pytest.approx(3.5)
    assert expected_experts_touched(128, 8, 10_000) == pytest.approx(128)
    with pytest.raises(ValueError, match="top_k"):
        expected_experts_touched(4, 8, 1)


def test_moe_decode_reads_touched_experts_and_is_below_published_mixtral():
    from servelib.models import get_model
    from servelib.published import GPT_FAST_MIXTRAL
    from servelib.roofline import decode_weight_bytes, params_touched, predict_tpot_s
    m = get_model("mixtral-8x7b")
    assert params_touched(m, 1) == m.n_active_params
    assert params_touched(m, 1) < params_touched(m, 4) < params_touched(m, 64) <= m.n_params
    assert params_touched(m, 10_000) == pytest.approx(m.n_params)
    # Hand count: batch 2 touches 3.5 experts a layer, 1.5 more than one token's 2.
    expert = 3 * 4096 * 14336
    assert params_touched(m, 2) == pytest.approx(m.n_active_params + 32 * expert * 1.5)
    r = GPT_FAST_MIXTRAL
    pred = predict_tpot_s(m, r.gpu_preset, r.batch, 5, tp_degree=r.tp_degree)
    # Was 22.9 ms (all 8 experts read): slower than the 10.4 ms measured, so no lower bound.
    assert pred == pytest.approx(decode_weight_bytes(m, 1) / 2 / 2039e9, rel=1e-3)
    assert round(pred * 1e3, 1) == 6.3 and pred < r.tpot_s
    dense = get_model("llama-3-8b")
    assert decode_weight_bytes(dense, 64) == dense.n_params * 2


def test_moe_intensity_and_critical_batch_use_touched_bytes():
    from servelib.models import get_model
    from servelib.roofline import critical_batch, decode_intensity
    m = get_model("qwen3-30b-a3b")
    assert decode_intensity(m, 1) == pytest.approx(1.0, rel=1e-3)     # reads only its active weights
    ridge = 295.4
    b = critical_batch(m, ridge)
    assert decode_intensity(m, b) >= ridge > decode_intensity(m, b - 1)


def test_attention_flops_count_windows_layer_by_layer():
    from servelib.roofline import decode_attention_flops_per_step, prefill_attention_flops
    # gpt-oss-20b: 12 full layers and 12 of a 128-token window. At 131,072 tokens of context a
    # decode step attends to 12 x 131,072 + 12 x 128 keys per query head, not 24 x 131,072.
    m = get_model("gpt-oss-20b")
    per_key = 4 * m.n_heads * m.head_dim
    assert decode_attention_flops_per_step(m, 131_072) == per_key * (12 * 131_072 + 12 * 128)
    # A 200-token prompt: full layers sum 1..200, windowed ones 1..128 then 128 for 72 more.
    assert prefill_attention_flops(m, 200) == per_key * (12 * 200 * 201 / 2 + 12 * (128 * 129 / 2 + 72 * 128))
    # A dense model keeps the closed forms.
    d = get_model("llama-3-70b")
    assert prefill_attention_flops(d, 100) == 2 * 80 * 64 * 128 * 100 * 101
    assert decode_attention_flops_per_step(d, 100, 3) == 4 * 80 * 64 * 128 * 100 * 3


def test_booleans_must_be_bool_not_truthy_strings():
    from servelib.roofline import generation_flops
    m = get_model("llama-3-8b")
    with pytest.raises(TypeError, match="kv_cache must be True or False"):
        generation_flops(1e9, 10, 10, kv_cache="no")
    for f in (lambda: decode_intensity(m, 1, 2048, attention="no"),
              lambda: decode_intensity_limit(m, 2048, attention="no"),
              lambda: critical_batch(m, 295.0, 2048, attention=0)):
        with pytest.raises(TypeError, match="attention must be True or False"):
            f()
    # The quadratic count without a cache, by hand: 2P (n s + n(n-1)/2) = 2e9 (100 + 45).
    assert generation_flops(1e9, 10, 10, kv_cache=False) == 2e9 * 145


def test_decode_weight_bytes_checks_model_and_batch():
    from servelib.roofline import decode_weight_bytes
    with pytest.raises(TypeError, match=r"model must be a ModelSpec \(for a bare parameter count use "
                                        r"servelib.memory.weight_bytes\)"):
        decode_weight_bytes(70e9)
    for m in (LLAMA70, get_model("mixtral-8x7b")):        # dense and MoE alike
        with pytest.raises(ValueError, match=r"batch must be an integer >= 1, got 0"):
            decode_weight_bytes(m, 0)
    assert decode_weight_bytes(LLAMA70, 7) == weight_bytes(LLAMA70)


def test_ttft_names_prompt_len():
    from servelib.roofline import predict_ttft_s
    for m in (LLAMA70, get_model("mixtral-8x7b")):       # the MoE path used to say "batch"
        with pytest.raises(ValueError, match=r"prompt_len must be an integer >= 1, got 0"):
            predict_ttft_s(m, "h100-sxm", 0)
