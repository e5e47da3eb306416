"""Exercises of the chapter "Precision and quantization" (notebooks/08_quantization.ipynb).

Each reference takes the exercise's inputs as keyword arguments, the book's values as
defaults; ``vary`` and ``text`` declare the per-student variants (see
:mod:`servelib.grading.variants`). Statements print the bytes of each format and the
published bandwidth ratio of its kernel, so an answer can be worked from them by hand.
"""
from ..economics import H100_USD_PER_GPU_HOUR
from ..memory import capacity, kv_bytes_per_token, min_tp_degree
from ..models import get_model
from ..precision import Precision, bytes_per_elem, bytes_per_param, effective_bytes_per_param, quantized_weight_bytes
from ..quantization import assumed_bandwidth_ratio, quantized_decode_speedup, quantized_replica
from ..units import GiB, KiB
from .registry import exercise

# Dense models with a 16-bit embedding table a statement can describe by its two sizes.
_DENSE = ("llama-3-70b", "llama-3-8b", "llama-2-7b", "llama-2-70b", "mistral-7b", "qwen2.5-7b")
_LLAMA_3_70B = ("Llama-3-70B (70.55 billion parameters; vocabulary 128,256 and hidden size 8,192; "
                "80 layers, 8 KV heads of `head_dim` 128)")


def _bpp(weights: str) -> str:
    """Bytes per weight of a format as a statement prints it: "0.625 bytes", "1 byte"."""
    b = bytes_per_param(weights)
    return f"{b:.4g} byte{'' if b == 1 else 's'}"


def _ratio(weights: str) -> str:
    """The bandwidth ratio of a format's kernel as a statement prints it: 0.617."""
    return f"{assumed_bandwidth_ratio(weights):.3f}"


@exercise("quant-1", rtol=1e-3, unit="bytes per weight",
          vary={"bits": (2, 3, 4), "group_size": (32, 64, 128), "zero_bits": (16, 4)},
          text="**quant-1.** A {bits}-bit weight format keeps a 16-bit scale and a {zero_bits}-bit zero "
               "point for every group of {group_size} weights. How many bytes does one weight take?")
def _bytes_per_weight(bits=4, group_size=32, zero_bits=16):
    return Precision("grouped", bits, group_size, (16 + zero_bits) / 8).bytes_per_elem


def _quant2_text(model, weights):
    return (f"**quant-2.** {model} ({model.billions} billion parameters; vocabulary {model.vocab_size:,}, "
            f"hidden size {model.hidden_size:,}) is quantized to {weights} ({_bpp(weights)} per weight, "
            f"scales included), all but the embedding table, which stays in 16 bits. How many GiB do its "
            f"weights take?")


@exercise("quant-2", rtol=1e-3, unit="GiB", vary={"model": _DENSE, "weights": ("int4-g32", "int4-g128", "int8")},
          text=_quant2_text)
def _weights_gib(model="llama-3-70b", weights="int4-g32"):
    return quantized_weight_bytes(get_model(model), weights) / GiB


def _quant3_text(gpu, context_len, **_):
    return (f"**quant-3.** Llama-3-70B (70.55 billion parameters; 80 layers, 8 KV heads of `head_dim` 128) "
            f"in bf16 runs on two {gpu}s ({gpu.memory_gib} GiB each, TP=2) with a 10% reserve, at "
            f"{context_len:,}-token contexts, with an **fp8** KV cache (1 byte per element). How many "
            f"sequences fit?")


@exercise("quant-3", rtol=0, unit="sequences",
          vary={"gpu": ("h100-sxm", "a100-80gb", "h200", "mi300x"), "context_len": (4096, 8192, 16_384, 32_768)},
          text=_quant3_text)
def _fp8_kv_concurrency(model="llama-3-70b", gpu="h100-sxm", n_gpus=2, context_len=8192, kv="fp8"):
    return capacity(get_model(model), gpu, n_gpus=n_gpus, context_len=context_len,
                    bytes_per_elem=bytes_per_elem(kv)).concurrency


