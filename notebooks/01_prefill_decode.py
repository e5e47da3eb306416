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
# # Prefill and decode
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-serving-book/serving-capacity-economics/blob/v0.1.0/notebooks/01_prefill_decode.ipynb)
#
# Every request to a language model runs in two phases that could hardly be more
# different. The {term}`prefill <Prefill>` reads the whole prompt in one parallel pass; the
# {term}`decode <Decode>` then produces the answer one token at a time. The first keeps the
# arithmetic units busy, the second mostly waits for memory. This chapter counts the work of
# each phase, turns it into the two latencies users feel, and then times both phases of a
# small decoder on the machine in front of you, next to what the counting predicts.
#
# **You will be able to**
# 1. say what prefill and decode each do, and which latency each one sets ({term}`TTFT`, {term}`TPOT`);
# 2. count prefill FLOPs as $2PN$ and say when the attention term matters;
# 3. explain why a decode token costs the same FLOPs as a prefill token yet takes far longer;
# 4. predict TTFT and TPOT of a real model on a real GPU from its datasheet;
# 5. measure both phases here and compare them with the prediction from measured ceilings.

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
import dataclasses
import pathlib

from servelib import plots
from servelib.book import glue, table
from servelib.grading import check
from servelib.hardware import get_gpu
from servelib.measure import describe, load_profiles, measure_profile
from servelib.memory import weight_bytes
from servelib.models import get_model
from servelib.published import (GPT_FAST_A100_PEAK_BANDWIDTH_BPS, GPT_FAST_SOURCE,
                                published_decode)
from servelib.roofline import (max_decode_batch, predict_tpot_s, predict_ttft_s,
                               prefill_attention_flops, prefill_flops)
from servelib.units import fmt_bytes

plots.apply_style()
DATA = pathlib.Path("../book/data")   # profiles made by python -m servelib.measure

# %% [markdown]
# ## Two phases of one request
#
# A prompt of $N$ tokens arrives. In the **prefill** the model runs all $N$ tokens through
# every layer at once: each layer is a handful of matrix products of shape
# $(N \times \text{hidden}) \cdot (\text{hidden} \times \cdot)$, and every position's keys
# and values go into the {term}`KV cache`. The output at the last position is the first
# generated token.
#
# Then the **decode** loop starts. Each step feeds the single newest token through every
# layer, attends to the cache, appends one more key and value, and yields one token. Step
# $t+1$ needs the token of step $t$, so the steps cannot run in parallel for one request.
#
# The two latencies a user feels map onto the two phases:
#
# - {term}`TTFT`, time to first token: queueing plus the prefill. Long prompts raise it.
# - {term}`TPOT` (also called inter-token latency, {term}`ITL`): the time of one decode step,
#   the gap between consecutive tokens of the answer.
#
# $$
# \text{latency}(n \text{ output tokens}) = \text{TTFT} + (n - 1)\cdot\text{TPOT}.
# $$
#
# ## Counting the work
#
# A weight matrix of $m \times k$ applied to one token vector costs $2mk$ FLOPs: one multiply
# and one add per weight. Summed over every matrix of a model with $P$ parameters, one token
# costs $2P$ FLOPs, so a prefill of $N$ tokens costs
#
# $$
# \text{prefill FLOPs} = 2 P N .
# $$
#
# Attention adds a term that the parameter count does not see: token $t$ scores $t$ keys
# and sums $t$ values, $4 H d_\text{head} t$ FLOPs per layer. Over a causal prompt that is
# $2 L H d_\text{head} N(N+1)$, quadratic in $N$ and small until prompts are long:

# %%
# NBVAL_CHECK_OUTPUT
llama70 = get_model("llama-3-70b")
P = llama70.n_params
print(f"{llama70.name}: P = {P / 1e9:.2f}e9 parameters")
rows = []
for n in (512, 2048, 8192, 32768):
    dense, attn = prefill_flops(P, n), prefill_attention_flops(llama70, n)
    rows.append((n, dense / 1e12, attn / 1e12, attn / dense))
