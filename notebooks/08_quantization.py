# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     formats: py:percent
#     notebook_metadata_filter: kernelspec
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Precision and quantization
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-serving-book/serving-capacity-economics/blob/v0.1.0/notebooks/08_quantization.ipynb)
#
# Every byte the earlier chapters counted was a 16-bit number. Storing weights or the
# {term}`KV cache` in fewer bits is the lever serving teams pull first: it shrinks what must
# fit in memory and what every decode step must read. This chapter counts what each format
# costs in bytes (the scales included), follows those bytes through the memory and roofline
# arithmetic of the earlier chapters, and shows why the gains are smaller than the bit
# counts suggest: 4-bit weights do not decode four times as fast. It then prices the most
# common decision, quantizing a model until it fits on one GPU instead of two, and
# measures an 8-bit matrix-vector product against a 16-bit one on your machine.
#
# **You will be able to**
# 1. compute the bytes per element of a format, its group scales included, and the weights, KV cache, concurrency and decode bytes it gives;
# 2. explain why {term}`weight-only quantization <Weight-only quantization>` to int4 decodes well under 4x faster, with published figures;
# 3. show that an {term}`FP8` KV cache doubles concurrency, and say when quantization turns a TP=2 deployment into TP=1;
# 4. price a token at each precision with the self-hosting cost model, and see why "fits on one card" is not "half the cost";
# 5. measure a weight-only int8 matrix-vector product against 16 bits on this machine, beside the prediction.

# %% tags=["hide-input"]
# Set-up. On Colab this installs servelib from the book's repository; elsewhere it is
# already installed (README). Then it reports the device that measurements will use.
import importlib.util
import re
import subprocess
import sys

RELEASE = "v0.1.0"  # the book's release, written by scripts/release.py
REPO = "https://github.com/llm-serving-book/serving-capacity-economics"
if "google.colab" in sys.modules and importlib.util.find_spec("servelib") is None:
    package = f"servelib @ git+{REPO}@{RELEASE}"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", package],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        class InstallFailed(Exception):
            def _render_traceback_(self):  # Jupyter shows the sentence, not a traceback
                return [str(self)]
        log = re.sub(r"\x1b\[[0-9;]*m", "", pip.stderr)       # pip colours its messages
        found = re.findall(r"(?:fatal|ERROR): (.*)", log)      # its first complaint
        reason = found[0].strip() if found else "see pip's log"
        raise InstallFailed(f"Installing {package} failed ({reason}): check that this "
                            "runtime is online, then run this cell again.")

from servelib.measure import pick_device

DEVICE = pick_device()
print(f"measuring on {DEVICE}")

# %% tags=["hide-input"]
from servelib import plots
from servelib.audit import audit
from servelib.audit.examples import mistake_plans
from servelib.book import glue, table
from servelib.economics import H100_USD_PER_GPU_HOUR
from servelib.grading import check
from servelib.hardware import get_gpu
from servelib.measure.quant import time_weight_only_gemv
from servelib.memory import (capacity, kv_bytes_per_sequence, kv_bytes_per_token,
                             min_tp_degree, weight_bytes)
from servelib.models import get_model
from servelib.precision import (bytes_per_elem, bytes_per_param,
                                effective_bytes_per_param, get_precision,
                                list_precisions, quantized_weight_bytes)
from servelib.published import published_decode
from servelib.quantization import (PUBLISHED_PERPLEXITY, PUBLISHED_PERPLEXITY_SOURCE,
                                   assumed_bandwidth_ratio, published_bandwidth_ratio,
                                   published_decode_speedup, quantized_decode_speedup,
                                   quantized_replica)
from servelib.roofline import decode_bytes_per_step
from servelib.units import GiB, fmt_bytes

plots.apply_style()
llama70, llama8 = get_model("llama-3-70b"), get_model("llama-3-8b")
h100 = get_gpu("h100-sxm")

# %% [markdown]
# ## Bytes per element, scales included
#
# A quantized tensor keeps each element in $q$ bits and, for every group of $G$ elements,
# the numbers that map those bits back to values: a scale $s$ and often a zero point $z$,
# so that an element is $s \cdot (x_q - z)$. With $S$ bytes of scale and zero point per
# group, one element costs
#
# $$
# b = \frac{q}{8} + \frac{S}{G} \quad \text{bytes}.
# $$
#
# Small groups follow the weights' local range closely (better quality) and cost more bytes.
# Formats with one scale per tensor (fp8) or per row of thousands of weights (int8 per
# channel) add so little that it is not counted. The formats `servelib.precision` knows:

# %%
# NBVAL_CHECK_OUTPUT
rows = []
for name in list_precisions():
    p = get_precision(name)
    rows.append((p.name, p.bits, p.group_size or "-", f"{p.group_bytes:g}",
                 p.bytes_per_elem, p.description))
