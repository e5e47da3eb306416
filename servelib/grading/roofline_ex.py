"""Exercises of the chapter "Arithmetic intensity and the roofline" (notebooks/02_roofline.ipynb)."""
from ..hardware import get_gpu, ridge_point
from ..models import get_model
from ..roofline import (attainable_flops, compute_utilization, decode_intensity, decode_tokens_per_s,
                        max_decode_batch)
from .registry import exercise

# GPUs a statement can call "an ..." and that have bf16 tensor cores.
_AN_BF16 = ("a100-80gb", "a100-40gb", "h100-sxm", "h100-pcie", "h200", "l4", "l40s", "mi300x")
_DENSE = ("llama-3-8b", "llama-2-7b", "mistral-7b", "qwen2.5-7b", "llama-3-70b")
_CONTEXTS = (1024, 2048, 4096, 8192, 16_384, 32_768)


@exercise("rl-1", rtol=1e-3, unit="FLOP/byte", vary={"gpu": _AN_BF16},
          text="**rl-1.** An {gpu} does {gpu.bf16_tflops} dense bf16 TFLOP/s and reads {gpu.gb_per_s} GB/s. "
               "What is its ridge point in FLOP/byte?")
def _ridge(gpu="a100-80gb"):
    return ridge_point(gpu, "bf16")


def _rl2_text(dtype):
    tflops = get_gpu("t4").flops[dtype] / 1e12
    return (f"**rl-2.** A T4 has no bf16 tensor cores; it does {tflops:g} dense {dtype} TFLOP/s and reads "
            f"320 GB/s. What is its {dtype} ridge point?")


@exercise("rl-2", rtol=1e-3, unit="FLOP/byte", vary={"dtype": ("fp16", "fp32")}, text=_rl2_text)
def _ridge_t4(dtype="fp16"):
    return ridge_point("t4", dtype)


@exercise("rl-3", rtol=1e-3, unit="FLOP/byte", vary={"model": _DENSE, "context_len": _CONTEXTS},
          text=r"**rl-3.** What is the arithmetic intensity of one decode step of {model} ({model.billions} "
               r"billion parameters, fp16 weights; KV cache {model.kv_kib_per_token} KiB per token in fp16; "
               r"{model.n_layers} layers of {model.n_heads} query heads of size {model.head_dim}) at batch 1 "
               r"and a context of {context_len:,} tokens? Count the weights' $2P$ FLOPs and attention's "
               r"$4 L H d_\text{{head}}$ FLOPs per token of context.")
def _batch1_intensity(model="llama-3-8b", context_len=4096):
    return decode_intensity(get_model(model), 1, context_len)


@exercise("rl-4", rtol=1e-3, unit="(fraction)", vary={"gpu": _AN_BF16, "context_len": _CONTEXTS},
          text="**rl-4.** What fraction of an {gpu}'s bf16 arithmetic ({gpu.bf16_tflops} TFLOP/s, "
               "{gpu.gb_per_s} GB/s) can a batch-1 decode step of Llama-3-8B (8.03 billion parameters, "
               "128 KiB of KV per token; 32 layers of 32 query heads of size 128) use at a context of "
               "{context_len:,} tokens, attention's FLOPs included? Answer as a fraction.")
def _batch1_utilization(gpu="l4", context_len=4096):
    return compute_utilization(decode_intensity(get_model("llama-3-8b"), 1, context_len), ridge_point(gpu, "bf16"))


@exercise("rl-5", rtol=1e-3, unit="TFLOP/s",
          vary={"gpu": _AN_BF16, "intensity": (5, 10, 20, 50, 100, 150, 200, 300, 400, 600)},
          text="**rl-5.** On an {gpu} ({gpu.bf16_tflops} TFLOP/s bf16, {gpu.tb_per_s} TB/s), what FLOP/s can a "
               "kernel of intensity {intensity} FLOP/byte attain at most? Answer in TFLOP/s.")
def _attainable_tflops(gpu="h100-sxm", intensity=50):
    spec = get_gpu(gpu)
    return attainable_flops(intensity, spec.peak_flops("bf16"), spec.hbm_bandwidth_Bps) / 1e12


@exercise("rl-6", rtol=1e-3, unit="x", vary={"context_len": (1024, 2048, 4096)},
          text="**rl-6.** The war story's replica serves Llama-3-70B (70.55 billion parameters; 320 KiB of "
               "KV cache per token, over 8 KV heads) in fp16 with TP=2 on two H100 SXM cards (80 GiB, "
               "989.5 dense bf16 TFLOP/s and 3.35 TB/s each), at {context_len:,}-token contexts with a 10% "
               "reserve. By what factor does the largest batch its KV memory holds raise its predicted "
               "decode tokens/s over batch 1? (Roofline, communication left out.)")
def _war_story_gain(context_len=2048):
    m = get_model("llama-3-70b")
    batch = max_decode_batch(m, "h100-sxm", context_len, tp_degree=2)      # 41 at 2,048: all the KV memory holds
    return (decode_tokens_per_s(m, "h100-sxm", batch, context_len, tp_degree=2)
            / decode_tokens_per_s(m, "h100-sxm", 1, context_len, tp_degree=2))