print(table(rows, ["prompt", "2PN (TFLOP)", "attention (TFLOP)", "attention share"],
            [",d", ".1f", ".1f", ".1%"]))
assert prefill_flops(P, 2048) == 2 * P * 2048
assert prefill_attention_flops(llama70, 512) / prefill_flops(P, 512) < 0.01

# %% tags=["remove-cell"]
for n in (8192, 32768):
    share = prefill_attention_flops(llama70, n) / prefill_flops(P, n)
    glue(f"attn_share_{n // 1024}k", f"{share:.0%}")

# %% [markdown]
# Under 1% at 512 tokens, {glue:text}`attn_share_8k` at 8k, {glue:text}`attn_share_32k` at
# 32k: the book uses $2PN$ and adds attention where prompts are long.
#
# A decode step does the same $2P$ FLOPs per token. What differs is how many tokens share
# each read of the weights. The prefill streams the weights from memory once and applies
# them to all $N$ tokens; the decode step streams them once for a single token. The ratio of
# arithmetic to bytes, the {term}`arithmetic intensity <Arithmetic intensity>`, is about $N$ for the prefill and
# about 1 for the decode (next chapter). So with $W$ bytes of weights, a device with peak
# $F$ FLOP/s and bandwidth $B$ bytes/s, each phase takes the larger of its compute time and
# its memory time:
#
# $$
# \text{TTFT} \approx \max\!\left(\frac{2PN}{F}, \frac{W}{B}\right),
# \qquad
# \text{TPOT} \approx \max\!\left(\frac{2P}{F}, \frac{W + \text{KV}}{B}\right).
# $$
#
# ## Predicting TTFT and TPOT from a datasheet
#
# For Llama-3-8B in bf16 ({glue:text}`w8_gib` of weights) with a 4,096-token prompt:

# %%
# NBVAL_CHECK_OUTPUT
llama8 = get_model("llama-3-8b")
print(f"{llama8.name}: weights {fmt_bytes(weight_bytes(llama8))} in bf16")
rows, ratios = [], {}
for g in ("l4", "a100-80gb", "h100-sxm"):
    ttft, tpot = predict_ttft_s(llama8, g, 4096), predict_tpot_s(llama8, g, 1, 4096)
    ratios[g] = tpot / (ttft / 4096)
    rows.append((g, ttft * 1e3, ttft / 4096 * 1e3, tpot * 1e3, ratios[g]))
print(table(rows, ["GPU", "TTFT 4k (ms)", "per prompt token (ms)", "TPOT (ms)",
                   "decode/prefill per token"], ["", ".1f", ".4f", ".2f", ".0f"]))
l4_over_h100 = (predict_tpot_s(llama8, "l4", 1, 4096)
                / predict_tpot_s(llama8, "h100-sxm", 1, 4096))
print(f"TPOT, L4 over H100: {l4_over_h100:.1f}x")
assert all(r > 100 for r in ratios.values())   # decode: over 100x slower per token

# %% tags=["remove-cell"]
# The figures the prose quotes, pinned (run by the tests, hidden in the book).
assert fmt_bytes(weight_bytes(llama8)) == "15 GiB"
assert round(predict_ttft_s(llama8, "h100-sxm", 4096) * 1e3, 1) == 66.5
assert round(predict_tpot_s(llama8, "h100-sxm", 1, 4096) * 1e3, 2) == 4.95
assert round(l4_over_h100, 1) == 11.2
glue("w8_gib", fmt_bytes(weight_bytes(llama8)))
glue("l4_over_h100", f"{l4_over_h100:.0f}")
glue("h100_ratio", f"{ratios['h100-sxm']:.0f}")
glue("h100_ttft_8b", f"{predict_ttft_s(llama8, 'h100-sxm', 4096) * 1e3:.1f} ms")
glue("h100_tpot_8b", f"{predict_tpot_s(llama8, 'h100-sxm', 1, 4096) * 1e3:.1f} ms")