print(table(rows, ["format", "bits", "group", "scale+zero B", "bytes/elem", "layout"],
            ["", "d", "", "", ".4f", ""]))
assert bytes_per_param("int4-g32") == 4 / 8 + 4 / 32       # 4 bits + 4 bytes per 32

# %% tags=["remove-cell"]
assert bytes_per_param("int4-g128") == 0.51953125
glue("q_g32", f"{bytes_per_param('int4-g32'):.3f}")
glue("q_g32_bits", f"{bytes_per_param('int4-g32') * 8:.0f}")
glue("q_g128", f"{bytes_per_param('int4-g128'):.3f}")

# %% [markdown]
# gpt-fast's int4 format {cite}`gptfast2023` keeps a 16-bit scale and a 16-bit zero point
# for every 32 weights: {glue:text}`q_g32` bytes per weight, {glue:text}`q_g32_bits` bits
# rather than 4. The AWQ and GPTQ checkpoints {cite}`lin2024awq,frantar2023gptq` use groups
# of 128 with a 4-bit zero point: {glue:text}`q_g128` bytes.
#
# ## Weights, KV cache and decode bytes at each precision
#
# Quantization tools replace the linear layers, the LM head among them, and leave the
# embedding table in 16 bits: it is looked up, not multiplied. So the model's bytes are
#
# $$
# W = (P - V h)\, b_{w} + V h \cdot 2 ,
# $$
#
# with $V h$ the vocabulary times the hidden size. The KV cache has its own format, $b_{kv}$
# bytes per element in $2 L H_{kv} d_\text{head} b_{kv}$. One decode step reads
# $W + B \cdot \text{KV}(\text{context})$, as in the batching chapter. For Llama-3-70B at
# 8,192 tokens of context:

# %%
# NBVAL_CHECK_OUTPUT
ctx = 8192
kv_seq = kv_bytes_per_sequence(llama70, ctx)
rows, w_gib, tp_min = [], {}, {}
for name in ("bf16", "fp8", "int8", "int4-g32", "int4-g128"):
    w = quantized_weight_bytes(llama70, name)
    bpp = effective_bytes_per_param(llama70, name)
    w_gib[name] = w / GiB
    tp_min[name] = min_tp_degree(llama70, h100, bpp, context_len=ctx)
    step1, step32 = (decode_bytes_per_step(w, kv_seq, b) for b in (1, 32))
    rows.append((name, w / GiB, bpp, tp_min[name], fmt_bytes(step1), fmt_bytes(step32)))
print(table(rows, ["weights", "GiB", "B/param", "min TP (H100)", "step bytes, batch 1",
                   "batch 32"], ["", ".1f", ".3f", "d", "", ""]))
for kv in ("bf16", "fp8"):
    per_token = kv_bytes_per_token(llama70, bytes_per_elem(kv))
    per_seq = kv_bytes_per_sequence(llama70, ctx, bytes_per_elem(kv))
    print(f"KV cache in {kv}: {fmt_bytes(per_token)} per token, "
          f"{fmt_bytes(per_seq)} per {ctx:,}-token sequence")
assert (tp_min["bf16"], tp_min["int8"], tp_min["int4-g32"]) == (2, 1, 1)
assert w_gib["bf16"] / w_gib["int4-g32"] < 4                  # not four times smaller

# %% tags=["remove-cell"]
assert round(w_gib["bf16"] / w_gib["int4-g32"], 2) == 3.10
glue("w70_bf16", f"{w_gib['bf16']:.0f} GiB")
glue("w70_int8", f"{w_gib['int8']:.0f} GiB")
glue("w70_int4", f"{w_gib['int4-g32']:.0f} GiB")
glue("w70_int4_ratio", f"{w_gib['bf16'] / w_gib['int4-g32']:.2f}")

# %% [markdown]
# 4-bit weights are {glue:text}`w70_int4_ratio` times smaller than 16-bit ones, not four:
# the scales and the 16-bit embedding table stay. (The minimum TP column keeps the KV
# cache in bf16 and one full sequence per device.) At batch 1 the weights are nearly all
# of a step's bytes; at batch 32 the KV reads, which weight quantization does not touch,
# are already most of them.
#
# ## An fp8 KV cache doubles concurrency
#
# Concurrency is the KV budget over the bytes of one sequence. Halve the bytes per KV
# element and, with the weights unchanged, the same budget holds twice the sequences. fp8
# (E4M3, {cite}`micikevicius2022fp8`) is the format serving engines offer for the cache
# (vLLM's `kv_cache_dtype="fp8"`). Llama-3-70B in bf16 on two H100s, at 8,192 tokens:

# %%
# NBVAL_CHECK_OUTPUT
conc = {kv: capacity(llama70, h100, n_gpus=2, context_len=ctx,
                     bytes_per_elem=bytes_per_elem(kv)).concurrency
        for kv in ("bf16", "fp8")}
