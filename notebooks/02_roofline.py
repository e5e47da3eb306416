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
# # Arithmetic intensity and the roofline
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-serving-book/serving-capacity-economics/blob/v0.1.0/notebooks/02_roofline.ipynb)
#
# A GPU's datasheet gives two numbers that matter here: how fast it can multiply and how
# fast it can read memory. Which one limits a piece of work depends on a single ratio, the
# FLOPs it does per byte it moves. This chapter defines that ratio, draws the
# {term}`roofline <Roofline>` {cite}`williams2009roofline` that turns it into attainable
# speed, and shows that decoding one sequence at a time uses only {glue:text}`util_b1` of
# an H100's arithmetic. Then it measures the roofline of the machine you are on and puts the
# toy decoder's prefill and decode on it.
#
# **You will be able to**
# 1. compute the {term}`arithmetic intensity <Arithmetic intensity>` of a kernel or a whole decode step;
# 2. find a device's {term}`ridge point <Ridge point>` and say whether a step is memory- or compute-bound;
# 3. show that batch-1 decode runs near 1 FLOP/byte and so leaves {glue:text}`waste_b1` of an H100's arithmetic idle;
# 4. measure this machine's ceilings and ridge, and place measured points on its roofline;
# 5. answer "the GPUs are too slow" with the right fix.

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
from servelib.hardware import get_gpu, list_gpus, ridge_point
from servelib.measure import describe, load_profiles, measure_profile
from servelib.memory import weight_bytes
from servelib.models import get_model
from servelib.published import (GPT_FAST_A100_PEAK_BANDWIDTH_BPS, GPT_FAST_SOURCE,
                                WEIGHT_BYTES, published_decode)
from servelib.roofline import (arithmetic_intensity, attainable_flops, check_batch_fits,
                               compute_utilization, decode_intensity, decode_step,
                               decode_tokens_per_s, max_decode_batch, predict_tpot_s)
from servelib.units import fmt_bytes

plots.apply_style()
DATA = pathlib.Path("../book/data")   # profiles made by python -m servelib.measure

# %% [markdown]
# ## FLOPs per byte
#
# Any computation does some arithmetic and moves some bytes between memory and the
# arithmetic units. Its arithmetic intensity is the ratio:
#
# $$
# I = \frac{\text{FLOPs}}{\text{bytes moved}} \quad \text{(FLOP/byte)}.
# $$
#
# Two examples at the extremes. A product of two $n \times n$ matrices does $2n^3$ FLOPs and
# must at least read two matrices and write one, $3n^2$ elements, so its intensity grows
# like $n$. A decode step of a model with $P$ parameters stored in 2 bytes each does $2P$
# FLOPs per sequence and reads $2P$ bytes of weights: about 1 FLOP/byte, whatever $P$.

# %%
# NBVAL_CHECK_OUTPUT
n, b = 4096, 2                                     # bf16: 2 bytes per element
i_matmul = arithmetic_intensity(2 * n**3, 3 * n**2 * b)
llama70 = get_model("llama-3-70b")
i_decode = decode_intensity(llama70, batch=1, context_len=2048)
i_weights = decode_intensity(llama70, batch=1, context_len=2048, attention=False)
print(f"{n}x{n} matmul in bf16: {i_matmul:,.0f} FLOP/byte")
print(f"{llama70.name} decode, batch 1, 2k context, fp16: {i_decode:.3f} FLOP/byte")
print(f"  counting the weights' FLOPs only: {i_weights:.3f} FLOP/byte")
assert 0.8 < i_weights <= 1 < i_decode < 1.1       # about 1, either way

# %% tags=["remove-cell"]
assert round(i_matmul) == 1365