# %% [markdown]
# On an H100 the whole 4k prompt takes about {glue:text}`h100_ttft_8b`, and each answer token
# {glue:text}`h100_tpot_8b`: per token, decode is about {glue:text}`h100_ratio` times slower
# than prefill, for the same FLOPs. Notice the TPOT column: it is the weight bytes divided by
# the bandwidth, and the L4's 300 GB/s makes it about {glue:text}`l4_over_h100` times the H100's.
#
# These are roofline estimates (the next chapter): lower bounds that ignore kernel launch
# gaps, communication and scheduling, and that assume the datasheet's peak bandwidth and
# FLOP/s, which real kernels do not reach. They are the right first answer; published
# measurements and the one below on this machine say how close a real run comes.
#
# ## Published: batch-1 decode on an A100
#
# The gpt-fast project published the decode speed of Llama-2 at batch 1 on A100-80GB cards
# {cite}`gptfast2023`. These are its authors' measurements, not ours. Their cards were
# power-limited to 330 W, at which, the source says, they reach about 1,700 GB/s instead of
# the datasheet's 2,039 GB/s; the prediction is shown from both:

# %%
# NBVAL_CHECK_OUTPUT
a100 = get_gpu("a100-80gb")
a100_330w = dataclasses.replace(a100, name="a100-80gb at 330 W",
                                hbm_bandwidth_Bps=GPT_FAST_A100_PEAK_BANDWIDTH_BPS)
print(f"published: {GPT_FAST_SOURCE}")
rows, pub, too_big = [], {}, []
for r in published_decode(weights="bf16", tp_degree=1):
    if r.gpu_preset != "a100-80gb":
        continue
    m = get_model(r.model)
    if r.tokens_per_s is None:      # out of memory in the source, and in servelib too
        assert max_decode_batch(m, a100, 5) == 0
        too_big.append(m)
        continue
    sheet, at_330w = (predict_tpot_s(m, g, 1, 5) for g in (a100, a100_330w))
    rows.append((r.model, sheet * 1e3, at_330w * 1e3, r.tpot_s * 1e3,
                 r.tpot_s / at_330w))
    pub[r.model] = r
print(table(rows, ["model", "datasheet (ms)", "at 1,700 GB/s (ms)", "published (ms)",
                   "published/predicted"], ["", ".2f", ".2f", ".2f", ".2f"]))
for m in too_big:
    print(f"{m.name}: {fmt_bytes(weight_bytes(m))} of bf16 weights, more than a card")
b7, w7 = pub["llama-2-7b"], weight_bytes(get_model("llama-2-7b"))
achieved = b7.tokens_per_s * w7            # one read of the weights per token
print(f"Llama-2-7B: {b7.tokens_per_s} tokens/s x {w7 / 1e9:.1f} GB of weights = "
      f"{achieved / 1e9:,.0f} GB/s read")
print(f"(the source's own bandwidth column: {b7.bandwidth_GBps:,.0f} GB/s)")
# servelib's parameter count and the source's agree to 2%:
assert abs(achieved / 1e9 / b7.bandwidth_GBps - 1) < 0.02

# %% tags=["remove-cell"]
pub_ratio = b7.tpot_s / predict_tpot_s(get_model("llama-2-7b"), a100_330w, 1, 5)
assert round(pub_ratio, 2) == 1.20 and round(achieved / 1e9) == 1414
glue("pub_tpot_7b", f"{b7.tpot_s * 1e3:.1f} ms")
glue("pub_ratio_7b", f"{pub_ratio:.2f}")
glue("pub_achieved_7b", f"{achieved / 1e9:,.0f} GB/s");

