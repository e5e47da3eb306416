"""Number formats (servelib.precision) and what they buy (servelib.quantization)."""
import math

import pytest

from servelib.economics import H100_USD_PER_GPU_HOUR
from servelib.memory import capacity, weight_bytes
from servelib.models import get_model
from servelib.precision import (Precision, bytes_per_elem, bytes_per_param, effective_bytes_per_param,
                                get_precision, list_precisions, quantized_weight_bytes)
from servelib.published import GPT_FAST
from servelib.quantization import (PUBLISHED_PERPLEXITY, assumed_bandwidth_ratio, published_bandwidth_ratio,
                                   published_decode_speedup, quantized_decode_speedup, quantized_replica,
                                   quantized_tpot_s)
from servelib.roofline import predict_tpot_s
from servelib.units import GiB

L7, L70, L3_70, L3_8 = (get_model(n) for n in ("llama-2-7b", "llama-2-70b", "llama-3-70b", "llama-3-8b"))


def test_bytes_per_element_scales_included():
    assert [bytes_per_param(n) for n in list_precisions()] == [2, 2, 1, 1, 0.625, 0.51953125]
    # By hand: 4 bits + (2 + 2 bytes) / 32 and 4 bits + (2 + 0.5 bytes) / 128.
    assert bytes_per_param("int4-g32") == 0.5 + 4 / 32
    assert bytes_per_elem("int4-g128") == 0.5 + 2.5 / 128
    assert bytes_per_elem("fp8") == bytes_per_elem("bf16") / 2
    assert get_precision("INT4-G32 ") is get_precision("int4-g32")
    assert get_precision("int8").quantized and not get_precision("bf16").quantized


def test_weight_bytes_keep_the_embedding_in_16_bits():
    assert quantized_weight_bytes(L3_70, "bf16") == weight_bytes(L3_70, 2)
    table = L7.vocab_size * L7.hidden_size
    assert quantized_weight_bytes(L7, "int4-g32") == (L7.n_params - table) * 0.625 + table * 2
    assert quantized_weight_bytes(L7, "int8", embedding="int8") == weight_bytes(L7, 1)
    for w in list_precisions():
        assert effective_bytes_per_param(L3_70, w) * L3_70.n_params == pytest.approx(quantized_weight_bytes(L3_70, w))


@pytest.mark.parametrize("row", [r for r in GPT_FAST if r.tp_degree == 1 and r.tokens_per_s and r.gpu_preset],
                         ids=lambda r: f"{r.model}-{r.weights}")
def test_gpt_fast_bandwidth_column_from_quantized_bytes(row):
    # Independent check: gpt-fast's published bytes/s = tokens/s x its model's bytes; servelib's
    # count (layers quantized, scales included, embedding table in bf16) reproduces it.
    got = row.tokens_per_s * quantized_weight_bytes(get_model(row.model), row.weights) / 1e9
    assert got == pytest.approx(row.bandwidth_GBps, rel=0.012)


def test_published_ratios():
    assert published_bandwidth_ratio("int8") == pytest.approx(1069.20 / 1397.31)
    assert published_bandwidth_ratio("int4-g32") == pytest.approx(862.69 / 1397.31)
    assert published_bandwidth_ratio("bf16") == 1.0
    assert published_decode_speedup("int4-g32") == pytest.approx(196.80 / 104.9)
    assert assumed_bandwidth_ratio("fp8") == 1.0
    assert assumed_bandwidth_ratio("int4-g128") == published_bandwidth_ratio("int4-g32")
    with pytest.raises(ValueError, match="no published"):
        published_bandwidth_ratio("fp8")
    with pytest.raises(ValueError, match="no published"):
        published_decode_speedup("int4-g128")


def test_batch1_speedup_is_bytes_times_bandwidth():
    # At batch 1 and a 5-token context the weights are nearly all the bytes.
    bytes_ratio = quantized_weight_bytes(L7, "bf16") / quantized_weight_bytes(L7, "int4-g32")
    ideal = quantized_decode_speedup(L7, "a100-80gb", "int4-g32", context_len=5, bandwidth_ratio=1.0)
    assert ideal == pytest.approx(bytes_ratio, rel=0.01) and ideal < 4
    assert quantized_decode_speedup(L7, "a100-80gb", "int4-g32", context_len=5) == pytest.approx(
        published_decode_speedup("int4-g32"), rel=0.02)


def test_70b_speedup_predicted_from_the_7b_kernels():
    # Not used to build the ratios: gpt-fast's Llama-2-70B int8 and int4 rows on one A100.
    pub = {r.weights: r.tokens_per_s for r in GPT_FAST if r.model == "llama-2-70b" and r.tp_degree == 1
           and r.tokens_per_s}
    pred = (quantized_decode_speedup(L70, "a100-80gb", "int4-g32", context_len=5)
            / quantized_decode_speedup(L70, "a100-80gb", "int8", context_len=5))
    assert pred == pytest.approx(pub["int4-g32"] / pub["int8"], rel=0.03)