# %% [markdown]
# About 1 at batch 1. Counting only the weights' $2P$ FLOPs it is a little under 1, because
# the KV cache adds bytes to read; attention over that cache adds FLOPs of its own
# ($4 L H d_\text{head}$ per token of context, the first chapter's attention term for one new
# token), and at 2k tokens they slightly outweigh the bytes. The book counts both.
#
# ## The roofline and the ridge point
#
# A device with peak $F$ FLOP/s and memory bandwidth $B$ bytes/s can run a kernel of
# intensity $I$ no faster than
#
# $$
# \text{attainable FLOP/s} = \min(F,\; I \cdot B).
# $$
#
# On a log-log plot that is a sloped line (memory-bound: more intensity, more speed) that
# meets a flat roof (compute-bound). They meet at the **ridge point** $I^* = F / B$. Work
# below the ridge waits for memory; work above it waits for arithmetic. For a whole step the
# same statement reads: its time is the larger of FLOPs$/F$ and bytes$/B$.
#
# The ridge points of the book's accelerators, dense tensor rates (bf16, or fp16 where
# there is no bf16):

# %%
# NBVAL_CHECK_OUTPUT
rows = []
for name in list_gpus():
    g = get_gpu(name)
    dt = "bf16" if "bf16" in g.flops else "fp16"
    rows.append((name, dt, g.peak_flops(dt) / 1e12, g.hbm_bandwidth_Bps / 1e12,
                 ridge_point(g, dt)))
print(table(rows, ["GPU", "dtype", "TFLOP/s", "TB/s", "ridge (FLOP/byte)"],
            ["", "", ".1f", ".2f", ".0f"]))
ridge_h100 = ridge_point("h100-sxm", "bf16")
ridges = [row[-1] for row in rows]

# %% tags=["remove-cell"]
assert round(ridge_h100) == 295
assert (round(min(ridges)), round(max(ridges))) == (37, 419)     # the H20 to the L40S
glue("ridge_h100", f"{ridge_h100:.0f}")
glue("ridge_min", f"{min(ridges):.0f}")
glue("ridge_max", f"{max(ridges):.0f}");

# %% [markdown]
# They range from {glue:text}`ridge_min` to {glue:text}`ridge_max`: to keep an H100's arithmetic busy, a kernel must do about
# {glue:text}`ridge_h100` FLOPs for every byte it reads.
#
# These are datasheet peaks, and a real kernel reaches less of both: the published figures
# below put a well-tuned batch-1 decode at {glue:text}`pub_share_sheet` of an A100's
# datasheet bandwidth, and this machine's measured ceilings, further down, are what its
# own kernels reach. A roofline
# built from datasheet peaks is therefore a lower bound on time, never an estimate of it.
#
# ## How much of an H100 one sequence can use
#
# Put the two together. Batch-1 decode runs at about 1 FLOP/byte; the H100's ridge is
# {glue:text}`ridge_h100`.
# The fraction of the arithmetic it can use is $\min(1, I / I^*)$:

# %%
# NBVAL_CHECK_OUTPUT
i1 = decode_intensity(llama70, 1, 1)
u1 = compute_utilization(i1, ridge_h100)
print(f"batch-1 decode intensity {i1:.3f} FLOP/byte, ridge {ridge_h100:.0f}")
print(f"compute used: {u1:.2%}; idle: {1 - u1:.1%}")

# %% tags=["remove-cell"]
assert round(u1 * 100, 1) == 0.3 and round((1 - u1) * 100, 1) == 99.7
glue("util_b1", f"{u1:.1%}")
glue("waste_b1", f"{1 - u1:.1%}");

# %% [markdown]
# {glue:text}`util_b1` of the arithmetic is used and {glue:text}`waste_b1` sits idle. This is
# no defect of the GPU: one sequence simply gives it one FLOP per byte to do. The way out,
# the subject of the batching chapter, is to give each byte of weights more work.
#
# ## Published: batch-1 decode on A100s, against the roofline
#
# The roofline says batch-1 decode time is the weight bytes over the bandwidth. The gpt-fast
# project published batch-1 decode speeds of Llama-2 on A100-80GB cards
# {cite}`gptfast2023` (figures measured by its authors, not here). Their cards were
# power-limited to 330 W, at which the source says the achievable peak bandwidth is about
# 1,700 GB/s rather than the datasheet's 2,039 GB/s; the predictions below use that 1,700.
# The weights are bf16 (2 bytes per parameter), int8 (1) or int4 in groups of 32 (0.5, plus
# a 16-bit scale and zero point per group), on one GPU:

