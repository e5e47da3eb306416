"""Exercises of the chapter "Prefill and decode" (notebooks/01_prefill_decode.ipynb)."""
from ..models import get_model
from ..roofline import predict_tpot_s, predict_ttft_s, prefill_attention_flops, prefill_flops
from .registry import exercise


@exercise("pd-1", rtol=1e-6, unit="TFLOP")
def _prefill_tflop_llama3_8b():
    m = get_model("llama-3-8b")
    return prefill_flops(m.n_params, 2000) / 1e12


@exercise("pd-2", rtol=1e-3, unit="ms")
def _ttft_llama3_8b_h100():
    return predict_ttft_s(get_model("llama-3-8b"), "h100-sxm", 4096) * 1e3


@exercise("pd-3", rtol=1e-3, unit="ms")
def _tpot_llama3_8b_a100():
    return predict_tpot_s(get_model("llama-3-8b"), "a100-80gb", 1, 4096) * 1e3


@exercise("pd-4", rtol=1e-3, unit="decode steps")
def _prefill_in_decode_steps():
    m = get_model("llama-3-8b")
    return predict_ttft_s(m, "h100-sxm", 4096) / predict_tpot_s(m, "h100-sxm", 1, 4096)


@exercise("pd-5", rtol=1e-3, unit="(fraction)")
def _attention_share_8k():
    m = get_model("llama-3-8b")
    return prefill_attention_flops(m, 8192) / prefill_flops(m.n_params, 8192)


@exercise("pd-6", rtol=1e-3, unit="s")
def _end_to_end_latency_l4():
    m = get_model("llama-3-8b")
    return predict_ttft_s(m, "l4", 512) + 255 * predict_tpot_s(m, "l4", 1, 768)