def test_speedup_falls_with_batch_and_a_slow_kernel_costs():
    kw = dict(context_len=4096)
    ups = [quantized_decode_speedup(L3_8, "h100-sxm", "int4-g32", batch=b, **kw) for b in (1, 8, 64, 512)]
    assert ups == sorted(ups, reverse=True)
    ideal = [quantized_decode_speedup(L3_8, "h100-sxm", "int4-g32", batch=b, bandwidth_ratio=1.0, **kw)
             for b in (1, 8, 64, 512)]
    assert all(i >= u for i, u in zip(ideal, ups)) and all(i >= 1 for i in ideal)
    assert quantized_tpot_s(L3_8, "h100-sxm", "bf16", batch=3, context_len=100) == predict_tpot_s(
        L3_8, "h100-sxm", 3, 100)


def test_replica_cost_tp2_to_tp1():
    kw = dict(context_len=4096, batch=64, usd_per_gpu_hour=H100_USD_PER_GPU_HOUR)
    bf16 = quantized_replica(L3_70, "h100-sxm", "bf16", "bf16", **kw)
    int8 = quantized_replica(L3_70, "h100-sxm", "int8", "bf16", **kw)
    int8_fp8 = quantized_replica(L3_70, "h100-sxm", "int8", "fp8", **kw)
    assert (bf16.tp_degree, int8.tp_degree, int8_fp8.tp_degree) == (2, 1, 1)
    # Half the bytes per sequence in the same budget: floor(2x) is 2 floor(x) or one more.
    assert int8_fp8.concurrency in (2 * int8.concurrency, 2 * int8.concurrency + 1)
    # Fits on one card, yet costs more per token than two cards: the batch shrank.
    assert int8.usd_per_1m_tokens > bf16.usd_per_1m_tokens > int8_fp8.usd_per_1m_tokens
    for r in (bf16, int8, int8_fp8):
        assert r.batch == min(64, r.concurrency)
        assert r.usd_per_1m_tokens == pytest.approx(H100_USD_PER_GPU_HOUR / 3600 / r.tokens_per_gpu_s * 1e6)
        assert r.tokens_per_gpu_s == pytest.approx(r.batch / r.tpot_s / r.tp_degree)


def test_fp8_cache_doubles_concurrency():
    c = {kv: capacity(L3_70, "h100-sxm", n_gpus=2, context_len=8192, bytes_per_elem=bytes_per_elem(kv)).concurrency
         for kv in ("bf16", "fp8")}
    assert c == {"bf16": 10, "fp8": 20}
    assert round(quantized_weight_bytes(L3_70, "int4-g32") / GiB, 1) == 42.4


def test_published_perplexity_is_the_awq_table():
    assert PUBLISHED_PERPLEXITY["llama-2-70b"]["fp16"] == 3.32
    assert PUBLISHED_PERPLEXITY["llama-2-7b"]["int4-g128 awq"] == 5.60
    for rows in PUBLISHED_PERPLEXITY.values():
        assert min(rows.values()) == rows["fp16"]


@pytest.mark.parametrize("call, err, match", [
    (lambda: get_precision("int3"), KeyError, "known: bf16"),
    (lambda: get_precision(4), TypeError, "precision"),
    (lambda: Precision("x", 0), ValueError, "bits"),
    (lambda: Precision("x", 4, None, 2.0), ValueError, "group_size"),
    (lambda: Precision("x", 4, 0, 2.0), ValueError, "group_size"),
    (lambda: quantized_weight_bytes("llama-3-8b", "int8"), TypeError, "model"),
    (lambda: quantized_tpot_s(L3_8, "h100-sxm", "int8", context_len=10, bandwidth_ratio=0), ValueError, "bandwidth_ratio"),
    (lambda: quantized_tpot_s(L3_8, "h100-sxm", "int8", context_len=10, bandwidth_ratio=1.5), ValueError, "bandwidth_ratio"),
    (lambda: quantized_replica(L3_70, "h100-sxm", context_len=8192, batch=1, usd_per_gpu_hour=-1), ValueError,
     "usd_per_gpu_hour"),
    (lambda: quantized_replica(L3_70, "h100-sxm", context_len=8192, batch=1, usd_per_gpu_hour=2, tp_degree=1),
     ValueError, "does not fit"),
])
def test_bad_input(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_no_nan_for_extreme_but_valid_inputs():
    assert math.isfinite(quantized_decode_speedup(L3_8, "t4", "int4-g128", batch=1, context_len=1, dtype="fp16"))