# %%
# NBVAL_CHECK_OUTPUT
a100 = get_gpu("a100-80gb")
a100_330w = dataclasses.replace(a100, name="a100-80gb at 330 W",
                                hbm_bandwidth_Bps=GPT_FAST_A100_PEAK_BANDWIDTH_BPS)
print(f"published: {GPT_FAST_SOURCE}")
print("batch 1, one A100-80GB, 5-token prompt; predicted at 1,700 GB/s;\n"
      "ratio: published over predicted")
rows, pub, too_big = [], {}, []
for r in published_decode(tp_degree=1):
    if r.gpu_preset != "a100-80gb":
        continue
    m, w = get_model(r.model), WEIGHT_BYTES[r.weights]
    if r.tokens_per_s is None:      # the source ran out of memory; so does servelib
        assert max_decode_batch(m, a100, 5, bytes_per_param=w) == 0
        too_big.append(f"{r.model} in {r.weights}: {fmt_bytes(weight_bytes(m, w))} "
                       "of weights, more than a card")
        continue
    pred = predict_tpot_s(m, a100_330w, 1, 5, bytes_per_param=w)
    pub[r.model, r.weights] = r
    rows.append((r.model, r.weights, pred * 1e3, r.tpot_s * 1e3, r.tpot_s / pred,
                 r.bandwidth_GBps / r.tokens_per_s, r.bandwidth_GBps))
print(table(rows, ["model", "weights", "predicted (ms)", "published (ms)", "ratio",
                   "GB read/token", "achieved GB/s"],
            ["", "", ".2f", ".2f", ".2f", ".2f", ".0f"]))
print("\n".join(too_big))
# No published run beats the roofline, even at the bandwidth those cards reach:
assert all(row[4] > 1 for row in rows)
bf16, int8, int4 = (pub["llama-2-7b", w] for w in ("bf16", "int8", "int4-g32"))
share_330w = bf16.bandwidth_GBps * 1e9 / GPT_FAST_A100_PEAK_BANDWIDTH_BPS
share_sheet = bf16.bandwidth_GBps * 1e9 / a100.hbm_bandwidth_Bps
gain8 = int8.tokens_per_s / bf16.tokens_per_s
gain4 = int4.tokens_per_s / bf16.tokens_per_s
print(f"Llama-2-7B bf16 streams its weights at {share_330w:.0%} of 1,700 GB/s "
      f"({share_sheet:.0%} of the datasheet)")
print(f"tokens/s over bf16: int8 {gain8:.2f}x for 2x fewer bytes, "
      f"int4 {gain4:.2f}x for 4x fewer")

# %% tags=["remove-cell"]
assert (round(share_330w, 2), round(share_sheet, 2)) == (0.82, 0.69)
assert (round(gain8, 2), round(gain4, 2)) == (1.48, 1.88)
bf16_pred = predict_tpot_s(get_model("llama-2-7b"), a100_330w, 1, 5)
glue("pub_share_330w", f"{share_330w:.0%}")
glue("pub_share_sheet", f"{share_sheet:.0%}")
glue("pub_bw_bf16", f"{bf16.bandwidth_GBps:,.0f} GB/s")
glue("pub_bw_int8", f"{int8.bandwidth_GBps:,.0f}")
glue("pub_bw_int4", f"{int4.bandwidth_GBps:,.0f} GB/s")
glue("pub_gain8", f"{gain8:.2f}x")
glue("pub_gain4", f"{gain4:.2f}x")
glue("pub_ratio_bf16", f"{bf16.tpot_s / bf16_pred:.2f}")