for kv, c in conc.items():
    print(f"KV cache in {kv:<5}: {c} sequences of {ctx:,} tokens on 2 x H100 (TP=2)")
assert conc["fp8"] == 2 * conc["bf16"]

# %% tags=["remove-cell"]
assert conc == {"bf16": 10, "fp8": 20}
glue("conc_bf16", conc["bf16"])
glue("conc_fp8", conc["fp8"])

# %% [markdown]
# {glue:text}`conc_bf16` sequences become {glue:text}`conc_fp8`. Nothing else in this
# chapter moves concurrency that directly; like the count of KV heads, it acts on the bytes
# of every token of every sequence.

# %%
contexts = [2**k for k in range(10, 16)]
fig, ax = plots.new_axes("context length (tokens)", "concurrent sequences",
                         "Llama-3-70B on 2 x H100 (TP=2), 10% reserve",
                         logx=True, logy=True)
for w, kv in (("bf16", "bf16"), ("bf16", "fp8"), ("int8", "bf16"), ("int8", "fp8")):
    ys = [capacity(llama70, h100, n_gpus=2, context_len=c,
                   bytes_per_param=effective_bytes_per_param(llama70, w),
                   bytes_per_elem=bytes_per_elem(kv)).concurrency for c in contexts]
    ax.plot(contexts, [max(y, 0.5) for y in ys], marker="o",
            label=f"weights {w}, KV {kv}")
plots.legend(fig)

# %% [markdown]
# *Figure: concurrent sequences against context length for four format choices on the
# same two GPUs. Notice that an fp8 cache doubles every point of its line, while int8
# weights add the memory the weights gave back, the same bytes at every context: many
# sequences at short contexts, few at long ones.*
#
# ## Why int4 weights do not decode four times as fast
#
# At batch 1 a decode step reads the weights once and does little else, so its time is
# about $W / \text{bandwidth}$. Quantizing the weights therefore speeds decode up by
#
# $$
# \text{speed-up} = \frac{W_{16}}{W_{q}} \times
# \frac{\text{achieved bandwidth}_{q}}{\text{achieved bandwidth}_{16}} .
# $$
#
# The first factor is below the bit ratio (scales, the embedding table). The second is below
# one: a weight-only kernel must unpack every weight and rescale it before multiplying, and
# that extra work keeps it from streaming memory as fast as a plain 16-bit product.
# gpt-fast published both for Llama-2-7B on one A100 at batch 1 {cite}`gptfast2023`; its
# "memory bandwidth" column is bytes of weights per second, which servelib's byte count
# reproduces (labelled *published*: measured by others, on their hardware):

# %%
# NBVAL_CHECK_OUTPUT
llama2_7b = get_model("llama-2-7b")
print("published, gpt-fast, Llama-2-7B, one A100-80GB at 330 W, batch 1:")
rows = []
for name in ("bf16", "int8", "int4-g32"):
    row = published_decode("llama-2-7b", weights=name, tp_degree=1)[0]
    w = quantized_weight_bytes(llama2_7b, name)
    byte_ratio = quantized_weight_bytes(llama2_7b, "bf16") / w
    bw = published_bandwidth_ratio(name)
    rows.append((name, row.tokens_per_s, w / 1e9, row.tokens_per_s * w / 1e9,
                 row.bandwidth_GBps, byte_ratio, bw, byte_ratio * bw,
                 published_decode_speedup(name)))
print(table(rows, ["weights", "tokens/s", "GB/token", "x tokens/s", "(published)",
                   "bytes", "bw", "product", "speed-up"],
            ["", ".1f", ".2f", ".0f", ".0f", ".2f", ".2f", ".2f", ".2f"]))
print("(GB/token x tokens/s = GB/s read; bytes, bw: ratios over bf16)")
int4_bytes = rows[2][5]
assert abs(int4_bytes * published_bandwidth_ratio("int4-g32")
           - published_decode_speedup("int4-g32")) < 0.02

# %% tags=["remove-cell"]
assert round(int4_bytes, 2) == 3.07
assert round(published_bandwidth_ratio("int4-g32"), 2) == 0.62
assert round(published_decode_speedup("int4-g32"), 2) == 1.88
glue("g_bytes_int4", f"{int4_bytes:.2f}")
glue("g_bw_int4", f"{published_bandwidth_ratio('int4-g32'):.0%}")
glue("g_bw_int8", f"{published_bandwidth_ratio('int8'):.0%}")
glue("g_speed_int4", f"{published_decode_speedup('int4-g32'):.2f}")
glue("g_speed_int8", f"{published_decode_speedup('int8'):.2f}")