def _quant4_text(gpu, weights, context_len, **_):
    return (f"**quant-4.** {_LLAMA_3_70B} is to be served on {gpu} cards ({gpu.memory_gib} GiB) at "
            f"{context_len:,} tokens, with {weights} weights ({_bpp(weights)} per weight; the embedding "
            f"table stays in 16 bits) and an fp8 KV cache (1 byte per element), keeping a 10% reserve. What is "
            f"the smallest tensor-parallel degree (1, 2, 4 or 8) that holds the weights and one full sequence "
            f"per device?")


@exercise("quant-4", rtol=0, unit="GPUs",
          vary={"gpu": ("l4", "a100-40gb", "l40s", "a100-80gb"), "weights": ("int8", "int4-g32"),
                "context_len": (8192, 32_768)}, text=_quant4_text)
def _min_tp_quantized(model="llama-3-70b", gpu="l4", weights="int8", kv="fp8", context_len=8192):
    m = get_model(model)
    return min_tp_degree(m, gpu, effective_bytes_per_param(m, weights), context_len=context_len,
                         bytes_per_elem=bytes_per_elem(kv))


def _quant5_text(model, weights, context_len, **_):
    m = get_model(model.name)
    w16, wq = quantized_weight_bytes(m, "bf16") / 1e9, quantized_weight_bytes(m, weights) / 1e9
    return (f"**quant-5.** Predict the batch-1 decode speed-up of {weights} weights over bf16 for {model} on "
            f"one H100 SXM at {context_len:,} tokens of context. Its weights take {w16:.2f} GB in bf16 and "
            f"{wq:.2f} GB in {weights} (scales and the 16-bit embedding table included), its fp16 KV cache "
            f"{model.kv_kib_per_token} KiB per token, and the {weights} kernel streams the weights at "
            f"{_ratio(weights)} of the bandwidth the bf16 kernel reaches (gpt-fast's published ratio; the KV "
            f"reads keep the full bandwidth).")


@exercise("quant-5", rtol=2e-3, unit="x",
          vary={"model": ("llama-3-8b", "llama-2-7b", "mistral-7b", "qwen2.5-7b"), "weights": ("int4-g32", "int8"),
                "context_len": (1024, 4096, 16_384)}, text=_quant5_text)
def _decode_speedup(model="llama-3-8b", gpu="h100-sxm", weights="int4-g32", context_len=4096, batch=1):
    return quantized_decode_speedup(get_model(model), gpu, weights, batch=batch, context_len=context_len)


def _quant6_text(weights, kv, context_len, usd_per_gpu_hour, **_):
    m = get_model("llama-3-70b")
    wq = quantized_weight_bytes(m, weights) / 1e9
    kv_kib = kv_bytes_per_token(m, bytes_per_elem(kv)) / KiB
    article = "an" if kv.startswith("fp") else "a"
    return (f"**quant-6.** Llama-3-70B (70.55 billion parameters) with {weights} weights ({wq:.2f} GB, scales "
            f"and the 16-bit embedding table included) and {article} {kv} KV cache ({kv_kib:g} KiB per token) "
            f"runs on one H100 SXM (80 GiB, 3.35 TB/s, 989.5 dense bf16 TFLOP/s; TP=1) at "
            f"{context_len:,}-token contexts with a 10% reserve, decoding as many sequences as fit, up to 64; "
            f"its {weights} kernel streams the weights at {_ratio(weights)} of the bandwidth. At "
            f"\\${usd_per_gpu_hour:.2f} per GPU-hour, every hour spent decoding, what do a million output "
            f"tokens cost?")


@exercise("quant-6", rtol=2e-3, unit="USD per 1M output tokens",
          vary={"weights": ("int4-g32", "int8"), "kv": ("fp8", "bf16"), "context_len": (2048, 4096, 8192),
                "usd_per_gpu_hour": (2.0, H100_USD_PER_GPU_HOUR, 3.0, 3.5)}, text=_quant6_text)
def _cost_per_token(model="llama-3-70b", gpu="h100-sxm", weights="int4-g32", kv="fp8", context_len=4096,
                    batch=64, usd_per_gpu_hour=H100_USD_PER_GPU_HOUR):
    return quantized_replica(get_model(model), gpu, weights, kv, context_len=context_len, batch=batch,
                             usd_per_gpu_hour=usd_per_gpu_hour, tp_degree=1).usd_per_1m_tokens