# %% [markdown]
# What the published figures show:
#
# - **Decode is bandwidth-bound.** Tokens per second times the bytes of weights is the
#   source's own bandwidth column: Llama-2-7B in bf16 streams its weights at
#   {glue:text}`pub_bw_bf16`, {glue:text}`pub_share_330w` of what those cards can reach
#   ({glue:text}`pub_share_sheet` of the datasheet). The measured time is
#   {glue:text}`pub_ratio_bf16` times the roofline's: the roofline is the floor, and a good
#   implementation lands within a few tens of percent of it.
# - **Quantization cuts bytes, but not time in proportion.** Half the bytes gave
#   {glue:text}`pub_gain8` the tokens per second and a quarter gave {glue:text}`pub_gain4`,
#   not 2x and 4x: the achieved bandwidth falls from {glue:text}`pub_bw_bf16` to
#   {glue:text}`pub_bw_int8` and {glue:text}`pub_bw_int4` as the kernels spend more work per
#   byte unpacking weights, and int4's scales add an eighth of a byte to every weight.
# - **A 70B model in bf16 does not fit one 80 GB card**, in their run and in servelib's
#   arithmetic alike.
#
# ## Measure: this machine's roofline
#
# The two ceilings can be measured rather than read off a datasheet: bandwidth from a
# large memory copy (counting bytes read and written, as the STREAM benchmark does
# {cite}`mccalpin1995stream`), FLOP/s from a large matrix product. Their ratio is this
# machine's ridge. The toy decoder's prefill and decode steps, and decode at several batch
# sizes, then land on the plot at their own intensity and achieved FLOP/s. The figures
# depend on this machine and its load; this cell's output is not checked.

# %%
live = measure_profile(quick=True)
print("measured on:", describe(live))
print(f"copy bandwidth {live['copy_bandwidth_Bps'] / 1e9:.1f} GB/s, "
      f"matmul {live['matmul_flops'] / 1e12:.3f} TFLOP/s: "
      f"measured ridge {live['ridge_flop_per_byte']:.1f} FLOP/byte")
rows = []
for phase in ("prefill", "decode"):
    r = live[phase]
    achieved = r["achieved_flops"]
    rows.append((phase, arithmetic_intensity(r["flops"], r["bytes_moved"]),
                 achieved / 1e12, achieved / live["matmul_flops"]))
print(table(rows, ["step", "FLOP/byte", "achieved TFLOP/s", "of the matmul ceiling"],
            ["", ".1f", ".3f", ".0%"]))
glue("live_ridge", f"{live['ridge_flop_per_byte']:.0f}");

# %%
profiles = [live] + load_profiles(DATA)
fig, ax = plots.new_axes("arithmetic intensity (FLOP/byte)", "attainable FLOP/s",
                         "measured rooflines")
for prof in profiles:
    plots.roofline(ax, prof["matmul_flops"], prof["copy_bandwidth_Bps"],
                   plots.device_label(prof, live))
    color = ax.lines[-2].get_color()
    pts = [prof["prefill"], prof["decode"]] + prof["batching_sweep"]
    ax.scatter([arithmetic_intensity(p["flops"], p["bytes_moved"]) for p in pts],
               [p["flops"] / p["step_s"] for p in pts], color=color, s=14, zorder=3)
h100 = get_gpu("h100-sxm")
plots.roofline(ax, h100.peak_flops("bf16"), h100.hbm_bandwidth_Bps,
               "H100 SXM datasheet (bf16)", color="grey")
plots.legend(fig)
for prof in profiles:
    print(describe(prof))

# %% [markdown]
# *Figure: rooflines from measured ceilings (lines; the dot at the bend is the ridge), with
# the toy decoder's measured steps as points: decode at batch 1, 2, 4, ... and the prefill
# on the right. Notice that decode at batch 1 sits far down the sloped part, at a small
# fraction of the roof, and that raising the batch walks the points up the slope toward the
# ridge. The grey line is an H100's datasheet, for scale.*
#
# This machine's measured ridge is about {glue:text}`live_ridge` FLOP/byte. A CPU's ridge is
# lower than a GPU's, but the shape is the same: batch-1 decode is far below it.
#
# A second run of the same quick measurement, such as the first chapter's, can give a
# different matmul rate, on a busy machine by a factor of two or more: a measurement of a
# few seconds shares the processor with whatever else runs, and a CPU's clock moves with
# load and heat. Both ceilings and every point here come from this one run, so the roof
# and the points agree with each other, whatever the rate of the day.
#
# ## War story: "the GPUs are too slow"
#
# A team self-hosted a 70B model on H100s, two per replica (tensor parallel), and served
# one request at a time. Users saw long answers crawl; the proposal on the table was to
# double the fleet. The arithmetic says otherwise: at batch 1 each step reads all the
# weights for one token, so more replicas each crawl at the same pace. The fix turned out
# to be one line of serving configuration, letting the engine batch concurrent requests,
# as many as the replica's KV memory holds. With 2k-token conversations that is not many:
# two H100s keep 130 GiB of weights, and what is left holds {glue:text}`war_fits` sequences
# (10% reserve, the KV-cache chapter's arithmetic).

