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
# # The KV cache and concurrency
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-serving-book/serving-capacity-economics/blob/v0.1.0/notebooks/03_kv_cache.ipynb)
#
# How many conversations can one GPU server hold at once? The tempting answer starts from
# FLOP/s. The right one starts from memory: every token of every live conversation keeps
# its keys and values in the {term}`KV cache`, and that cache, not arithmetic, is what
# runs out first. This chapter derives the size of the cache, turns a node's memory into a
# concurrency figure, and checks the formula against the memory a real decode run takes on
# your machine.
#
# **You will be able to**
# 1. derive the KV bytes per token, $2 \cdot L \cdot H_{kv} \cdot d_\text{head} \cdot b$, and say why a cache makes decode linear rather than quadratic;
# 2. turn a node's memory into a KV budget and a maximum concurrency, in two conventions (ours and vLLM's);
# 3. explain why the number of KV heads ({term}`GQA`) moves concurrency more than anything else, and what an MQA model costs under tensor parallelism;
# 4. find the smallest {term}`TP degree` that fits a model;
# 5. size the cache of models whose layers do not all cache alike (sliding windows, MLA, linear-attention hybrids);
# 6. catch four beginner mistakes: heads for KV heads, no working reserve, "70B fits one card", concurrency from FLOPs.

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
from servelib.book import glue, table
from servelib.grading import check
from servelib.hardware import get_gpu
from servelib.measure import measure_kv_cache
from servelib.memory import (capacity, kv_budget_bytes, kv_bytes_per_sequence,
                             kv_bytes_per_token, max_concurrency, min_tp_degree,
                             vllm_kv_budget_bytes, weight_bytes)
from servelib.models import get_model, list_models
from servelib.roofline import (decode_attention_flops_per_step, decode_flops_per_step,
                               generation_flops)
from servelib.units import GiB, KiB, MiB, fmt_bytes
from servelib.widgets.concurrency import concurrency_explorer, concurrency_figure

plots.apply_style()

# %% [markdown]
# ## Why decode needs a cache
#
# A decoder produces one token per forward pass, and each new token attends to every
# token before it. Attention needs the keys and values of those earlier tokens. They can be
# recomputed on every step, or computed once and kept. Count the weight FLOPs both ways for
# a prompt of $s$ tokens and $n$ generated tokens, with $P$ parameters (2 FLOPs per
# parameter per token):
#
# $$
# \text{with a cache: } \; 2P\,(s + n - 1),
# $$
#
# $$
# \text{without: } \; \sum_{t=1}^{n} 2P\,(s + t - 1) = 2P\left(ns + \tfrac{n(n-1)}{2}\right).
# $$
#
# The first grows linearly in $n$; the second quadratically. The cache trades FLOPs for
# memory, and that memory is the subject of this chapter.

# %%
# NBVAL_CHECK_OUTPUT
P, prompt = 8.03e9, 512          # Llama-3-8B, a 512-token prompt
rows = []
for n in (16, 256, 4096):
    w = generation_flops(P, prompt, n, kv_cache=True)
    wo = generation_flops(P, prompt, n, kv_cache=False)
    rows.append((n, w, wo, wo / w))
print(table(rows, ["new tokens", "with cache", "without", "ratio"],
            [",d", ".3e", ".3e", ".1f"]))
ratio_4096 = wo / w
# The first new token costs the same either way: the prompt is computed once.
assert generation_flops(P, prompt, 1, kv_cache=False) == generation_flops(P, prompt, 1)

# %% tags=["remove-cell"]
assert round(ratio_4096) == 2276
glue("ratio_4096", f"{ratio_4096:,.0f}")

# %% [markdown]
# At 4,096 new tokens the uncached loop does {glue:text}`ratio_4096` times the arithmetic.
# Every serving engine keeps the cache.
#
# ## KV bytes per token
#
# Each layer stores, for each token, one key vector and one value vector per KV head, each
# of `head_dim` elements. With $L$ layers, $H_{kv}$ KV heads of size $d_\text{head}$ and $b$ bytes
# per element:
#
# $$
# \text{KV bytes per token} = 2 \cdot L \cdot H_{kv} \cdot d_\text{head} \cdot b .
# $$
#
# The 2 is K plus V. $H_{kv}$ is the number of *KV* heads, which in a {term}`GQA` model is
# smaller than the number of attention heads {cite}`ainslie2023gqa`; in an {term}`MQA` model it
# is one {cite}`shazeer2019mqa`. $d_\text{head}$ is read from the model's
# `config.json` when it is there: it is not always `hidden_size / num_attention_heads`.
# For Llama-3-70B ($L=80$, $H_{kv}=8$, $d_\text{head}=128$, fp16 so $b=2$):