# %% [markdown]
# The bytes fell {glue:text}`g_bytes_int4` times; the kernel streamed them at
# {glue:text}`g_bw_int4` of the bf16 kernel's rate (int8: {glue:text}`g_bw_int8`); the
# product is the published speed-up, {glue:text}`g_speed_int4`x (int8:
# {glue:text}`g_speed_int8`x). The table is consistent with itself by construction, so hold
# it against figures it was not built from: gpt-fast's Llama-2-70B rows. Predicting the
# 70B model's int8-to-int4 speed-up from the 7B kernels' bandwidth ratios:

# %%
# NBVAL_CHECK_OUTPUT
llama2_70b = get_model("llama-2-70b")
pub = {w: published_decode("llama-2-70b", weights=w, tp_degree=1)[0].tokens_per_s
       for w in ("int8", "int4-g32")}
pred = (quantized_decode_speedup(llama2_70b, "a100-80gb", "int4-g32", context_len=5)
        / quantized_decode_speedup(llama2_70b, "a100-80gb", "int8", context_len=5))
print(f"Llama-2-70B on one A100, int4-g32 over int8: predicted {pred:.2f}x, published "
      f"{pub['int4-g32'] / pub['int8']:.2f}x "
      f"({pub['int4-g32']} vs {pub['int8']} tokens/s)")
assert abs(pred / (pub["int4-g32"] / pub["int8"]) - 1) < 0.03

# %% [markdown]
# Within a few percent. As the batch grows, the weights' share of a step's bytes shrinks
# (the KV reads grow) and then the step turns compute-bound, where fewer bytes buy nothing:
# weight-only formats multiply in 16 bits after unpacking. The ceiling (an ideal kernel at
# full bandwidth) and the estimate with gpt-fast's achieved bandwidth, for Llama-3-8B on one
# H100 at 4,096 tokens:

# %%
batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
fig, ax = plots.new_axes("batch size", "decode speed-up over bf16 (x)",
                         "Llama-3-8B, one H100 SXM, 4,096-token context", logx=True)
for name in ("int8", "int4-g32"):
    ideal = [quantized_decode_speedup(llama8, h100, name, batch=b, context_len=4096,
                                      bandwidth_ratio=1.0) for b in batches]
    likely = [quantized_decode_speedup(llama8, h100, name, batch=b, context_len=4096)
              for b in batches]
    (line,) = ax.plot(batches, ideal, "--", label=f"{name}: ideal kernel")
    ax.plot(batches, likely, "o-", color=line.get_color(),
            label=f"{name}: at {assumed_bandwidth_ratio(name):.0%} of the bandwidth")
ax.axhline(1, color="grey", lw=0.8)
plots.legend(fig, ncols=2)

# %% tags=["remove-cell"]
sp = {b: quantized_decode_speedup(llama8, h100, "int4-g32", batch=b, context_len=4096)
      for b in (1, 64)}
sp_ideal = quantized_decode_speedup(llama8, h100, "int4-g32", batch=1, context_len=4096,
                                    bandwidth_ratio=1.0)
assert sp_ideal < 3
glue("sp_ideal_b1", f"{sp_ideal:.2f}")
glue("sp_b1", f"{sp[1]:.2f}")
glue("sp_b64", f"{sp[64]:.2f}")

# %% [markdown]
# *Figure: predicted decode speed-up of int8 and int4-g32 weights over bf16 against batch
# size, for an ideal kernel (dashed) and one at the bandwidth ratio gpt-fast published
# (points). Notice that even the ideal int4 kernel starts below 3x, not at 4x, and that
# every curve falls towards 1 as the KV reads and then the arithmetic take over: at a
# hundred sequences and more the format hardly matters to speed.*
#
# With the published bandwidth ratio, int4 gives {glue:text}`sp_b1`x at batch 1 and
# {glue:text}`sp_b64`x at batch 64; the ideal kernel, {glue:text}`sp_ideal_b1`x at batch 1.
#
# ## Measure: weight-only int8 against 16 bits on this machine
#
# Decode multiplies one activation row by every weight matrix. Below, a stack of square
# matrices far larger than any cache stands in for a model's layers, once in the device's
# 16-bit dtype and once in int8 with one scale per row; one token passes through all of
# them. The int8 product is PyTorch's own weight-only kernel where the device has one
# (`torch.ops.aten._weight_int8pack_mm`, the kernel gpt-fast's int8 mode runs on a CPU),
# else dequantize-then-multiply. Each time is printed beside the prediction for a
# memory-bound pass: its bytes over the copy bandwidth measured now. The two passes are timed
# in turn, three times over, and the medians kept. Not checked: the numbers depend on the
# machine and on what else it is running.

# %%
gemv = time_weight_only_gemv(DEVICE)
print(f"measured on {gemv.device}: {gemv.n_matrices} matrices of {gemv.size} x "
      f"{gemv.size}, batch 1, copy bandwidth {gemv.copy_bandwidth_Bps / 1e9:.1f} GB/s")