# %%
# NBVAL_CHECK_OUTPUT
ctx, tp, gpu = 2048, 2, "h100-sxm"
fits = max_decode_batch(llama70, gpu, ctx, tp_degree=tp)   # what the KV memory holds
batch = check_batch_fits(llama70, gpu, fits, ctx, tp_degree=tp)
b1 = decode_tokens_per_s(llama70, gpu, 1, ctx, tp_degree=tp)
doubled = 2 * b1                                    # twice the GPUs, still batch 1
batched = decode_tokens_per_s(llama70, gpu, batch, ctx, tp_degree=tp)
tpot_b1, tpot_fit = (predict_tpot_s(llama70, gpu, b, ctx, tp_degree=tp)
                     for b in (1, batch))
print(f"one TP={tp} replica's KV memory holds {fits} sequences of {ctx:,} tokens")
print(f"today, batch 1 on one replica : {b1:5.0f} tokens/s")
print(f"wrong: double the fleet       : {doubled:5.0f} tokens/s, 2x the GPU bill")
print(f"right: batch {batch} on the replica: {batched:5.0f} tokens/s "
      f"({batched / b1:.0f}x)")
print(f"each sequence still gets a token every {tpot_fit * 1e3:.0f} ms "
      f"(batch 1: {tpot_b1 * 1e3:.0f} ms)")
comm = [decode_step(llama70, gpu, b, ctx, tp_degree=tp).tokens_per_s
        for b in (1, batch)]
print(f"with the all-reduces TP={tp} adds (batching chapter): {comm[0]:.0f} -> "
      f"{comm[1]:.0f} tokens/s ({comm[1] / comm[0]:.0f}x)")
# The all-reduces cost about the same per step whatever the batch: batching shares them.
assert comm[1] / comm[0] > batched / b1

# %% tags=["remove-cell"]
assert fits == 41 and round(batched / b1) == 34
glue("war_fits", fits)
glue("war_gain", f"{batched / b1:.0f}")
glue("war_tpot_b1", f"{tpot_b1 * 1e3:.0f} ms")
glue("war_tpot_fit", f"{tpot_fit * 1e3:.0f} ms");

# %% [markdown]
# Doubling the fleet doubles throughput and the bill. Batching the {glue:text}`war_fits`
# sequences that fit multiplies throughput by {glue:text}`war_gain` on the hardware already
# paid for, and each sequence's token gap grows only from {glue:text}`war_tpot_b1` to
# {glue:text}`war_tpot_fit`, because the weight read is shared by the whole batch. A larger
# batch would need more KV memory: longer conversations hold fewer, and a batch the memory
# cannot hold is no plan at all.
#
# ## Beginner mistake: benchmarking batch-1 decode and blaming the hardware
#
# "We ran our model on the new GPU and it reached {glue:text}`util_b1` of its advertised FLOP/s; the chip
# is slow." The benchmark measured the workload, not the chip: at batch 1 no GPU can do
# better. Measure at the batch you will serve, and at the context you will serve it at.
# Llama-3-70B on a node of eight H100s (TP=8), a batch of up to 256, capped at what the KV
# memory holds at each context:

# %%
# NBVAL_CHECK_OUTPUT
rows, served = [], {}
for ctx in (1, 2048, 8192):
    batch = min(256, max_decode_batch(llama70, "h100-sxm", ctx, tp_degree=8))
    i = decode_intensity(llama70, batch, ctx)
    served[ctx] = (batch, compute_utilization(i, ridge_h100))
    rows.append((ctx, batch, i, served[ctx][1]))
print(table(rows, ["context", "batch", "FLOP/byte", "share of the arithmetic"],
            [",d", "d", ".1f", ".1%"]))

