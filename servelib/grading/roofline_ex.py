"""Exercises of the chapter "Arithmetic intensity and the roofline" (notebooks/02_roofline.ipynb)."""
from ..hardware import get_gpu, ridge_point
from ..models import get_model
from ..roofline import (attainable_flops, compute_utilization, decode_intensity, decode_tokens_per_s,
                        max_decode_batch)
from .registry import exercise


@exercise("rl-1", rtol=1e-3, unit="FLOP/byte")
def _ridge_a100():
    return ridge_point("a100-80gb", "bf16")


@exercise("rl-2", rtol=1e-3, unit="FLOP/byte")
def _ridge_t4_fp16():
    return ridge_point("t4", "fp16")


@exercise("rl-3", rtol=1e-3, unit="FLOP/byte")
def _batch1_intensity_llama3_8b():
    return decode_intensity(get_model("llama-3-8b"), 1, 4096)


@exercise("rl-4", rtol=1e-3, unit="(fraction)")
def _batch1_utilization_l4():
    return compute_utilization(decode_intensity(get_model("llama-3-8b"), 1, 4096), ridge_point("l4", "bf16"))


@exercise("rl-5", rtol=1e-6, unit="TFLOP/s")
def _attainable_at_50():
    gpu = get_gpu("h100-sxm")
    return attainable_flops(50, gpu.peak_flops("bf16"), gpu.hbm_bandwidth_Bps) / 1e12


@exercise("rl-6", rtol=1e-3, unit="x")
def _war_story_gain():
    m = get_model("llama-3-70b")
    batch = max_decode_batch(m, "h100-sxm", 2048, tp_degree=2)      # 41: all the KV memory holds
    return (decode_tokens_per_s(m, "h100-sxm", batch, 2048, tp_degree=2)
            / decode_tokens_per_s(m, "h100-sxm", 1, 2048, tp_degree=2))
