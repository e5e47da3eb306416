"""Memory arithmetic: every syllabus number exact, properties, and bad input."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servelib.hardware import get_gpu
from servelib.memory import (capacity, kv_budget_bytes, kv_bytes_per_sequence, kv_bytes_per_token,
                             max_concurrency, min_tp_degree, vllm_kv_budget_bytes, weight_bytes)
from servelib.models import get_model, list_models
from servelib.units import GiB, KiB

NODE = 8 * 80 * GiB
L70 = get_model("llama-3-70b")


def test_kv_per_token_70b_is_320_kib():
    assert kv_bytes_per_token(L70) == 327_680 == 320 * KiB
    assert kv_bytes_per_token(get_model("llama-2-70b")) == 320 * KiB


def test_kv_per_8k_sequence_is_2_5_gib():
    assert kv_bytes_per_sequence(L70, 8192) == 2.5 * GiB


def test_kv_per_token_table_from_facts():
    expected = {"llama-3-8b": 131_072, "llama-2-7b": 524_288, "mistral-7b": 131_072,
                "mixtral-8x7b": 131_072, "qwen2.5-7b": 57_344, "falcon-7b": 8_192}
    for name, b in expected.items():
        assert kv_bytes_per_token(get_model(name)) == b


def test_fp8_cache_halves_kv():
    assert kv_bytes_per_token(L70, bytes_per_elem=1) == 160 * KiB


def test_70b_fp16_weights_are_about_130_gib_and_do_not_fit_one_card():
    w = weight_bytes(70e9, 2)
    assert w == 140e9 and round(w / GiB, 1) == 130.4
    assert w > get_gpu("h100-sxm").memory_bytes == 80 * GiB


def test_183_22_1467_on_8x80_gib():
    budget = kv_budget_bytes(NODE, weight_bytes(70e9), 0.10)
    got = [max_concurrency(budget, kv_bytes_per_token(m), 8192)
           for m in (L70, L70.with_kv_heads(64), L70.with_kv_heads(1))]
    assert got == [183, 22, 1467]


def test_gqa_is_8x_the_concurrency_of_mha():
    budget = kv_budget_bytes(NODE, weight_bytes(70e9))
    gqa = budget / kv_bytes_per_sequence(L70, 8192)
    mha = budget / kv_bytes_per_sequence(L70.with_kv_heads(64), 8192)
    assert gqa / mha == 8


def test_vllm_convention_gives_178():
    budget = vllm_kv_budget_bytes(NODE, weight_bytes(70e9), gpu_memory_utilization=0.9)
    assert budget == pytest.approx(0.9 * NODE - 140e9)
    assert max_concurrency(budget, kv_bytes_per_token(L70), 8192) == 178


def test_vllm_subtracts_activation_and_non_torch_memory():
    base = vllm_kv_budget_bytes(NODE, 140e9)
    assert vllm_kv_budget_bytes(NODE, 140e9, activation_bytes=GiB, non_torch_bytes=GiB) == base - 2 * GiB


def test_capacity_per_device_matches_pooled_for_gqa_and_replicates_mqa():
    assert capacity(L70, "h100-sxm", n_gpus=8, context_len=8192).concurrency == 183
    assert capacity(L70.with_kv_heads(64), "h100-sxm", n_gpus=8, context_len=8192).concurrency == 22
    mqa = capacity(L70.with_kv_heads(1), "h100-sxm", n_gpus=8, context_len=8192)
    assert mqa.kv_bytes_per_token_per_device == 40 * KiB      # one head kept on every device
    assert mqa.concurrency == 183


def test_capacity_with_replicas():
    c = capacity(get_model("llama-3-8b"), "h100-sxm", n_gpus=8, tp_degree=1, context_len=8192)
    one = capacity(get_model("llama-3-8b"), "h100-sxm", n_gpus=1, context_len=8192)
    assert c.replicas == 8 and c.concurrency == 8 * one.concurrency


def test_kv_per_device_under_tp():
    assert kv_bytes_per_token(L70, tp_degree=8) == 40 * KiB
    assert kv_bytes_per_token(L70, tp_degree=2) == 160 * KiB
    with pytest.raises(ValueError, match="tp_degree"):
        kv_bytes_per_token(L70, tp_degree=3)


def test_max_concurrency_floors_and_never_negative():
    assert max_concurrency(10 * GiB, 1, 4 * GiB) == 2
    assert max_concurrency(3.0, 1, 3) == 1                   # exact fit is not lost to rounding
    assert max_concurrency(0, 1, 10) == 0
    assert kv_budget_bytes(80 * GiB, 140e9) == 0             # weights exceed the card


def test_min_tp_degree_70b():
    assert min_tp_degree(L70, "h100-sxm", context_len=8192) == 2
    assert min_tp_degree(L70, "a100-40gb", context_len=8192) == 4
    assert min_tp_degree(L70, "h200", context_len=8192) == 1
    with pytest.raises(ValueError, match="does not fit"):
        min_tp_degree(L70, "t4", context_len=8192)


@pytest.mark.parametrize("name", list_models())
@pytest.mark.parametrize("gpu", ["a100-40gb", "l4", "h100-sxm"])
def test_min_tp_degree_is_minimal(name, gpu):
    m = get_model(name)
    try:
        tp = min_tp_degree(m, gpu, context_len=4096)
    except ValueError:
        return
    assert capacity(m, gpu, n_gpus=tp, context_len=4096).fits
    for smaller in range(1, tp):
        if m.n_heads % smaller == 0 and (m.n_kv_heads % smaller == 0 or smaller % m.n_kv_heads == 0):
            assert not capacity(m, gpu, n_gpus=smaller, context_len=4096).fits


@settings(max_examples=200, deadline=None)
@given(budget=st.floats(0, 1e13), per_token=st.floats(1, 1e7),
       c1=st.integers(1, 2**17), c2=st.integers(1, 2**17))
def test_concurrency_never_rises_with_context(budget, per_token, c1, c2):
    lo, hi = sorted((c1, c2))
    assert max_concurrency(budget, per_token, hi) <= max_concurrency(budget, per_token, lo)


@settings(max_examples=100, deadline=None)
@given(ctx=st.integers(128, 65536), reserve=st.floats(0, 0.5))
def test_concurrency_never_rises_with_kv_heads(ctx, reserve):
    budget = kv_budget_bytes(NODE, weight_bytes(70e9), reserve)
    counts = [max_concurrency(budget, kv_bytes_per_token(L70.with_kv_heads(h)), ctx)
              for h in (1, 2, 4, 8, 16, 32, 64)]
    assert counts == sorted(counts, reverse=True)


@pytest.mark.parametrize("call,arg", [
    (lambda: weight_bytes(-1), "model"),
    (lambda: weight_bytes(70e9, 0), "bytes_per_param"),
    (lambda: weight_bytes(float("nan")), "model"),
    (lambda: kv_bytes_per_token(L70, bytes_per_elem=-2), "bytes_per_elem"),
    (lambda: kv_bytes_per_sequence(L70, 0), "context_len"),
    (lambda: kv_budget_bytes(0, 1), "total_bytes"),
    (lambda: kv_budget_bytes(NODE, -5), "weights_bytes"),
    (lambda: kv_budget_bytes(NODE, 1, reserve_fraction=1.0), "reserve_fraction"),
    (lambda: kv_budget_bytes(NODE, 1, reserve_fraction=10), "reserve_fraction"),
    (lambda: vllm_kv_budget_bytes(NODE, 1, gpu_memory_utilization=1.5), "gpu_memory_utilization"),
    (lambda: vllm_kv_budget_bytes(NODE, 1, gpu_memory_utilization=0), "gpu_memory_utilization"),
    (lambda: max_concurrency(-1, 1, 1), "kv_budget_bytes"),
    (lambda: max_concurrency(1, 0, 1), "kv_bytes_per_token"),
    (lambda: max_concurrency(1, 1, 0), "context_len"),
    (lambda: capacity(L70, "h100-sxm", n_gpus=8, tp_degree=3, context_len=8192), "tp_degree"),
    (lambda: min_tp_degree(L70, "h100-sxm", context_len=-1), "context_len"),
])
def test_bad_numbers_raise_value_error_naming_argument(call, arg):
    with pytest.raises(ValueError, match=arg):
        call()


@pytest.mark.parametrize("call,arg", [
    (lambda: weight_bytes("70B"), "model"),
    (lambda: max_concurrency(1, 1, 8192.5), "context_len"),
    (lambda: kv_bytes_per_token("llama-3-70b"), "model"),
    (lambda: kv_budget_bytes(NODE, 1, reserve_fraction=True), "reserve_fraction"),
])
def test_wrong_types_raise_type_error_naming_argument(call, arg):
    with pytest.raises(TypeError, match=arg):
        call()


def test_model_spec_rejects_bad_shapes():
    from servelib.models import ModelSpec
    base = dict(name="m", n_layers=1, n_heads=8, n_kv_heads=3, head_dim=8, hidden_size=64,
                intermediate_size=1, vocab_size=1, n_params=10, n_active_params=10)
    with pytest.raises(ValueError, match="n_kv_heads"):
        ModelSpec(**base)
    with pytest.raises(ValueError, match="n_layers"):
        ModelSpec(**{**base, "n_kv_heads": 8, "n_layers": 0})
    with pytest.raises(TypeError, match="head_dim"):
        ModelSpec(**{**base, "n_kv_heads": 8, "head_dim": "128"})
    assert math.isfinite(kv_bytes_per_token(get_model("falcon-7b")))


def test_valid_tp_degrees_split_attention_heads_and_replicate_kv_heads():
    from servelib.memory import valid_tp_degrees
    assert valid_tp_degrees(L70) == [1, 2, 4, 8, 16, 32, 64]          # 64 heads, 8 KV heads
    assert valid_tp_degrees(L70, max_tp=8) == [1, 2, 4, 8]
    assert valid_tp_degrees(get_model("falcon-7b")) == [1, 71]        # 71 heads, one KV head
    # Fewer KV heads than devices are replicated: MQA splits as far as its attention heads.
    assert valid_tp_degrees(L70.with_kv_heads(1)) == [1, 2, 4, 8, 16, 32, 64]
    assert valid_tp_degrees(get_model("deepseek-v3")) == [1, 2, 4, 8, 16, 32, 64, 128]


@pytest.mark.parametrize("name", ["llama-3-70b", "deepseek-v3", "falcon-7b", "gpt-oss-20b", "qwen3-next-80b-a3b"])
def test_every_tp_function_accepts_exactly_min_tp_degrees_candidates(name):
    # One rule: the degrees min_tp_degree may return are the ones capacity, the roofline and
    # the TP communication accept; any other degree raises, naming tp_degree.
    from servelib.memory import valid_tp_degrees
    from servelib.roofline import decode_step, predict_tpot_s, predict_ttft_s, tp_comm_time_s
    m = get_model(name)
    valid = set(valid_tp_degrees(m, max_tp=140))
    calls = (lambda tp: capacity(m, "h100-sxm", n_gpus=tp, context_len=1024),
             lambda tp: kv_bytes_per_sequence(m, 1024, tp_degree=tp),
             lambda tp: predict_tpot_s(m, "h100-sxm", 1, 100, tp_degree=tp),
             lambda tp: predict_ttft_s(m, "h100-sxm", 100, tp_degree=tp),
             lambda tp: decode_step(m, "h100-sxm", 1, 100, tp_degree=tp),
             lambda tp: tp_comm_time_s(m, "h100-sxm", 1, tp))
    for tp in range(1, 141):
        for call in calls:
            if tp in valid:
                call(tp)
            else:
                with pytest.raises(ValueError, match=rf"tp_degree \({tp}\) must split .* valid degrees: 1, "):
                    call(tp)


def test_capacity_default_tp_of_all_gpus_must_split_the_model():
    with pytest.raises(ValueError, match=r"tp_degree \(128\) must split llama-3-70b's 64 attention heads"):
        capacity(L70, "h100-sxm", n_gpus=128, context_len=8192)
    # Replicas of a valid degree are fine: 16 replicas of TP=8.
    assert capacity(L70, "h100-sxm", n_gpus=128, context_len=8192, tp_degree=8).replicas == 16


def test_max_concurrency_of_a_vanishing_kv_size_is_an_error_not_an_overflow():
    with pytest.raises(ValueError, match=r"kv_bytes_per_token \(1e-300\) is too small"):
        max_concurrency(1e9, 1e-300, 1)
    # A huge count is not rounded up by a whole sequence (the exact-fit slack used to add one).
    assert max_concurrency(1e9, 1e-3, 1) == 10**12
    assert max_concurrency(0.7, 0.1, 1) == 7              # 0.7 / 0.1 = 6.999999999999999: an exact fit