# %% tags=["remove-cell"]
assert served[1][1] > 0.85 and served[8192][0] == 183
assert (round(served[2048][1], 2), round(served[8192][1], 2)) == (0.41, 0.16)
glue("served_1", f"{served[1][1]:.0%}")
glue("served_2k", f"{served[2048][1]:.0%}")
glue("served_8k", f"{served[8192][1]:.0%}")
glue("served_8k_batch", served[8192][0]);

# %% [markdown]
# With a one-token context, batch 256 would use {glue:text}`served_1` of the arithmetic;
# no service runs at that context. At 2k tokens the same batch uses {glue:text}`served_2k`,
# and at 8k the node holds only {glue:text}`served_8k_batch` sequences, which use
# {glue:text}`served_8k`: every sequence reads its own KV cache, which the batch does not
# share (the batching chapter). A benchmark at the wrong batch or the wrong context
# misjudges the chip either way.

# %% [markdown]
# The same effect on this machine: the toy decoder's achieved FLOP/s at batch 1 and at the
# largest batch of the sweep, as a share of the measured matmul ceiling (not checked):

# %%
print("measured on:", describe(live))
for p in (live["batching_sweep"][0], live["batching_sweep"][-1]):
    rate = p["flops"] / p["step_s"]
    print(f"batch {p['batch']:>3}: {rate / 1e9:8.1f} GFLOP/s = "
          f"{rate / live['matmul_flops']:.1%} of the measured matmul ceiling")

# %% [markdown]
# ## Summary: the numbers to carry
#
# | what | value |
# |---|---|
# | arithmetic intensity | FLOPs / bytes moved |
# | ridge point, H100 SXM bf16 | {glue:text}`ridge_h100` FLOP/byte |
# | batch-1 decode, fp16 weights | about 1 FLOP/byte |
# | share of an H100 it can use | {glue:text}`util_b1` ({glue:text}`waste_b1` idle) |
# | this machine's measured ridge | {glue:text}`live_ridge` FLOP/byte |
# | published, Llama-2-7B bf16 batch 1 on one A100 (gpt-fast) | {glue:text}`pub_share_330w` of the bandwidth its cards reach |
# | published, int8 and int4 over bf16 | {glue:text}`pub_gain8` and {glue:text}`pub_gain4` the tokens/s, for 2x and 4x fewer bytes |
#
# Below the ridge, time is bytes over bandwidth; above it, FLOPs over peak. Batch-1 decode
# sits far below the ridge, and so does every extra replica that also serves one request at
# a time: what lifts it is more sequences per read of the weights.
#
# ## Exercises
#
# Each exercise states every constant it needs; the GPU presets of `servelib.hardware`
# hold the same datasheet numbers. Solutions are behind the toggles.
#
# **rl-1.** An A100 80GB does 312 dense bf16 TFLOP/s and reads 2,039 GB/s. What is its ridge
# point in FLOP/byte?

# %% tags=["hide-input"]
### BEGIN SOLUTION
by_hand = 312e12 / 2039e9                  # peak FLOP/s over bytes/s
answer = ridge_point("a100-80gb", "bf16")
print(f"312e12 / 2,039e9 = {by_hand:.1f} FLOP/byte; servelib: {answer:.1f}")
### END SOLUTION
check("rl-1", answer)

# %% [markdown]
# **rl-2.** A T4 has no bf16 tensor cores; it does 65 dense fp16 TFLOP/s and reads 320 GB/s.
# What is its fp16 ridge point?

# %% tags=["hide-input"]
### BEGIN SOLUTION
by_hand = 65e12 / 320e9
answer = ridge_point("t4", "fp16")
print(f"65e12 / 320e9 = {by_hand:.1f} FLOP/byte; servelib: {answer:.1f}")
### END SOLUTION
check("rl-2", answer)

# %% [markdown]
# **rl-3.** What is the arithmetic intensity of one decode step of Llama-3-8B (8.03 billion
# parameters, fp16 weights; KV cache 128 KiB per token in fp16; 32 layers of 32 query heads
# of size 128) at batch 1 and a context of 4,096 tokens? Count the weights' $2P$ FLOPs and
# attention's $4 L H d_\text{head}$ FLOPs per token of context.

