"""Exercises of the chapter "The KV cache and concurrency" (notebooks/03_kv_cache.ipynb)."""
from ..hardware import get_gpu
from ..memory import (capacity, kv_budget_bytes, kv_bytes_per_sequence, kv_bytes_per_token,
                      max_concurrency, min_tp_degree, vllm_kv_budget_bytes, weight_bytes)
from ..models import get_model
from ..units import GiB
from .registry import exercise


@exercise("kv-1", rtol=1e-9, unit="bytes")
def _kv_per_token_llama3_8b():
    return kv_bytes_per_token(get_model("llama-3-8b"))


@exercise("kv-2", rtol=1e-6, unit="GiB")
def _kv_32k_sequence_gib():
    return kv_bytes_per_sequence(get_model("llama-3-8b"), 32_768) / GiB


@exercise("kv-3", rtol=0, unit="sequences")
def _concurrency_llama2_7b_a100():
    m, gpu = get_model("llama-2-7b"), get_gpu("a100-80gb")
    return capacity(m, gpu, n_gpus=1, context_len=4096).concurrency


@exercise("kv-4", rtol=0, unit="sequences")
def _concurrency_qwen_l4_fp8_cache():
    m, gpu = get_model("qwen2.5-7b"), get_gpu("l4")
    budget = kv_budget_bytes(gpu.memory_bytes, weight_bytes(m, 2))
    return max_concurrency(budget, kv_bytes_per_token(m, bytes_per_elem=1), 8192)


@exercise("kv-5", rtol=0, unit="GPUs")
def _min_tp_llama3_70b_l40s():
    return min_tp_degree(get_model("llama-3-70b"), get_gpu("l40s"), context_len=8192)


@exercise("kv-6", rtol=0, unit="sequences")
def _vllm_convention_gap():
    m = get_model("llama-3-70b")
    per_token = kv_bytes_per_token(m)
    ours = max_concurrency(kv_budget_bytes(640 * GiB, weight_bytes(70e9)), per_token, 8192)
    vllm = max_concurrency(vllm_kv_budget_bytes(640 * GiB, weight_bytes(70e9)), per_token, 8192)
    return ours - vllm


@exercise("kv-7", rtol=0, unit="sequences",
          hints=((0.5, "that is every layer caching the whole context: half of this model's layers "
                       "keep only a window of the last tokens"),))
def _concurrency_mixed_layers(model="gpt-oss-20b", gpu="h100-sxm", context_len=131_072):
    # Sequences per device, with the cache summed layer by layer (windows capped).
    return capacity(get_model(model), get_gpu(gpu), n_gpus=1, context_len=context_len).concurrency