rows = [(t.weights, t.kernel, t.weight_bytes / 2**20, t.step_s * 1e3,
         t.bytes_per_s / 1e9, t.tokens_per_s, t.predicted_step_s * 1e3,
         t.predicted_tokens_per_s)
        for t in (gemv.wide, gemv.int8)]
print(table(rows, ["weights", "kernel", "MiB", "ms", "GB/s", "tokens/s", "predicted ms",
                   "predicted tokens/s"],
            ["", "", ".0f", ".2f", ".1f", ".1f", ".2f", ".1f"]))
print(f"bytes {gemv.byte_ratio:.2f}x fewer; measured speed-up {gemv.speedup:.2f}x; the "
      f"int8 kernel reached {gemv.bandwidth_ratio:.0%} of the 16-bit kernel's bytes/s")
# What these rates mean for a real model here: Llama-3-8B's weights read at each rate.
for t, name in ((gemv.wide, "bf16"), (gemv.int8, "int8")):
    rate = t.bytes_per_s / quantized_weight_bytes(llama8, name)
    print(f"Llama-3-8B with {name} weights at {t.bytes_per_s / 1e9:.1f} GB/s: "
          f"{rate:.3g} tokens/s (batch 1)")
assert gemv.byte_ratio > 1.99
glue("live_speedup", f"{gemv.speedup:.2f}")
glue("live_bw", f"{gemv.bandwidth_ratio:.0%}")
glue("live_kernel", gemv.int8.kernel)

# %%
fig, ax = plots.new_axes("", "tokens/s through the stack",
                         f"batch-1 pass, {gemv.device}")
xs = range(2)
ax.bar([x - 0.2 for x in xs], [gemv.wide.predicted_tokens_per_s,
                               gemv.int8.predicted_tokens_per_s], 0.4,
       label="predicted (bytes / copy bandwidth)")
ax.bar([x + 0.2 for x in xs], [gemv.wide.tokens_per_s, gemv.int8.tokens_per_s], 0.4,
       label="measured")
ax.set_xticks(list(xs), [f"{gemv.wide.weights} weights", "int8 weights"])
plots.legend(fig)

# %% [markdown]
# *Figure: tokens per second through the stack of matrices, predicted from the copy
# bandwidth and measured. Notice whether the measured int8 bar rises above the measured
# 16-bit bar as far as the predicted one does: the prediction doubles the rate, and only a
# kernel that streams int8 weights as fast as 16-bit ones would deliver that.*
#
# On the machine that ran this page the int8 pass ran {glue:text}`live_speedup` times as
# fast as the 16-bit one (kernel: {glue:text}`live_kernel`), streaming bytes at
# {glue:text}`live_bw` of the 16-bit kernel's rate. Set that beside the byte ratio of 2 and
# beside gpt-fast's A100, where halving the bytes bought {glue:text}`g_speed_int8`x. On a
# shared, busy machine the timings move from run to run; the byte ratio does not.
#
# ## From TP=2 to TP=1: what a token costs
#
# Llama-3-70B in bf16 needs two H100s. In int8 or int4 its weights fit on one, and it is
# tempting to conclude that each token now costs half. The self-hosting cost model of the
# economics chapter says what happens: one replica at the smallest TP degree that holds it,
# decoding the largest batch (up to 64) that its KV budget allows at 4,096 tokens, rented at
# the economics chapter's H100 price, every GPU-hour spent decoding (so these are floors:
# real utilisation is lower). Speeds use the achieved-bandwidth ratios above.

# %%
# NBVAL_CHECK_OUTPUT
print(f"Llama-3-70B on H100 SXM at ${H100_USD_PER_GPU_HOUR:.2f}/GPU-hour, "
      "4,096-token context, batch up to 64")
options, rows = {}, []
for w, kv in (("bf16", "bf16"), ("int8", "bf16"), ("int8", "fp8"), ("int4-g32", "bf16"),
              ("int4-g32", "fp8")):
    r = options[w, kv] = quantized_replica(
        llama70, h100, w, kv, context_len=4096, batch=64,
        usd_per_gpu_hour=H100_USD_PER_GPU_HOUR)
    rows.append((w, kv, r.tp_degree, fmt_bytes(r.weights_bytes_per_gpu), r.concurrency,
                 r.tpot_s * 1e3, r.tokens_per_gpu_s, r.usd_per_1m_tokens))
print(table(rows, ["weights", "KV", "TP", "weights/GPU", "sequences", "TPOT ms",
                   "tokens/GPU-s", "$ per 1M out"],
            ["", "", "d", "", "d", ".1f", ".0f", ".2f"]))