# %% tags=["hide-input"]
### BEGIN SOLUTION
P, kv, c = 8.03e9, 128 * 1024, 4096        # parameters, KV bytes per token, context
L, H, d = 32, 32, 128
flops = 2 * P + 4 * L * H * d * c          # the weights, then attention over c tokens
bytes_read = 2 * P + c * kv                # fp16 weights, then the sequence's KV
by_hand = flops / bytes_read
answer = decode_intensity(get_model("llama-3-8b"), 1, c)
print(f"{flops / 1e9:.2f} GFLOP / {bytes_read / 1e9:.2f} GB = {by_hand:.3f} FLOP/byte; "
      f"servelib: {answer:.3f}")
### END SOLUTION
check("rl-3", answer)

# %% [markdown]
# **rl-4.** What fraction of an L4's bf16 arithmetic (121 TFLOP/s, 300 GB/s) can a batch-1
# decode step of Llama-3-8B (8.03 billion parameters, 128 KiB of KV per token; 32 layers of
# 32 query heads of size 128) use at a context of 4,096 tokens, attention's FLOPs included?
# Answer as a fraction.

# %% tags=["hide-input"]
### BEGIN SOLUTION
P, kv, c, L, H, d = 8.03e9, 128 * 1024, 4096, 32, 32, 128
intensity = (2 * P + 4 * L * H * d * c) / (2 * P + c * kv)
ridge = 121e12 / 300e9
by_hand = min(1, intensity / ridge)
answer = compute_utilization(decode_intensity(get_model("llama-3-8b"), 1, c),
                             ridge_point("l4", "bf16"))
print(f"{intensity:.3f} / {ridge:.0f} = {by_hand:.5f}; servelib: {answer:.5f}")
### END SOLUTION
check("rl-4", answer)

# %% [markdown]
# **rl-5.** On an H100 SXM (989.5 TFLOP/s bf16, 3.35 TB/s), what FLOP/s can a kernel of
# intensity 50 FLOP/byte attain at most? Answer in TFLOP/s.

# %% tags=["hide-input"]
### BEGIN SOLUTION
by_hand = min(989.5, 50 * 3.35)            # min(F, I x B), in TFLOP/s
answer = attainable_flops(50, h100.peak_flops("bf16"), h100.hbm_bandwidth_Bps) / 1e12
print(f"min(989.5, 50 x 3.35) = {by_hand:.1f} TFLOP/s; servelib: {answer:.1f}")
### END SOLUTION
check("rl-5", answer)

# %% [markdown]
# **rl-6.** The war story's replica serves Llama-3-70B (70.55 billion parameters; 320 KiB of
# KV cache per token, over 8 KV heads) in fp16 with TP=2 on two H100 SXM cards (80 GiB,
# 989.5 dense bf16 TFLOP/s and 3.35 TB/s each), at 2,048-token contexts with a 10% reserve.
# By what factor does the largest batch its KV memory holds raise its predicted decode
# tokens/s over batch 1? (Roofline, communication left out.)

# %% tags=["hide-input"]
### BEGIN SOLUTION
P, kv, c, tp = 70.55e9, 320 * 1024, 2048, 2
budget = (80 * 2**30 - 2 * P / tp) * 0.9   # per card, after its half of the weights
batch = int(budget // (kv / tp * c))       # each card holds 4 of the 8 KV heads
step_1 = (2 * P + kv * c) / tp / 3.35e12   # memory-bound: weights once, KV per sequence
step_b = (2 * P + batch * kv * c) / tp / 3.35e12
flops_b = batch * 2 * P / tp / 989.5e12    # well under step_b: still memory-bound
by_hand = batch * step_1 / step_b
largest = max_decode_batch(llama70, "h100-sxm", c, tp_degree=tp)
answer = (decode_tokens_per_s(llama70, "h100-sxm", largest, c, tp_degree=tp)
          / decode_tokens_per_s(llama70, "h100-sxm", 1, c, tp_degree=tp))
print(f"batch {batch}: steps of {step_1 * 1e3:.1f} and {step_b * 1e3:.1f} ms "
      f"(compute {flops_b * 1e3:.1f} ms), {by_hand:.2f}x")
print(f"servelib: batch {largest}, {answer:.2f}x")
### END SOLUTION
check("rl-6", answer)
