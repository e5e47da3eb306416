"""Exercises of the chapter "Precision and quantization" (notebooks/08_quantization.ipynb).

Each reference takes the exercise's inputs as keyword arguments, the book's values as
defaults, so that variants of an exercise can draw other models, GPUs and formats.
"""
from ..economics import H100_USD_PER_GPU_HOUR
from ..memory import capacity, min_tp_degree
from ..models import get_model
from ..precision import bytes_per_elem, bytes_per_param, effective_bytes_per_param, quantized_weight_bytes
from ..quantization import quantized_decode_speedup, quantized_replica
from ..units import GiB
from .registry import exercise


@exercise("quant-1", rtol=1e-9, unit="bytes per parameter")
def _int4_bytes_per_param(weights="int4-g32"):
    return bytes_per_param(weights)


@exercise("quant-2", rtol=1e-4, unit="GiB")
def _weights_gib(model="llama-3-70b", weights="int4-g32"):
    return quantized_weight_bytes(get_model(model), weights) / GiB


@exercise("quant-3", rtol=0, unit="sequences")
def _fp8_kv_concurrency(model="llama-3-70b", gpu="h100-sxm", n_gpus=2, context_len=8192, kv="fp8"):
    return capacity(get_model(model), gpu, n_gpus=n_gpus, context_len=context_len,
                    bytes_per_elem=bytes_per_elem(kv)).concurrency


@exercise("quant-4", rtol=0, unit="GPUs")
def _min_tp_quantized(model="llama-3-70b", gpu="l4", weights="int8", kv="fp8", context_len=8192):
    m = get_model(model)
    return min_tp_degree(m, gpu, effective_bytes_per_param(m, weights), context_len=context_len,
                         bytes_per_elem=bytes_per_elem(kv))


@exercise("quant-5", rtol=1e-3, unit="x")
def _decode_speedup(model="llama-3-8b", gpu="h100-sxm", weights="int4-g32", context_len=4096, batch=1):
    return quantized_decode_speedup(get_model(model), gpu, weights, batch=batch, context_len=context_len)


@exercise("quant-6", rtol=1e-3, unit="USD per 1M output tokens")
def _cost_per_token(model="llama-3-70b", gpu="h100-sxm", weights="int4-g32", kv="fp8", context_len=4096,
                    batch=64, usd_per_gpu_hour=H100_USD_PER_GPU_HOUR):
    return quantized_replica(get_model(model), gpu, weights, kv, context_len=context_len, batch=batch,
                             usd_per_gpu_hour=usd_per_gpu_hour).usd_per_1m_tokens