base16, int8_only = options["bf16", "bf16"], options["int8", "bf16"]
int8_fp8 = options["int8", "fp8"]
assert (base16.tp_degree, int8_only.tp_degree) == (2, 1)
usd = {k: r.usd_per_1m_tokens for k, r in options.items()}
assert usd["int8", "bf16"] > usd["bf16", "bf16"] > usd["int8", "fp8"]

# %% tags=["remove-cell"]
glue("c_bf16", f"${base16.usd_per_1m_tokens:.2f}")
glue("c_int8", f"${int8_only.usd_per_1m_tokens:.2f}")
glue("c_int8fp8", f"${int8_fp8.usd_per_1m_tokens:.2f}")
glue("c_int4fp8", f"${options['int4-g32', 'fp8'].usd_per_1m_tokens:.2f}")
glue("n_bf16", base16.concurrency)
glue("n_int8", int8_only.concurrency)

# %% [markdown]
# The int8 model on one GPU costs {glue:text}`c_int8` per million output tokens, more than
# the bf16 model on two ({glue:text}`c_bf16`). Its weights fill the card and leave room for
# {glue:text}`n_int8` sequences, against {glue:text}`n_bf16` on the pair: half the GPUs, but a
# smaller batch and a slower kernel. An fp8 cache restores the batch
# ({glue:text}`c_int8fp8`), and int4 weights with an fp8 cache leave the most room of all
# ({glue:text}`c_int4fp8`). Dropping a TP degree pays only when the memory it frees
# leaves room for a batch; the weights are only half of the question.
#
# ## Quality: what the bits cost
#
# Fewer bits lose information, and how much that matters depends on the model, the method
# and the task. A widely cited published comparison, AWQ's Table 4 {cite}`lin2024awq`,
# measured the perplexity of Llama-2 on WikiText-2 (lower is better):

# %%
# NBVAL_CHECK_OUTPUT
print(f"published: {PUBLISHED_PERPLEXITY_SOURCE}")
methods = list(PUBLISHED_PERPLEXITY["llama-2-7b"])
rows = [[model] + [ppl[m] for m in methods]
        for model, ppl in PUBLISHED_PERPLEXITY.items()]
print(table(rows, ["model"] + methods, [""] + [".2f"] * len(methods)))
p7, p70 = PUBLISHED_PERPLEXITY["llama-2-7b"], PUBLISHED_PERPLEXITY["llama-2-70b"]
assert p70["int4-g128 awq"] - p70["fp16"] < p7["int4-g128 awq"] - p7["fp16"]

# %% tags=["remove-cell"]
assert (p70["fp16"], p70["int4-g128 awq"], p7["fp16"], p7["int4-g128 rtn"]) == \
    (3.32, 3.41, 5.47, 5.73)
glue("ppl70", f"{p70['fp16']:.2f}")
glue("ppl70_awq", f"{p70['int4-g128 awq']:.2f}")
glue("ppl70_rtn", f"{p70['int4-g128 rtn']:.2f}")
glue("ppl7", f"{p7['fp16']:.2f}")
glue("ppl7_rtn", f"{p7['int4-g128 rtn']:.2f}")
glue("ppl7_awq", f"{p7['int4-g128 awq']:.2f}")

# %% [markdown]
# With 4-bit weights in groups of 128, Llama-2-70B went from {glue:text}`ppl70` to
# {glue:text}`ppl70_awq` with AWQ and {glue:text}`ppl70_rtn` with plain rounding; the 7B
# model, from {glue:text}`ppl7` to {glue:text}`ppl7_awq` and {glue:text}`ppl7_rtn`. Larger
# models lose less, and careful methods recover part of what rounding loses. Perplexity is
# not task accuracy, and these figures are one paper's, for one family of models; this book
# measures no quality at all. Treat a format as a capacity decision only after evaluating it
# on your own task.
#
# ## Beginner mistakes, wrong and right
#
# **Counting int4 as four times the throughput.** A quarter of the bits is not a quarter of
# the time: the scales add bytes, the KV reads and the arithmetic do not shrink, and the
# kernel streams more slowly. Llama-3-8B on an H100 at 4,096 tokens:

# %%
# NBVAL_CHECK_OUTPUT
wrong = 16 / 4
right = {b: quantized_decode_speedup(llama8, h100, "int4-g32", batch=b,
                                     context_len=4096) for b in (1, 64)}
print(f"wrong: {wrong:.1f}x")
print(f"right: {right[1]:.2f}x at batch 1, {right[64]:.2f}x at batch 64")
assert right[1] < 2 and right[64] < right[1]

# %% [markdown]
# The audit finds this in a plan that proposes int4 weights and expects four times the
# tokens (`plans/mistake-quantization-speedup-from-bytes.toml`): at the batch that plan
# decodes, even an ideal kernel could not do better than its "right" figure.

