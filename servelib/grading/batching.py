"""Exercises of the chapter "Batching" (notebooks/04_batching.ipynb)."""
from ..hardware import ridge_point
from ..memory import capacity, kv_bytes_per_sequence, min_tp_degree, weight_bytes
from ..models import get_model
from ..roofline import critical_batch, decode_bytes_per_step, decode_intensity_limit, decode_tokens_per_s
from .registry import exercise


@exercise("bt-1", rtol=1e-6, unit="GB")
def _decode_bytes_70b_b32():
    m = get_model("llama-3-70b")
    return decode_bytes_per_step(weight_bytes(m), kv_bytes_per_sequence(m, 4096), 32) / 1e9


@exercise("bt-2", rtol=0, unit="sequences")
def _critical_batch_8b_h100():
    return critical_batch(get_model("llama-3-8b"), ridge_point("h100-sxm"), 128)


@exercise("bt-3", rtol=1e-3, unit="FLOP/byte")
def _intensity_limit_32k():
    return decode_intensity_limit(get_model("llama-3-8b"), 32_768)


@exercise("bt-4", rtol=0, unit="GPUs")
def _min_tp_70b_a100_40():
    return min_tp_degree(get_model("llama-3-70b"), "a100-40gb", context_len=4096)


@exercise("bt-5", rtol=0, unit="sequences")
def _concurrency_tp4_node():
    return capacity(get_model("llama-3-70b"), "h100-sxm", n_gpus=8, context_len=8192, tp_degree=4).concurrency


@exercise("bt-6", rtol=1e-3, unit="tokens/s")
def _throughput_8b_b64():
    return decode_tokens_per_s(get_model("llama-3-8b"), "h100-sxm", 64, 2048)
