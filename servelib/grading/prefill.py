"""Exercises of the chapter "Prefill and decode" (notebooks/01_prefill_decode.ipynb)."""
from ..models import get_model
from ..roofline import predict_tpot_s, predict_ttft_s, prefill_attention_flops, prefill_flops
from .registry import exercise

# Dense models whose statements give every figure the exercise needs.
_DENSE = ("llama-3-8b", "llama-2-7b", "mistral-7b", "qwen2.5-7b", "llama-3-70b")
# GPUs a statement can call "an ..." and that have bf16 tensor cores.
_AN_BF16 = ("h100-sxm", "a100-80gb", "a100-40gb", "h100-pcie", "h200", "l40s", "mi300x")


@exercise("pd-1", rtol=2e-3, unit="TFLOP",
          vary={"model": _DENSE, "prompt_len": tuple(range(1000, 8001, 500))},
          text="**pd-1.** {model} has {model.billions} billion parameters. How many TFLOP ($10^{{12}}$ FLOPs) "
               "does the prefill of a prompt of {prompt_len:,} tokens take, attention left out?")
def _prefill_tflop(model="llama-3-8b", prompt_len=2000):
    return prefill_flops(get_model(model).n_params, prompt_len) / 1e12


@exercise("pd-2", rtol=1e-3, unit="ms",
          vary={"gpu": _AN_BF16, "prompt_len": tuple(range(1024, 8193, 512))},
          text="**pd-2.** Predict the TTFT, in milliseconds, of one {prompt_len:,}-token prompt to Llama-3-8B "
               "(8.03 billion parameters, 128 KiB of KV cache per token) on an {gpu} ({gpu.bf16_tflops} dense "
               "bf16 TFLOP/s, {gpu.tb_per_s} TB/s), with an empty queue.")
def _ttft_ms(gpu="h100-sxm", prompt_len=4096):
    return predict_ttft_s(get_model("llama-3-8b"), gpu, prompt_len) * 1e3


@exercise("pd-3", rtol=1e-3, unit="ms",
          vary={"gpu": _AN_BF16 + ("l4",), "context_len": tuple(range(1024, 16_385, 1024))},
          text="**pd-3.** Predict the TPOT, in milliseconds, of Llama-3-8B (8.03 billion parameters, 128 KiB "
               "of KV cache per token) decoding one sequence at a context of {context_len:,} tokens on an {gpu} "
               "({gpu.gb_per_s} GB/s).")
def _tpot_ms(gpu="a100-80gb", context_len=4096):
    return predict_tpot_s(get_model("llama-3-8b"), gpu, 1, context_len) * 1e3


@exercise("pd-4", rtol=1e-3, unit="decode steps",
          vary={"gpu": _AN_BF16, "prompt_len": tuple(range(1024, 8193, 512))},
          text="**pd-4.** For Llama-3-8B (8.03 billion parameters, 128 KiB of KV cache per token) on an {gpu} "
               "({gpu.bf16_tflops} dense bf16 TFLOP/s, {gpu.tb_per_s} TB/s), how many batch-1 decode steps "
               "(context {prompt_len:,}) take as long as the prefill of a prompt of {prompt_len:,} tokens?")
def _prefill_in_decode_steps(gpu="h100-sxm", prompt_len=4096):
    m = get_model("llama-3-8b")
    return predict_ttft_s(m, gpu, prompt_len) / predict_tpot_s(m, gpu, 1, prompt_len)


@exercise("pd-5", rtol=2e-3, unit="(fraction)",
          vary={"model": _DENSE, "prompt_len": tuple(range(2048, 32_769, 2048))},
          text="**pd-5.** For {model} ({model.billions} billion parameters, {model.n_layers} layers, "
               "{model.n_heads} attention heads of size {model.head_dim}), what fraction of the $2PN$ FLOPs "
               "does causal attention add for a prompt of {prompt_len:,} tokens? Answer as a fraction.")
def _attention_share(model="llama-3-8b", prompt_len=8192):
    m = get_model(model)
    return prefill_attention_flops(m, prompt_len) / prefill_flops(m.n_params, prompt_len)


def _pd6_text(gpu, prompt_len, output_len):
    return (f"**pd-6.** A chatbot serves Llama-3-8B (8.03 billion parameters, 128 KiB of KV cache per "
            f"token) on one {gpu} ({gpu.gb_per_s} GB/s, {gpu.bf16_tflops} dense bf16 TFLOP/s) at batch 1. A {prompt_len:,}-token prompt gets a {output_len:,}-token "
            f"answer. Predict the end-to-end latency in seconds: TTFT plus {output_len - 1:,} decode steps, "
            f"each taken at the final context of {prompt_len + output_len:,} tokens (a slight overestimate).")


@exercise("pd-6", rtol=1e-3, unit="s",
          vary={"gpu": ("l4", "l40s", "a100-40gb", "a100-80gb", "h100-pcie"),
                "prompt_len": tuple(range(512, 2049, 256)), "output_len": (128, 192, 256, 320)},
          text=_pd6_text)
def _end_to_end_latency_s(gpu="l4", prompt_len=512, output_len=256):
    m = get_model("llama-3-8b")
    final = prompt_len + output_len
    return predict_ttft_s(m, gpu, prompt_len) + (output_len - 1) * predict_tpot_s(m, gpu, 1, final)