# %%
# NBVAL_CHECK_OUTPUT
finding, = audit(mistake_plans()["quantization-speedup-from-bytes"])
print(f"[{finding.code}] claimed {finding.wrong:g}x; at most {finding.right:.2f}x")
print(finding.detail)
assert finding.wrong / finding.right > 3

# %% [markdown]
# **Forgetting the scales.** Pricing int4 weights at half a byte each undercounts the memory
# by a fifth with groups of 32.

# %%
# NBVAL_CHECK_OUTPUT
wrong_gib = weight_bytes(llama70, 0.5) / GiB
right_gib = quantized_weight_bytes(llama70, "int4-g32") / GiB
print(f"wrong (0.5 bytes per weight): {wrong_gib:.1f} GiB")
print(f"right (scales, 16-bit embedding): {right_gib:.1f} GiB")
assert round(right_gib - wrong_gib, 1) == 9.6

# %% [markdown]
# **"It fits on one card, so it costs half."** The int8 model on one H100 above costs more
# per token than the bf16 model on two, because the card it fits on has little room left for
# the KV cache. Halving the GPUs halves the cost only if the batch survives.

# %%
# NBVAL_CHECK_OUTPUT
naive = base16.usd_per_1m_tokens / 2
print(f"wrong: ${naive:.2f} per 1M tokens (half of bf16 on TP=2)")
print(f"right: ${int8_only.usd_per_1m_tokens:.2f} (batch {int8_only.batch} on TP=1)")
assert int8_only.usd_per_1m_tokens > 2 * naive

# %% [markdown]
# ## Summary: the numbers to carry
#
# | what | value |
# |---|---|
# | int4 with a 16-bit scale and zero per 32 weights | {glue:text}`q_g32` bytes per weight |
# | Llama-3-70B weights: bf16, int8, int4-g32 | {glue:text}`w70_bf16`, {glue:text}`w70_int8`, {glue:text}`w70_int4` |
# | 70B on 2 x H100 at 8k, bf16 vs fp8 KV cache | {glue:text}`conc_bf16` vs {glue:text}`conc_fp8` sequences |
# | gpt-fast, Llama-2-7B on an A100, int4 vs bf16 (published) | bytes {glue:text}`g_bytes_int4`x fewer, bandwidth {glue:text}`g_bw_int4`, speed {glue:text}`g_speed_int4`x |
# | 70B per 1M output tokens on H100: bf16 TP=2, int8 TP=1, int8 + fp8 KV | {glue:text}`c_bf16`, {glue:text}`c_int8`, {glue:text}`c_int8fp8` |
#
# A format's bytes include its scales. Weight-only quantization speeds up decode only where
# the weights dominate the bytes, and less than the byte ratio even there. An fp8 KV cache
# doubles concurrency. Fitting on fewer GPUs is worth it when the memory left over still
# holds a batch.
#
# ## Exercises
#
# Each exercise states every constant it needs. Write your answer in the cell and run it:
# `check` says whether it is right. Solutions are behind the toggles: each works the
# numbers by hand, then confirms them with `servelib`.
#
# **quant-1.** A 4-bit weight format keeps a 16-bit scale and a 16-bit zero point for every
# group of 32 weights. How many bytes does one weight take?

# %% tags=["hide-input"]
### BEGIN SOLUTION
by_hand = 4 / 8 + (16 + 16) / 8 / 32      # the bits, then scale and zero shared by 32
answer = bytes_per_param("int4-g32")      # servelib's int4-g32 format
print(f"{by_hand} bytes per weight by hand, {answer} from servelib")
### END SOLUTION
check("quant-1", answer)

# %% [markdown]
# **quant-2.** Llama-3-70B (70.55 billion parameters; vocabulary 128,256, hidden size
# 8,192) is quantized to int4-g32 (0.625 bytes per weight, scales included), all but the
# embedding table, which stays in 16 bits. How many GiB do its weights take?

# %% tags=["hide-input"]
### BEGIN SOLUTION
embedding = 128_256 * 8192                        # parameters looked up, not multiplied
by_hand = ((70.55e9 - embedding) * 0.625 + embedding * 2) / 2**30
answer = quantized_weight_bytes(llama70, "int4-g32") / GiB
print(f"{by_hand:.2f} GiB by hand, {answer:.2f} GiB from servelib")
### END SOLUTION
check("quant-2", answer)

# %% [markdown]
# **quant-3.** Llama-3-70B (70.55 billion parameters; 80 layers, 8 KV heads of `head_dim`
# 128) in bf16 runs on two H100 SXMs (80 GiB each, TP=2) with a 10% reserve, at
# 8,192-token contexts, with an **fp8** KV cache (1 byte per element). How many sequences
# fit?