# %%
# NBVAL_CHECK_OUTPUT
llama70 = get_model("llama-3-70b")
kv_tok = kv_bytes_per_token(llama70)
kv_seq = kv_bytes_per_sequence(llama70, 8192)
print(f"{llama70.name}: L={llama70.n_layers}, H_kv={llama70.n_kv_heads}, "
      f"d_head={llama70.head_dim}")
print(f"KV per token: {kv_tok:,.0f} B = {fmt_bytes(kv_tok)}")
print(f"KV per 8k-token sequence: {fmt_bytes(kv_seq)}")
assert kv_tok == 2 * 80 * 8 * 128 * 2              # 2 L H_kv d_head b

# %% tags=["remove-cell"]
assert kv_tok == 320 * KiB and kv_seq == 2.5 * GiB
glue("kv_per_token", fmt_bytes(kv_tok))
glue("kv_per_seq_8k", fmt_bytes(kv_seq))

# %% [markdown]
# So each token costs {glue:text}`kv_per_token` and one 8k-token conversation
# {glue:text}`kv_per_seq_8k`. The same formula over the book's presets whose layers all
# attend to the whole context (each read from its published `config.json`):

# %%
# NBVAL_CHECK_OUTPUT
rows = []
for name in list_models():
    m = get_model(name)
    if m.layers:             # layers that do not all cache alike: a section below
        continue
    rows.append((name, m.attention, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim,
                 kv_bytes_per_token(m) / KiB, m.n_params / 1e9))
print(table(rows, ["model", "attention", "L", "heads", "KV heads", "head_dim",
                   "KV/token (KiB)", "params (B)"],
            ["", "", "", "", "", "", ".0f", ".2f"]))
falcon_kv = kv_bytes_per_token(get_model("falcon-7b"))
falcon_ratio = kv_bytes_per_token(get_model("llama-2-7b")) / falcon_kv

# %% tags=["remove-cell"]
assert (falcon_kv, falcon_ratio) == (8 * KiB, 64)
glue("falcon_kv", fmt_bytes(falcon_kv))
glue("falcon_ratio", f"{falcon_ratio:.0f}")

# %% [markdown]
# Falcon-7B's `head_dim` is 64 and it has one KV head ({term}`MQA`): {glue:text}`falcon_kv`
# per token, {glue:text}`falcon_ratio` times less than Llama-2-7B, which keeps all 32 heads (MHA).
#
# ## Weights first: a 70B model does not fit one card
#
# Before any cache, the weights must be resident: parameters times bytes per parameter.
# NVIDIA's datasheet gives the H100 SXM "80GB" of HBM3 {cite}`nvidia_h100`. That label
# counts in binary units: the memory is built from 16 GiB stacks, so servelib stores the
# capacity as 80 GiB, and PyTorch reports a little less (about 79.1 GiB) because the
# driver keeps some. Bandwidths, by contrast, are decimal: 3.35 TB/s is 3.35e12 bytes/s.

# %%
# NBVAL_CHECK_OUTPUT
w70 = weight_bytes(70e9, bytes_per_param=2)
h100 = get_gpu("h100-sxm")
print(f"70B parameters in fp16: {fmt_bytes(w70)}; "
      f"one H100 holds {fmt_bytes(h100.memory_bytes)}")
print(f"fits one card: {w70 <= h100.memory_bytes}")
assert w70 > h100.memory_bytes

# %% tags=["remove-cell"]
assert round(w70 / GiB, 1) == 130.4
glue("w70_gib", f"{w70 / GiB:.0f} GiB")
glue("l70_params", f"{llama70.n_params / 1e9:.2f} billion")
glue("l70_weights", f"{weight_bytes(llama70) / GiB:.1f} GiB")

# %% [markdown]
# About {glue:text}`w70_gib`: a 70B model at fp16 needs {term}`tensor parallelism <TP degree>`
# just to exist, before any question of speed. (The book's examples use the round figure
# of 70 billion parameters; the exact count of Llama-3-70B is {glue:text}`l70_params`,
# {glue:text}`l70_weights`.)
#
# ## From memory to concurrency
#
# What is left after the weights, minus a working reserve for activations, temporary
# buffers and fragmentation, is the KV budget; whole sequences of the chosen context
# length fill it:
#
# $$
# \begin{aligned}
# \text{budget} &= (M_\text{total} - W)(1 - r), \\
# \text{concurrency} &= \left\lfloor \frac{\text{budget}}{\text{KV per token} \times \text{context}} \right\rfloor .
# \end{aligned}
# $$
#
# On an 8-GPU node of 80 GiB cards (640 GiB), with a 10% reserve and 8k contexts:

# %%
# NBVAL_CHECK_OUTPUT
node = 8 * 80 * GiB
budget = kv_budget_bytes(node, w70, reserve_fraction=0.10)
variants = {"GQA (8 KV heads)": llama70,
            "MHA (64 KV heads)": llama70.with_kv_heads(64),
            "MQA (1 KV head)": llama70.with_kv_heads(1)}