# %% [markdown]
# The published time per token, {glue:text}`pub_tpot_7b`, is {glue:text}`pub_ratio_7b`
# times the roofline at the bandwidth those cards reach. Tokens per second times the bytes
# of weights gives {glue:text}`pub_achieved_7b`: each token costs one read of the weights,
# as the counting says, and the decode runs close to the memory's speed, far from its
# arithmetic. The roofline chapter returns to these figures.
#
# ## Measure: both phases on this machine
#
# `servelib.measure` builds a small decoder with random weights whose shape is Llama-3-8B
# scaled down (`servelib.measure.toy_spec`, {term}`GQA` with a KV cache). It first measures
# the machine's two ceilings, the bandwidth of a large memory copy and the FLOP/s of a large
# matrix product; then times one prefill and one decode step, and predicts each from those
# two measured ceilings. The cell takes a few seconds on a laptop CPU. The figures depend on
# the machine and on what else it is running, so this cell's output is not checked.

# %%
live = measure_profile(quick=True)
print("measured on:", describe(live))
pre, dec = live["prefill"], live["decode"]
print(f"copy bandwidth {live['copy_bandwidth_Bps'] / 1e9:.1f} GB/s, "
      f"matmul {live['matmul_flops'] / 1e12:.3f} TFLOP/s")
rows = [("prefill", pre["s_per_token"] * 1e3,
         pre["predicted_step_s"] / pre["new_tokens"] * 1e3,
         f"{pre['achieved_flops'] / 1e12:.3f} TFLOP/s"),
        ("decode", dec["s_per_token"] * 1e3, dec["predicted_step_s"] * 1e3,
         f"{dec['achieved_Bps'] / 1e9:.1f} GB/s")]
print(table(rows, ["phase", "ms/token", "predicted", "achieved"],
            ["", ".3f", ".3f", ""]))
ratio = dec["s_per_token"] / pre["s_per_token"]
print(f"decode is {ratio:.0f}x slower per token than prefill here")
glue("live_ratio", f"{ratio:.0f}")

# %% [markdown]
# On this machine a decode token costs {glue:text}`live_ratio` times a prefill token. The
# prefill row reports FLOP/s because arithmetic limits it; the decode row reports bytes/s
# because the weight read limits it.
#
# The two ceilings take a few seconds to measure and share the machine with whatever else
# it runs, so a second run, such as the next chapter's, can give a rather different matmul
# rate on a busy or throttled machine. Each prediction here uses the ceilings of the same
# run, so prediction and measurement stay comparable even when the rate moves.
#
# Profiles measured with `python -m servelib.measure` and committed with the book
# (`book/data/`) sit beside yours in the figure; the lines under it name each one's
# device, dtype, torch version and date.

# %%
profiles = [live] + load_profiles(DATA)
fig, ax = plots.new_axes("", "time per token (ms, log scale)",
                         "toy decoder, batch 1: measured and predicted", logy=True)
width = 0.8 / len(profiles)
for i, prof in enumerate(profiles):
    pre, dec = prof["prefill"], prof["decode"]
    measured = [pre["s_per_token"] * 1e3, dec["s_per_token"] * 1e3]
    predicted = [pre["predicted_step_s"] / pre["new_tokens"] * 1e3,
                 dec["predicted_step_s"] * 1e3]
    xs = [k + i * width for k in (0, 1)]
    ax.bar(xs, measured, width=width * 0.9, label=plots.device_label(prof, live))
    ax.plot(xs, predicted, "k_", markersize=18, markeredgewidth=2)
ax.plot([], [], "k_", markersize=12, markeredgewidth=2, label="roofline prediction")
ax.set_xticks([0.4 - width / 2, 1.4 - width / 2],
              ["prefill\n(per prompt token)", "decode\n(per output token)"])
plots.legend(fig)
for prof in profiles:
    print(describe(prof))

# %% [markdown]
# *Figure: seconds per token of the toy decoder's prefill and decode at batch 1 (bars) and
# the roofline prediction from the same machine's measured ceilings (black ticks); this
# machine first, then the profiles committed with the book (named under the figure). Notice
# the gap between the two groups of bars: same FLOPs per token, one to two orders of
# magnitude apart, on every device measured.*
#
# ## Beginner mistake: one tokens-per-second number for both phases
#
# "The server did 2,000 tokens in 10 seconds, so it runs at 200 tokens/s." If 1,800 of
# those were prompt tokens, the answer came out at 20 tokens/s, and the user felt every
# one of those gaps. Report TTFT and TPOT separately, never their blend:

# %%
# NBVAL_CHECK_OUTPUT
prompt, output = 1800, 200
ttft = predict_ttft_s(llama8, "l4", prompt)
tpot = predict_tpot_s(llama8, "l4", 1, prompt + output)
total = ttft + (output - 1) * tpot
wrong = (prompt + output) / total          # blends prefill and decode tokens
right = 1 / tpot                           # what the reader of the answer sees
print(f"wrong: {wrong:.0f} tokens/s (prompt and output tokens over the whole request)")
print(f"right: TTFT {ttft * 1e3:.0f} ms, "
      f"then {right:.1f} tokens/s ({tpot * 1e3:.1f} ms per token)")
assert wrong > 8 * right

# %% [markdown]
# ## Summary: the numbers to carry
#
# | what | value |
# |---|---|
# | prefill FLOPs | $2PN$ (attention $2LHd_\text{head}N(N+1)$ on top) |
# | decode FLOPs per token | $2P$, the same as prefill |
# | Llama-3-8B, 4k prompt on an H100: TTFT | {glue:text}`h100_ttft_8b` |
# | Llama-3-8B, batch 1 on an H100: TPOT | {glue:text}`h100_tpot_8b` |
# | decode vs prefill, per token, H100 (predicted) | {glue:text}`h100_ratio` x |
# | decode vs prefill, per token, this machine (measured) | {glue:text}`live_ratio` x |
# | Llama-2-7B batch 1 on an A100, published (gpt-fast) | {glue:text}`pub_tpot_7b`, {glue:text}`pub_ratio_7b` x the roofline |
#
# The prompt goes through the model in one pass and waits on arithmetic; the answer comes
# out one token per pass and waits on reading the weights. The first phase sets TTFT, the
# second TPOT.
#
# ## Exercises
#
# Each exercise states every constant it needs. Write your answer in the cell and run it:
# `check` says whether it is right. Solutions are behind the toggles. Predictions use
# `servelib.roofline` with bf16 weights and KV cache (2 bytes each) and the GPU presets of
# `servelib.hardware`.
#
# **pd-1.** Llama-3-8B has 8.03 billion parameters. How many TFLOP ($10^{12}$ FLOPs) does
# the prefill of a prompt of 2,000 tokens take, attention left out?

# %% tags=["hide-input"]
### BEGIN SOLUTION
P, N = 8.03e9, 2000                        # parameters, prompt tokens
by_hand = 2 * P * N / 1e12                 # 2PN FLOPs, in TFLOP
answer = prefill_flops(llama8.n_params, N) / 1e12
print(f"2 x 8.03e9 x 2,000 = {by_hand:.2f} TFLOP; servelib: {answer:.2f} TFLOP")
### END SOLUTION
check("pd-1", answer)

# %% [markdown]
# **pd-2.** Predict the TTFT, in milliseconds, of one 4,096-token prompt to Llama-3-8B (8.03
# billion parameters, 128 KiB of KV cache per token) on an H100 SXM (989.5 dense bf16
# TFLOP/s, 3.35 TB/s), with an empty queue.

# %% tags=["hide-input"]
### BEGIN SOLUTION
P, kv, N = 8.03e9, 128 * 1024, 4096        # parameters, KV bytes per token, prompt
F, B = 989.5e12, 3.35e12                   # FLOP/s, bytes/s
compute_ms = 2 * P * N / F * 1e3           # 2PN FLOPs
memory_ms = (2 * P + N * kv) / B * 1e3     # read the weights, write the prompt's KV
by_hand = max(compute_ms, memory_ms)
answer = predict_ttft_s(llama8, "h100-sxm", N) * 1e3
print(f"compute {compute_ms:.1f} ms, memory {memory_ms:.1f} ms: "
      f"TTFT {by_hand:.1f} ms; servelib: {answer:.1f} ms")
