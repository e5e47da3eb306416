"""Exercises of the chapter "The KV cache and concurrency" (notebooks/03_kv_cache.ipynb)."""
from ..hardware import get_gpu
from ..memory import (capacity, kv_budget_bytes, kv_bytes_per_sequence, kv_bytes_per_token,
                      max_concurrency, min_tp_degree, vllm_kv_budget_bytes, weight_bytes)
from ..models import get_model
from ..units import GiB
from .registry import exercise

# Models whose statements give layers, KV heads and head_dim (several KV heads each).
_GQA_AND_MHA = ("llama-3-8b", "llama-2-7b", "mistral-7b", "qwen2.5-7b", "llama-3-70b", "llama-2-70b",
                "mixtral-8x7b")
_KV_BYTES = {"fp16": 2, "fp8": 1}


@exercise("kv-1", rtol=0, unit="bytes", vary={"model": _GQA_AND_MHA, "kv_dtype": tuple(_KV_BYTES)},
          text="**kv-1.** {model} has {model.n_layers} layers, {model.n_kv_heads} KV heads and `head_dim` "
               "{model.head_dim}. How many bytes of {kv_dtype} KV cache does one token need?")
def _kv_per_token(model="llama-3-8b", kv_dtype="fp16"):
    return kv_bytes_per_token(get_model(model), bytes_per_elem=_KV_BYTES[kv_dtype])


@exercise("kv-2", rtol=1e-3, unit="GiB",
          vary={"model": _GQA_AND_MHA, "context_len": (4096, 8192, 12_288, 16_384, 24_576, 32_768, 49_152,
                                                       65_536, 98_304, 131_072)},
          text="**kv-2.** For {model} ({model.n_layers} layers, {model.n_kv_heads} KV heads, `head_dim` "
               "{model.head_dim}), how many GiB of fp16 KV cache does one {context_len:,}-token sequence take?")
def _kv_sequence_gib(model="llama-3-8b", context_len=32_768):
    return kv_bytes_per_sequence(get_model(model), context_len) / GiB


@exercise("kv-3", rtol=0, unit="sequences",
          vary={"gpu": ("a100-80gb", "h100-sxm", "h200", "l40s", "a100-40gb", "mi300x"),
                "context_len": (1024, 2048, 3072, 4096, 6144, 8192)},
          text="**kv-3.** Llama-2-7B (MHA: 32 layers, 32 KV heads, `head_dim` 128, 6.74 billion parameters) "
               "is served in fp16 on one {gpu} ({gpu.memory_gib} GiB). With a 10% working reserve and "
               "{context_len:,}-token contexts, how many sequences fit at once?")
def _concurrency_llama2_7b(gpu="a100-80gb", context_len=4096):
    return capacity(get_model("llama-2-7b"), gpu, n_gpus=1, context_len=context_len).concurrency


@exercise("kv-4", rtol=0, unit="sequences",
          vary={"gpu": ("l4", "l40s", "a100-40gb"), "context_len": (2048, 4096, 8192, 16_384, 32_768)},
          text="**kv-4.** Qwen2.5-7B (28 layers, 4 KV heads, `head_dim` 128, 7.62 billion parameters) runs "
               "on one {gpu} ({gpu.memory_gib} GiB) with fp16 weights but an **fp8** KV cache (1 byte per "
               "element). With a 10% reserve and {context_len:,}-token contexts, how many sequences fit?")
def _concurrency_qwen_fp8_cache(gpu="l4", context_len=8192):
    m = get_model("qwen2.5-7b")
    budget = kv_budget_bytes(get_gpu(gpu).memory_bytes, weight_bytes(m, 2))
    return max_concurrency(budget, kv_bytes_per_token(m, bytes_per_elem=1), context_len)


@exercise("kv-5", rtol=0, unit="GPUs",
          vary={"gpu": ("l40s", "a100-40gb", "a100-80gb", "l4", "h100-sxm", "h200", "mi300x"),
                "context_len": (4096, 8192, 16_384, 32_768)},
          text="**kv-5.** Llama-3-70B (70.55 billion parameters in fp16; 320 KiB of fp16 KV cache per token, "
               "over 8 KV heads) is to be served on {gpu} cards ({gpu.memory_gib} GiB each) at "
               "{context_len:,}-token contexts with a 10% reserve. What is the smallest tensor parallel "
               "degree that fits weights plus one full sequence per device?")
def _min_tp_llama3_70b(gpu="l40s", context_len=8192):
    return min_tp_degree(get_model("llama-3-70b"), gpu, context_len=context_len)


def _kv6_text(n_gpus, context_len):
    return (f"**kv-6.** A node of {n_gpus} x 80 GiB GPUs serves a 70B model, counted as 70 billion fp16 "
            f"parameters, with 320 KiB of fp16 KV cache per token, at {context_len:,}-token contexts. How many "
            f"*more* sequences does the book's convention (a 10% reserve taken from what is left after the "
            f"weights) admit than vLLM's (`gpu_memory_utilization=0.9` of the total, no activation memory)?")


@exercise("kv-6", rtol=0, unit="sequences",
          vary={"n_gpus": (4, 8), "context_len": (2048, 4096, 8192, 16_384, 32_768)}, text=_kv6_text)
def _vllm_convention_gap(n_gpus=8, context_len=8192):
    per_token = kv_bytes_per_token(get_model("llama-3-70b"))
    total, weights = n_gpus * 80 * GiB, weight_bytes(70e9)
    ours = max_concurrency(kv_budget_bytes(total, weights), per_token, context_len)
    vllm = max_concurrency(vllm_kv_budget_bytes(total, weights), per_token, context_len)
    return ours - vllm


# kv-7's variants: the slip of caching the whole context in every layer must land within 1%
# of half the answer (its hint), floors included; these GPUs and contexts are those where it does.
@exercise("kv-7", rtol=0, unit="sequences",
          hints=((0.5, "that is every layer caching the whole context: half of this model's layers "
                       "keep only a window of the last tokens"),),
          vary={"gpu": ("h100-sxm", "b200"), "context_len": (49_152, 65_536, 98_304, 131_072)},
          text="**kv-7.** gpt-oss-20b has 24 layers with 8 KV heads of `head_dim` 64; every other layer "
               "(12 of them) attends only to the last 128 tokens, the other 12 to the whole context. It has "
               "20.91 billion parameters, served in bf16 on one {gpu} ({gpu.memory_gib} GiB) with fp16 KV, a "
               "10% reserve and {context_len:,}-token contexts. How many sequences fit at once?")
def _concurrency_mixed_layers(model="gpt-oss-20b", gpu="h100-sxm", context_len=131_072):
    # Sequences per device, with the cache summed layer by layer (windows capped).
    return capacity(get_model(model), get_gpu(gpu), n_gpus=1, context_len=context_len).concurrency