conc = {k: max_concurrency(budget, kv_bytes_per_token(m), 8192)
        for k, m in variants.items()}
print(f"KV budget: {fmt_bytes(budget)}")
for k, c in conc.items():
    print(f"{k:<18} {c:>5} concurrent 8k sequences")

# %% tags=["remove-cell"]
assert list(conc.values()) == [183, 22, 1467]
glue("conc_gqa", conc["GQA (8 KV heads)"])
glue("conc_mha", conc["MHA (64 KV heads)"])
glue("conc_mqa", conc["MQA (1 KV head)"])

# %% [markdown]
# {glue:text}`conc_gqa` conversations with GQA, {glue:text}`conc_mha` if the same model kept
# all 64 KV heads, {glue:text}`conc_mqa` with a single KV head. **No other knob moves
# concurrency as far as the count of KV heads**: going from 64 to 8 divides the cache, and
# multiplies the conversations, by 8.
#
# Those three figures hold the weights at the round 70 billion parameters, to isolate the
# cache. The three variants do not have the same weights, though. The K and V projections
# hold one `head_dim`-wide slice per KV head, so they shrink with the KV heads; the query
# and output projections and the MLP do not. Neither do the attention FLOPs of a decode
# step: every *query* head still scores the whole context, whichever KV head it reads.

# %%
# NBVAL_CHECK_OUTPUT
rows, own = [], {}
for k, m in variants.items():
    kv = kv_bytes_per_token(m)
    own[k] = max_concurrency(kv_budget_bytes(node, weight_bytes(m)), kv, 8192)
    rows.append((k, m.n_params / 1e9, fmt_bytes(kv),
                 decode_flops_per_step(m.n_params) / 1e9,
                 decode_attention_flops_per_step(m, 8192) / 1e9, own[k]))
print(table(rows, ["variant", "params (B)", "KV/token", "GFLOP/token",
                   "attention GFLOP at 8k", "8k seqs, own weights"],
            ["", ".1f", "", ".1f", ".1f", ""]))
# Every query head scores the whole context, whichever KV head it reads:
assert len({decode_attention_flops_per_step(m, 8192) for m in variants.values()}) == 1

# %% tags=["remove-cell"]
params = [round(m.n_params / 1e9, 1) for m in variants.values()]
assert params == [70.6, 79.9, 69.4] and list(own.values()) == [183, 22, 1471]
mha, mqa = variants["MHA (64 KV heads)"], variants["MQA (1 KV head)"]
glue("params_mha", f"{mha.n_params / 1e9:.1f}B")
glue("params_mqa", f"{mqa.n_params / 1e9:.1f}B")
glue("params_span", f"{mha.n_params / mqa.n_params - 1:.0%}")
glue("conc_mqa_own", f"{own['MQA (1 KV head)']:,}")

# %% [markdown]
# From MQA to MHA the parameters, and with them the weight bytes and the weight FLOPs per
# token, grow by {glue:text}`params_span` ({glue:text}`params_mqa` to {glue:text}`params_mha`),
# while the cache grows 64 times. Counted with each variant's own weights the concurrency
# barely moves ({glue:text}`conc_mqa_own` instead of {glue:text}`conc_mqa` for MQA): the KV
# heads decide it.
#
# ```{admonition} MQA under tensor parallelism
# :class: note
# The figure of {glue:text}`conc_mqa` treats the node's memory as one pool. With TP=8 each
# GPU needs the KV of *at least one* head for every sequence, so a single KV head is
# replicated on all eight cards and the per-device arithmetic gives the same
# {glue:text}`conc_gqa` as GQA. `servelib.memory.capacity`
# does the per-device arithmetic:
# ```

# %%
# NBVAL_CHECK_OUTPUT
rows, per_device = [], {}
for k, m in variants.items():
    c = capacity(m, "h100-sxm", n_gpus=8, context_len=8192)
    per_device[k] = c.concurrency
    per_gpu = fmt_bytes(c.kv_bytes_per_token_per_device)
    rows.append((k, c.tp_degree, per_gpu, c.concurrency))
print(table(rows, ["variant", "TP", "KV/token/GPU", "sequences"]))
# One KV head is replicated on all eight cards: MQA holds no more than GQA here.
assert per_device["MQA (1 KV head)"] == per_device["GQA (8 KV heads)"]

# %% [markdown]
# ## Two budget conventions: 183 or 178?
#
# vLLM {cite}`kwon2023vllm` sizes its cache differently. It caps its own use at `gpu_memory_utilization`
# (0.9 by default) of the *whole* card, then subtracts the weights and the activation peak
# it profiled:
#
# $$
# \text{budget}_\text{vLLM} = M_\text{total} \cdot u - W - A - N .
# $$
#
# The reserve is taken from the total ({glue:text}`reserve_total` of the node), not from
# what remains after the weights ({glue:text}`reserve_left`), so even with no activations
# counted vLLM's budget is {glue:text}`budget_gap` smaller.