### END SOLUTION
check("pd-2", answer)

# %% [markdown]
# **pd-3.** Predict the TPOT, in milliseconds, of Llama-3-8B (8.03 billion parameters, 128
# KiB of KV cache per token) decoding one sequence at a context of 4,096 tokens on an A100
# 80GB (2,039 GB/s).

# %% tags=["hide-input"]
### BEGIN SOLUTION
P, kv, c = 8.03e9, 128 * 1024, 4096
B = 2039e9
# Batch 1 is memory-bound: each step reads the weights and the sequence's KV once.
by_hand = (2 * P + c * kv) / B * 1e3
answer = predict_tpot_s(llama8, "a100-80gb", 1, c) * 1e3
print(f"({2 * P / 1e9:.2f} GB + {c * kv / 1e9:.2f} GB) / 2,039 GB/s "
      f"= {by_hand:.2f} ms; servelib: {answer:.2f} ms")
### END SOLUTION
check("pd-3", answer)

# %% [markdown]
# **pd-4.** For Llama-3-8B (8.03 billion parameters, 128 KiB of KV cache per token) on an
# H100 SXM (989.5 dense bf16 TFLOP/s, 3.35 TB/s), how many batch-1 decode steps (context
# 4,096) take as long as the prefill of a prompt of 4,096 tokens?

# %% tags=["hide-input"]
### BEGIN SOLUTION
P, kv, N = 8.03e9, 128 * 1024, 4096
F, B = 989.5e12, 3.35e12
ttft = max(2 * P * N / F, (2 * P + N * kv) / B)     # compute-bound
tpot = max(2 * P / F, (2 * P + N * kv) / B)         # memory-bound
by_hand = ttft / tpot
answer = (predict_ttft_s(llama8, "h100-sxm", N)
          / predict_tpot_s(llama8, "h100-sxm", 1, N))
print(f"{ttft * 1e3:.1f} ms / {tpot * 1e3:.2f} ms = {by_hand:.1f} steps; "
      f"servelib: {answer:.1f}")
### END SOLUTION
check("pd-4", answer)

# %% [markdown]
# **pd-5.** For Llama-3-8B (8.03 billion parameters, 32 layers, 32 attention heads of size
# 128), what fraction of the $2PN$ FLOPs does causal attention add for a prompt of 8,192
# tokens? Answer as a fraction.

# %% tags=["hide-input"]
### BEGIN SOLUTION
P, L, H, d, N = 8.03e9, 32, 32, 128, 8192
by_hand = 2 * L * H * d * N * (N + 1) / (2 * P * N)      # 2 L H d N(N+1) over 2PN
answer = prefill_attention_flops(llama8, N) / prefill_flops(llama8.n_params, N)
print(f"by hand {by_hand:.4f}; servelib: {answer:.4f}")
### END SOLUTION
check("pd-5", answer)

# %% [markdown]
# **pd-6.** A chatbot serves Llama-3-8B (8.03 billion parameters, 128 KiB of KV cache per
# token) on one L4 (300 GB/s, 121 dense bf16 TFLOP/s) at batch 1. A 512-token prompt gets a
# 256-token answer. Predict the end-to-end latency in seconds: TTFT plus 255 decode steps,
# each taken at the final context of 768 tokens (a slight overestimate).

# %% tags=["hide-input"]
### BEGIN SOLUTION
P, kv, F, B = 8.03e9, 128 * 1024, 121e12, 300e9
ttft = max(2 * P * 512 / F, (2 * P + 512 * kv) / B)
tpot = max(2 * P / F, (2 * P + 768 * kv) / B)
by_hand = ttft + 255 * tpot
answer = (predict_ttft_s(llama8, "l4", 512)
          + 255 * predict_tpot_s(llama8, "l4", 1, 768))
print(f"{ttft * 1e3:.0f} ms + 255 x {tpot * 1e3:.1f} ms = {by_hand:.2f} s; "
      f"servelib: {answer:.2f} s")
### END SOLUTION
check("pd-6", answer)
