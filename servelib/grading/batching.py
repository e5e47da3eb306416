"""Exercises of the chapter "Batching" (notebooks/04_batching.ipynb)."""
from ..hardware import ridge_point
from ..memory import capacity, kv_bytes_per_sequence, min_tp_degree, weight_bytes
from ..models import get_model
from ..roofline import critical_batch, decode_bytes_per_step, decode_intensity_limit, decode_tokens_per_s
from .registry import exercise

_DENSE = ("llama-3-70b", "llama-3-8b", "llama-2-70b", "llama-2-7b", "mistral-7b", "qwen2.5-7b")
_WORDS = {1: "one", 2: "two", 4: "four", 8: "eight"}


@exercise("bt-1", rtol=2e-3, unit="GB",
          vary={"model": _DENSE, "batch": tuple(range(8, 129, 8)), "context_len": (1024, 2048, 4096, 8192)},
          text="**bt-1.** {model} ({model.billions} billion parameters, {model.kv_kib_per_token} KiB of KV "
               "per token) decodes a batch of {batch} sequences at a {context_len:,}-token context on one "
               "(hypothetical) device that holds it all. How many GB ($10^9$ bytes) does one step read?")
def _decode_bytes_gb(model="llama-3-70b", batch=32, context_len=4096):
    m = get_model(model)
    return decode_bytes_per_step(weight_bytes(m), kv_bytes_per_sequence(m, context_len), batch) / 1e9


# One model only: the ceiling of this count is so sensitive that 7.24 or 7.62 billion
# parameters, as printed, lands one batch away from the exact counts of Mistral-7B or Qwen2.5-7B.
@exercise("bt-2", rtol=0, unit="sequences",
          vary={"gpu": ("h100-sxm", "a100-80gb", "a100-40gb", "h200", "l40s", "mi300x"),
                "context_len": (32, 64, 128, 192)},
          text="**bt-2.** At what batch size does decode of {model} ({model.billions} billion parameters, "
               "{model.kv_kib_per_token} KiB of KV per token, {model.n_layers} layers of {model.n_heads} query "
               "heads of size {model.head_dim}) at a {context_len:,}-token context turn compute-bound on an "
               "{gpu} (ridge {gpu.bf16_tflops}e12 / {gpu.tb_per_s}e12 FLOP/byte)? Count the weights' $2P$ and "
               "attention's $A = 4 L H d_\\text{{head}} \\cdot \\text{{context}}$ FLOPs per sequence. Give "
               "the smallest whole batch.")
def _critical_batch(model="llama-3-8b", gpu="h100-sxm", context_len=128):
    return critical_batch(get_model(model), ridge_point(gpu), context_len)


@exercise("bt-3", rtol=2e-3, unit="FLOP/byte",
          vary={"model": _DENSE, "context_len": (4096, 8192, 16_384, 32_768, 65_536, 131_072)},
          text="**bt-3.** What is the highest arithmetic intensity {model} ({model.billions} billion "
               "parameters; {model.n_layers} layers of {model.n_heads} query heads with `head_dim` "
               "{model.head_dim}; {model.kv_kib_per_token} KiB of KV per token in fp16) decode can reach, at "
               "any batch, with {context_len:,}-token contexts, attention's FLOPs included? (FLOP/byte)")
def _intensity_limit(model="llama-3-8b", context_len=32_768):
    return decode_intensity_limit(get_model(model), context_len)


@exercise("bt-4", rtol=0, unit="GPUs",
          vary={"gpu": ("a100-40gb", "a100-80gb", "l40s", "l4", "h100-sxm", "h200", "mi300x"),
                "context_len": (2048, 4096, 8192, 16_384, 32_768)},
          text="**bt-4.** What is the smallest TP degree that serves Llama-3-70B in fp16 on {gpu} cards "
               "({gpu.memory_gib} GiB) at {context_len:,}-token contexts, with a 10% reserve and at least one "
               "full sequence per device?")
def _min_tp_70b(gpu="a100-40gb", context_len=4096):
    return min_tp_degree(get_model("llama-3-70b"), gpu, context_len=context_len)


def _bt5_text(tp_degree, context_len):
    return (f"**bt-5.** On a node of 8 H100s (80 GiB), Llama-3-70B runs as {_WORDS[8 // tp_degree]} "
            f"TP={tp_degree} replica{'s' if tp_degree < 8 else ''} at {context_len // 1024}k contexts with a "
            f"10% reserve. How many conversations does the node hold?")


@exercise("bt-5", rtol=0, unit="sequences",
          vary={"tp_degree": (2, 4, 8), "context_len": (2048, 4096, 8192, 16_384, 32_768)}, text=_bt5_text)
def _concurrency_of_a_node(tp_degree=4, context_len=8192):
    return capacity(get_model("llama-3-70b"), "h100-sxm", n_gpus=8, context_len=context_len,
                    tp_degree=tp_degree).concurrency


@exercise("bt-6", rtol=1e-3, unit="tokens/s",
          vary={"gpu": ("h100-sxm", "a100-80gb", "h200", "h100-pcie", "mi300x"),
                "batch": (16, 32, 48, 64, 96), "context_len": (1024, 2048, 4096)},
          text="**bt-6.** Predict the decode throughput (tokens/s) of Llama-3-8B (8.03 billion parameters, "
               "128 KiB of KV per token) on one {gpu} ({gpu.bf16_tflops} dense bf16 TFLOP/s, {gpu.tb_per_s} "
               "TB/s) at a batch of {batch} and a {context_len:,}-token context.")
def _decode_throughput(gpu="h100-sxm", batch=64, context_len=2048):
    return decode_tokens_per_s(get_model("llama-3-8b"), gpu, batch, context_len)