# %%
# NBVAL_CHECK_OUTPUT
b_ours = kv_budget_bytes(node, w70)
b_vllm = vllm_kv_budget_bytes(node, w70, gpu_memory_utilization=0.9)
n_ours = max_concurrency(b_ours, kv_tok, 8192)
n_vllm = max_concurrency(b_vllm, kv_tok, 8192)
print(f"ours: {fmt_bytes(b_ours)} -> {n_ours} sequences")
print(f"vLLM: {fmt_bytes(b_vllm)} -> {n_vllm} sequences")

# %% tags=["remove-cell"]
assert (n_ours, n_vllm) == (183, 178)
assert round((b_ours - b_vllm) / GiB) == 13
glue("reserve_total", fmt_bytes(0.10 * node))
glue("reserve_left", fmt_bytes(0.10 * (node - w70)))
glue("budget_gap", fmt_bytes(b_ours - b_vllm))

# %% [markdown]
# Neither is wrong: they answer "how much space is left" with different margins. When you
# compare a capacity plan with what vLLM logs at start-up ("# GPU blocks: ..."), use its
# convention; and read its figures per GPU under tensor parallelism.
#
# ## How many devices to split a model across
#
# Tensor parallelism splits every weight matrix across devices, so each holds $W/\text{TP}$
# plus its share of the KV heads. The first question is the smallest degree at which each
# device holds its weights plus at least one full-length sequence, after the reserve:
# below it the model cannot be served at all. That degree is a floor, not the answer. On a
# fixed node a larger degree can hold *more* conversations, because at a small degree every
# replica keeps its own copy of the weights (the calculator below shows it). The rule is the
# smallest degree that carries the load you need, in conversations and in latency: every
# extra device in a replica adds communication to every step (the batching chapter returns
# to this).

# %%
# NBVAL_CHECK_OUTPUT
rows = [(g, get_gpu(g).memory_bytes / GiB, min_tp_degree(llama70, g, context_len=8192))
        for g in ("h100-sxm", "a100-40gb", "l40s", "h200", "mi300x")]
print(table(rows, ["GPU", "memory (GiB)", "min TP for 70B fp16 at 8k"], ["", "g", ""]))

# %% tags=["remove-cell"]
assert min_tp_degree(llama70, "h100-sxm", context_len=8192) == 2

# %% [markdown]
# ## Measure: a real KV cache on this machine
#
# Does a real decode run take the memory the formula says? A small decoder with random
# weights (`servelib.measure.kv_toy_spec`: 4 layers of 8 heads of 128, every head with its
# own K and V so that the cache is large next to the weights) prefills a batch of prompts
# and decodes a few tokens for all of them, writing keys and values into a cache laid out
# as inference engines keep it: `(layers, K/V, sequences, KV heads, positions, head_dim)`.
#
# Comparing that tensor's size with the formula would prove nothing: the tensor is shaped
# by the formula. What we read instead is what the memory gained while the cache was alive,
# as counted by something other than servelib: on a CPU, this process's resident memory as
# the operating system counts it (the cache's pages become resident only when the run
# writes them); on a CUDA GPU, PyTorch's allocator (`torch.cuda.memory_allocated`) and the
# driver's free memory (`torch.cuda.mem_get_info`). The same run is made once before the
# count, so that the allocator's and the kernels' own buffers are already there. Not
# checked: the figures depend on the machine.

# %%
kv = measure_kv_cache(batch=8, context_len=1024, device=DEVICE)
print(f"measured on {DEVICE}")
print(f"{kv.model}: {kv.batch} sequences x {kv.context_len:,} tokens, {kv.dtype}")
print(f"formula : {kv.formula_bytes:>13,.0f} bytes ({fmt_bytes(kv.formula_bytes)})")
print(f"measured: {kv.measured_bytes:>13,} bytes ({kv.method}), "
      f"{kv.ratio:.3f} x the formula")
if kv.driver_bytes is not None:
    print(f"driver  : {kv.driver_bytes:>13,} bytes less free device memory "
          "(allocator blocks, rounded up)")
# A slip such as heads for KV heads, or K without V, would land far outside:
assert 0.8 < kv.ratio < 1.25

# %% [markdown]
# ## Concurrency against context length
#
# Concurrency falls as $1/\text{context}$: double the context, halve the conversations.
# On a log-log plot the three attention variants are parallel lines, 8x apart between MHA
# and GQA.

# %%
contexts = [2**k for k in range(9, 18)]
fig, ax = plots.new_axes("context length (tokens)", "concurrent sequences",
                         "70B fp16 on 8 x 80 GiB, 10% reserve", logx=True, logy=True)
for label, m in variants.items():
    ys = [max_concurrency(budget, kv_bytes_per_token(m), c) for c in contexts]
    ax.plot(contexts, [max(y, 0.5) for y in ys], marker="o", label=label)