# %% tags=["hide-input"]
### BEGIN SOLUTION
budget = (2 * 80 * 2**30 - 2 * 70.55e9) * 0.9     # two cards, less weights, less 10%
per_sequence = 2 * 80 * 8 * 128 * 1 * 8192        # K and V, every layer, 1 byte each
by_hand = int(budget // per_sequence)
answer = capacity(llama70, "h100-sxm", n_gpus=2, context_len=8192,
                  bytes_per_elem=bytes_per_elem("fp8")).concurrency
print(f"{by_hand} sequences by hand, {answer} from servelib")
### END SOLUTION
check("quant-3", answer)

# %% [markdown]
# **quant-4.** Llama-3-70B (70.55 billion parameters; vocabulary 128,256 and hidden size
# 8,192; 80 layers, 8 KV heads of `head_dim` 128) is to be served on L4 cards (24 GiB) at
# 8,192 tokens, with int8 weights (1 byte per weight; the embedding table stays in 16 bits)
# and an fp8 KV cache (1 byte per element), keeping a 10% reserve. What is the smallest
# tensor-parallel degree (1, 2, 4 or 8) that holds the weights and one full sequence per
# device?

# %% tags=["hide-input"]
### BEGIN SOLUTION
embedding = 128_256 * 8192
weights = (70.55e9 - embedding) * 1 + embedding * 2     # int8 layers, 16-bit table
sequence = 2 * 80 * 8 * 128 * 1 * 8192                  # one fp8 sequence, all devices
for tp in (1, 2, 4, 8):
    room = (24 * 2**30 - weights / tp) * 0.9             # per device, after the reserve
    need = sequence / tp
    print(f"TP={tp}: {room / 2**30:6.1f} GiB left for {need / 2**30:.2f} GiB of KV")
    if room >= sequence / tp:
        break
answer = min_tp_degree(llama70, "l4", effective_bytes_per_param(llama70, "int8"),
                       context_len=8192, bytes_per_elem=bytes_per_elem("fp8"))
print(f"TP={tp} by hand, TP={answer} from servelib")
### END SOLUTION
check("quant-4", answer)

# %% [markdown]
# **quant-5.** Predict the batch-1 decode speed-up of int4-g32 weights over bf16 for
# Llama-3-8B on one H100 SXM at 4,096 tokens of context. Its weights take 16.06 GB in bf16
# and 5.74 GB in int4-g32 (scales and the 16-bit embedding table included), its fp16 KV
# cache 128 KiB per token, and the int4-g32 kernel streams the weights at 0.617 of the
# bandwidth the bf16 kernel reaches (gpt-fast's published ratio; the KV reads keep the
# full bandwidth).

# %% tags=["hide-input"]
### BEGIN SOLUTION
kv = 128 * 1024 * 4096                           # the cache one step reads, in bytes
# Memory-bound at batch 1: time is bytes over bandwidth; the int4 weights stream slower.
by_hand = (16.06e9 + kv) / (5.74e9 / 0.617 + kv)
answer = quantized_decode_speedup(llama8, "h100-sxm", "int4-g32", batch=1,
                                  context_len=4096)
print(f"{by_hand:.3f}x by hand, {answer:.3f}x from servelib")
### END SOLUTION
check("quant-5", answer)

# %% [markdown]
# **quant-6.** Llama-3-70B (70.55 billion parameters) with int4-g32 weights (45.54 GB,
# scales and the 16-bit embedding table included) and an fp8 KV cache (160 KiB per token)
# runs on one H100 SXM (80 GiB, 3.35 TB/s, 989.5 dense bf16 TFLOP/s; TP=1) at 4,096-token
# contexts with a 10% reserve, decoding as many sequences as fit, up to 64; its int4-g32
# kernel streams the weights at 0.617 of the bandwidth. At \$2.50 per GPU-hour, every hour
# spent decoding, what do a million output tokens cost?

# %% tags=["hide-input"]
### BEGIN SOLUTION
sequence = 160 * 1024 * 4096                                   # fp8 KV of one sequence
batch = min(64, int((80 * 2**30 - 45.54e9) * 0.9 // sequence))  # what fits, up to 64
tpot = max(2 * 70.55e9 * batch / 989.5e12,                     # compute, or
           (45.54e9 / 0.617 + batch * sequence) / 3.35e12)     # memory: the larger
by_hand = 2.50 / 3600 * tpot / batch * 1e6     # dollars a GPU-second, per token, x 1M
answer = quantized_replica(llama70, "h100-sxm", "int4-g32", "fp8", context_len=4096,
                           batch=64, usd_per_gpu_hour=2.50,
                           tp_degree=1).usd_per_1m_tokens
print(f"batch {batch}, {tpot * 1e3:.1f} ms a step: ${by_hand:.3f} per 1M output tokens "
      f"by hand, ${answer:.3f} from servelib")
### END SOLUTION
check("quant-6", answer)