ax.axvline(8192, color="grey", lw=0.8, ls="--")
plots.legend(fig)

# %% [markdown]
# *Figure: concurrent sequences that fit (pooled-memory convention) against context length.
# At 8k (dashed) the three lines give 22, 183 and 1,467. Notice the slope: halving the
# context doubles concurrency; cutting KV heads 8x multiplies it by 8.*

# %% [markdown]
# ## Layers that do not all cache alike
#
# The formula above assumes every layer keeps K and V for every token. Many models of today
# do not. Three kinds of layer break the assumption, and a model's `config.json` says which
# layers are which:
#
# - a **sliding-window** layer attends to the last $W$ tokens only, so it keeps at most $W$
#   tokens of K and V (Mistral-7B-v0.1, Gemma-2/3's local layers, half of gpt-oss's layers);
# - an **MLA** layer (DeepSeek-V2/V3) caches one compressed latent of
#   $r + d_\text{rope}$ values per token (`kv_lora_rank + qk_rope_head_dim`), shared by all heads:
#   under tensor parallelism every device needs all of it, so it is replicated, not split;
# - a **linear-attention** or Mamba layer (Qwen3-Next's gated DeltaNet, Jamba) keeps a
#   fixed-size state per sequence, whatever its length.
#
# One sequence of $c$ tokens then costs, summed layer by layer,
#
# $$
# \begin{aligned}
# \text{KV}(c) = b \Big[ & \sum_{\text{full}} 2 H_{kv} d_\text{head}\, c
#   + \sum_{\text{window } W} 2 H_{kv} d_\text{head} \min(c, W) \\
#   & + \sum_{\text{MLA}} (r + d_\text{rope})\, c + \sum_{\text{state}} S \Big] .
# \end{aligned}
# $$
#
# "KV bytes per token" keeps a meaning: the bytes one more token adds once the context is
# longer than every window (full and MLA layers only). It is no longer the cost of a
# sequence divided by its length, so concurrency must come from the per-sequence sum.
# One worked model of each kind:

# %%
# NBVAL_CHECK_OUTPUT
mixed = {name: get_model(name)
         for name in ("gpt-oss-20b", "deepseek-v3", "qwen3-next-80b-a3b")}
rows = [(name, m.layer_mix, fmt_bytes(kv_bytes_per_token(m)),
         *(fmt_bytes(kv_bytes_per_sequence(m, c)) for c in (4096, 32_768, 131_072)))
        for name, m in mixed.items()]
print(table(rows, ["model", "layers", "KV/token", "at 4k", "at 32k", "at 128k"]))
oss, ds, nxt = mixed.values()
oss_seq = kv_bytes_per_sequence(oss, 131_072)
oss_naive = 2 * oss.n_layers * oss.n_kv_heads * oss.head_dim * 2 * 131_072  # all full
nxt_state = kv_bytes_per_sequence(nxt, 1) - kv_bytes_per_token(nxt)
assert kv_bytes_per_token(ds) == 61 * (512 + 64) * 2      # 61 MLA layers of r + d_rope

# %% tags=["remove-cell"]
assert (oss_seq / MiB, oss_naive / MiB) == (3075, 6144)
assert kv_bytes_per_token(ds) == 70_272 and round(nxt_state / MiB, 1) == 37.7
glue("oss_seq", fmt_bytes(oss_seq))
glue("oss_naive", fmt_bytes(oss_naive))
glue("ds_kv_tok", fmt_bytes(kv_bytes_per_token(ds)))
glue("nxt_state", fmt_bytes(nxt_state))

# %% [markdown]
# gpt-oss-20b alternates 128-token windows with full attention: at 131,072 tokens a
# sequence holds {glue:text}`oss_seq`, where counting every layer at full length gives
# {glue:text}`oss_naive`. DeepSeek-V3's 61 MLA layers cost {glue:text}`ds_kv_tok` per token
# in total, less than one 70B GQA model's 320 KiB despite its 128 attention heads.
# Qwen3-Next keeps {glue:text}`nxt_state` of fixed state for its 36 linear-attention layers,
# plus full K and V in the 12 layers that attend to everything. What that does to
# concurrency, and what tensor parallelism does to it:

# %%
# NBVAL_CHECK_OUTPUT
oss_cap = capacity(oss, "h100-sxm", n_gpus=1, context_len=131_072)
oss_naive_conc = int(oss_cap.kv_budget_bytes_per_device // oss_naive)
print(f"gpt-oss-20b on one H100 at 128k: {oss_cap.concurrency} sequences "
      f"(counting every layer full: {oss_naive_conc})")
print("KV cache per token per GPU:")
rows = [(tp, fmt_bytes(kv_bytes_per_token(ds, tp_degree=tp)),
         fmt_bytes(kv_bytes_per_token(llama70, tp_degree=tp))) for tp in (1, 2, 8)]
print(table(rows, ["TP", "DeepSeek-V3 (MLA)", "Llama-3-70B (GQA)"]))
assert kv_bytes_per_token(ds, tp_degree=8) == kv_bytes_per_token(ds)    # replicated
assert kv_bytes_per_token(llama70, tp_degree=8) == kv_bytes_per_token(llama70) / 8

# %% tags=["remove-cell"]
assert (oss_cap.concurrency, oss_naive_conc) == (12, 6)
glue("oss_conc", oss_cap.concurrency)
glue("oss_naive_conc", oss_naive_conc)

# %% [markdown]
# The windows double gpt-oss-20b's concurrency at long context ({glue:text}`oss_conc`
# sequences, not {glue:text}`oss_naive_conc`). The MLA latent does not shrink as devices are
# added: a GQA model's per-device cache falls with the TP degree, DeepSeek's does not, so
# its concurrency grows only through the memory the split weights free. `servelib` reads
# all of this from the `config.json` (`ModelSpec.from_hf_config`), and every function built
# on the cache (capacity, the roofline's bytes, the simulator's step time, plans and
# calculators) sums layer by layer.

# %%
contexts = [2**k for k in range(9, 18)]
fig, ax = plots.new_axes("context length (tokens)", "KV cache per sequence (GiB)",
                         "fp16 cache, one sequence, whole model", logx=True, logy=True)
for name in ("llama-3-8b", "gpt-oss-20b", "deepseek-v3", "qwen3-next-80b-a3b",
             "mistral-7b-v0.1"):
    m = get_model(name)
    ax.plot(contexts, [kv_bytes_per_sequence(m, c) / GiB for c in contexts], marker="o",
            label=f"{name} ({m.layer_mix})")
plots.legend(fig)

# %% [markdown]
# *Figure: KV bytes of one sequence against its length. Full attention grows in proportion
# (Llama-3-8B); Mistral-7B-v0.1, whose every layer has a 4,096-token window, stops growing
# there; gpt-oss-20b's windowed half stops at 128 tokens, so past a few hundred tokens it
# grows at half the slope its layer count suggests; Qwen3-Next's fixed state is a floor
# that dominates short sequences.*
#
# ## Calculator: your model on your node
#
# Choose a model, a GPU, how many of them, the context, the KV dtype, the reserve and the
# TP degree; the report and the figure are `servelib.memory.capacity` for that choice.
# (The calculator runs in Jupyter or Colab; the book shows its figure below. Paste any
# model's `config.json` into its text box to use that model instead of a preset.)

# %% tags=["remove-output"]
concurrency_explorer()

# %%
fig = concurrency_figure("llama-3-70b", "h100-sxm", n_gpus=8, context_len=8192)

# %% [markdown]
# *Figure: concurrent 8k sequences of Llama-3-70B on 8 H100s (per-device arithmetic), one
# line per TP degree. Notice that TP=1 has no points (the weights do not fit one card) and
# that TP=8 holds the most sequences on the node: splitting the weights frees memory on every
# card for KV, which is why the node-wide figure, not only the fit, matters when choosing TP.*
#
# ## Beginner mistakes, wrong and right
#
# **Attention heads instead of KV heads.** Plugging `num_attention_heads` (64) into the KV
# formula for a GQA model overstates the cache 8x and understates concurrency 8x.

# %%
# NBVAL_CHECK_OUTPUT
# The slip: attention heads where the formula wants KV heads.
wrong = 2 * llama70.n_layers * llama70.n_heads * llama70.head_dim * 2
right = kv_bytes_per_token(llama70)
for name, kv in (("wrong", wrong), ("right", right)):
    seqs = max_concurrency(budget, kv, 8192)
    print(f"{name}: {fmt_bytes(kv)}/token -> {seqs} sequences")
assert wrong / right == 8

# %% [markdown]
# **Forgetting the working reserve.** Without it, the plan promises {glue:text}`reserve_extra` more conversations
# than the node can hold once activations and allocator slack take their share; the 184th
# admission is the one that runs out of memory.

# %%
# NBVAL_CHECK_OUTPUT
no_reserve, with_reserve = (
    max_concurrency(kv_budget_bytes(node, w70, reserve_fraction=r), kv_tok, 8192)
    for r in (0.0, 0.10))
print(f"wrong (no reserve): {no_reserve}   right (10% reserve): {with_reserve}")

# %% tags=["remove-cell"]
assert (no_reserve, with_reserve) == (203, 183)
glue("reserve_extra", no_reserve - with_reserve)

# %% [markdown]
# **Assuming a 70B fp16 model fits one card.** The weights alone exceed it, so the budget
# is zero and nothing can be served: the smallest TP degree is 2 (above).

# %%
# NBVAL_CHECK_OUTPUT
one_card = capacity(llama70, "h100-sxm", n_gpus=1, context_len=8192)
print(f"weights {fmt_bytes(one_card.weights_bytes_per_device)} on one "
      f"{fmt_bytes(h100.memory_bytes)} card: "
      f"fits={one_card.fits}, concurrency={one_card.concurrency}")
assert not one_card.fits and one_card.concurrency == 0

# %% [markdown]
# **Sizing concurrency from FLOPs.** "Eight H100s do {glue:text}`flops_node` of bf16; a token
# of a 70B model costs {glue:text}`flops_token`; at 20 tokens/s for each conversation that
# is {glue:text}`seqs_flops` conversations at once." The arithmetic is fine and the answer
# is {glue:text}`flops_error` too high: long before the FLOPs run out, the KV cache does.

# %%
# NBVAL_CHECK_OUTPUT
flops_node = 8 * h100.peak_flops("bf16")
tokens_per_s_per_sequence = 20
flops_per_token = decode_flops_per_step(70e9)          # 2 x parameters, one token
from_flops = flops_node / (flops_per_token * tokens_per_s_per_sequence)
from_memory = max_concurrency(budget, kv_tok, 8192)
print(f"wrong (from FLOPs): {from_flops:,.0f} sequences   "
      f"right (from memory): {from_memory} sequences")

# %% tags=["remove-cell"]
assert (round(from_flops), round(from_flops / from_memory)) == (2827, 15)
glue("flops_node", f"{flops_node / 1e15:.1f} PFLOP/s")
glue("flops_token", f"{flops_per_token / 1e9:.0f} GFLOP")
glue("seqs_flops", f"{from_flops:,.0f}")
glue("flops_error", f"{from_flops / from_memory:.0f}x")

# %% [markdown]
# ## Summary: the numbers to carry
#
# | what | value |
# |---|---|
# | KV per token, 70B (L=80, H_kv=8, d=128), fp16 | {glue:text}`kv_per_token` |
# | KV per 8k sequence | {glue:text}`kv_per_seq_8k` |
# | 70B fp16 weights | {glue:text}`w70_gib` (does not fit one 80 GiB card) |
# | 8 x 80 GiB, 8k context, 10% reserve | {glue:text}`conc_gqa` sequences (GQA), {glue:text}`conc_mha` (MHA), {glue:text}`conc_mqa` (MQA, pooled) |
# | gpt-oss-20b at 128k (windows counted) | {glue:text}`oss_seq` per sequence, {glue:text}`oss_conc` on one H100 |
#
# Memory, not arithmetic, decides how many conversations a node holds. The count of KV
# heads is the strongest lever on that memory. Split a model over the fewest devices that
# carry the load you need.
#
# ## Exercises
#
# Each exercise states every constant it needs. Write your answer in the cell and run it:
# `check` says whether it is right and, for the usual slips, what went wrong. Solutions are
# behind the toggles.
#
# **kv-1.** Llama-3-8B has 32 layers, 8 KV heads and `head_dim` 128. How many bytes of fp16
# KV cache does one token need?

# %% tags=["hide-input"]
### BEGIN SOLUTION
L, H_kv, d, b = 32, 8, 128, 2
by_hand = 2 * L * H_kv * d * b             # K and V, in every layer, for every KV head
answer = kv_bytes_per_token(get_model("llama-3-8b"))
print(f"2 x 32 x 8 x 128 x 2 = {by_hand:,} bytes; servelib: {answer:,.0f} bytes")
### END SOLUTION
check("kv-1", answer)

# %% [markdown]
# **kv-2.** For Llama-3-8B (32 layers, 8 KV heads, `head_dim` 128), how many GiB of fp16 KV
# cache does one 32,768-token sequence take?

# %% tags=["hide-input"]
### BEGIN SOLUTION
per_token = 2 * 32 * 8 * 128 * 2
by_hand = per_token * 32_768 / 2**30       # GiB: 2^30 bytes
answer = kv_bytes_per_sequence(get_model("llama-3-8b"), 32_768) / GiB
print(f"{per_token:,} B x 32,768 = {by_hand:.2f} GiB; servelib: {answer:.2f} GiB")
### END SOLUTION
check("kv-2", answer)

# %% [markdown]
# **kv-3.** Llama-2-7B (MHA: 32 layers, 32 KV heads, `head_dim` 128, 6.74 billion
# parameters) is served in fp16 on one A100 80GB (80 GiB). With a 10% working reserve and
# 4,096-token contexts, how many sequences fit at once?

# %% tags=["hide-input"]
### BEGIN SOLUTION
budget = (80 * 2**30 - 2 * 6.74e9) * 0.9   # after the fp16 weights, less the reserve
per_seq = 2 * 32 * 32 * 128 * 2 * 4096     # MHA: every head keeps its own K and V
by_hand = int(budget // per_seq)           # whole sequences only
answer = capacity(get_model("llama-2-7b"), "a100-80gb", n_gpus=1,
                  context_len=4096).concurrency
print(f"{budget / 2**30:.1f} GiB / {per_seq / 2**30:.0f} GiB per sequence "
      f"= {by_hand} sequences; servelib: {answer}")
### END SOLUTION
check("kv-3", answer)

# %% [markdown]
# **kv-4.** Qwen2.5-7B (28 layers, 4 KV heads, `head_dim` 128, 7.62 billion parameters) runs
# on one L4 (24 GiB) with fp16 weights but an **fp8** KV cache (1 byte per element). With a
# 10% reserve and 8,192-token contexts, how many sequences fit?

# %% tags=["hide-input"]
### BEGIN SOLUTION
budget = (24 * 2**30 - 2 * 7.62e9) * 0.9   # the weights stay in fp16
per_seq = 2 * 28 * 4 * 128 * 1 * 8192      # the cache is fp8: 1 byte per element
by_hand = int(budget // per_seq)
qwen = get_model("qwen2.5-7b")
l4_budget = kv_budget_bytes(get_gpu("l4").memory_bytes, weight_bytes(qwen))
answer = max_concurrency(l4_budget, kv_bytes_per_token(qwen, bytes_per_elem=1), 8192)
print(f"{budget / 2**30:.2f} GiB / {per_seq / 2**20:.0f} MiB per sequence "
      f"= {by_hand} sequences; servelib: {answer}")
### END SOLUTION
check("kv-4", answer)

# %% [markdown]
# **kv-5.** Llama-3-70B (70.55 billion parameters in fp16; 320 KiB of fp16 KV cache per
# token, over 8 KV heads) is to be served on L40S cards (48 GiB each) at 8,192-token
# contexts with a 10% reserve. What is the smallest tensor parallel degree that fits weights
# plus one full sequence per device?

# %% tags=["hide-input"]
### BEGIN SOLUTION
P, kv, c = 70.55e9, 320 * 1024, 8192
fits = []
for tp in (1, 2, 4, 8):
    weights = 2 * P / tp                     # each card's share of the weights
    kv_budget = max(0, (48 * 2**30 - weights) * 0.9)
    need = kv / tp * c                       # its share of one sequence's KV heads
    print(f"TP={tp}: weights {weights / 2**30:5.1f} GiB, KV budget "
          f"{kv_budget / 2**30:4.1f} GiB, one sequence {need / 2**30:.2f} GiB")
    if kv_budget >= need:
        fits.append(tp)
by_hand = min(fits)
answer = min_tp_degree(get_model("llama-3-70b"), "l40s", context_len=8192)
print(f"smallest degree: {by_hand}; servelib: {answer}")
### END SOLUTION
check("kv-5", answer)

# %% [markdown]
# **kv-6.** A node of 8 x 80 GiB GPUs serves a 70B model, counted as 70 billion fp16
# parameters, with 320 KiB of fp16 KV cache per token, at 8,192-token contexts. How many
# *more* sequences does the book's convention (a 10% reserve taken from what is left after
# the weights) admit than vLLM's (`gpu_memory_utilization=0.9` of the total, no activation
# memory)?

# %% tags=["hide-input"]
### BEGIN SOLUTION
total, weights = 8 * 80 * 2**30, 2 * 70e9
per_seq = 320 * 1024 * 8192
ours = int((total - weights) * 0.9 // per_seq)      # the reserve from what is left
vllm = int((total * 0.9 - weights) // per_seq)      # the reserve from the total
by_hand = ours - vllm
w = weight_bytes(70e9)
answer = (max_concurrency(kv_budget_bytes(total, w), kv_tok, 8192)
          - max_concurrency(vllm_kv_budget_bytes(total, w), kv_tok, 8192))
print(f"{ours} - {vllm} = {by_hand} sequences; servelib: {answer}")
### END SOLUTION
check("kv-6", answer)

# %% [markdown]
# **kv-7.** gpt-oss-20b has 24 layers with 8 KV heads of `head_dim` 64; every other layer
# (12 of them) attends only to the last 128 tokens, the other 12 to the whole context. It
# has 20.91 billion parameters, served in bf16 on one H100 SXM (80 GiB) with fp16 KV, a 10%
# reserve and 131,072-token contexts. How many sequences fit at once?

# %% tags=["hide-input"]
### BEGIN SOLUTION
per_layer_token = 2 * 8 * 64 * 2           # K and V of 8 heads of 64, fp16
tokens = 12 * 131_072 + 12 * 128           # full layers, then windowed ones
per_seq = per_layer_token * tokens
budget = (80 * 2**30 - 2 * 20.91e9) * 0.9
by_hand = int(budget // per_seq)
answer = capacity(get_model("gpt-oss-20b"), "h100-sxm", n_gpus=1,
                  context_len=131_072).concurrency
print(f"{budget / 2**30:.1f} GiB / {per_seq / 2**30:.2f} GiB per sequence "
      f"= {by_hand} sequences; servelib: {answer}")
### END SOLUTION
check("kv-7", answer)
