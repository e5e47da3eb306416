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
# # Batching
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-serving-book/serving-capacity-economics/blob/v0.1.0/notebooks/04_batching.ipynb)
#
# Batch-1 decode leaves almost all of a GPU's arithmetic idle. Batching puts it to work:
# many sequences share each read of the weights. This chapter derives exactly how much
# that buys, why it stops paying at some batch size, and why long contexts stop it sooner:
# each sequence adds its own KV cache to every step's reads, and that part is never
# shared. It then sweeps the batch size on this
# machine, with the prediction drawn over the measurement, and closes with the other way to
# spread a model over GPUs, tensor parallelism, and how much of it to use.
#
# **You will be able to**
# 1. write decode bytes per step as $W + B \cdot KV$ and the intensity that follows;
# 2. find the batch at which decode turns compute-bound, and the context beyond which it never does;
# 3. read a latency/throughput trade-off and pick a batch size against a TPOT target;
# 4. show that batching, not more GPUs, fixes low throughput;
# 5. pick a {term}`TP degree` from the concurrency and latency the service needs, knowing what each step up costs.

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

# %%
import math
import pathlib

from servelib import plots
from servelib.book import glue
from servelib.grading import check
from servelib.hardware import get_gpu, ridge_point
from servelib.measure import describe, load_profiles, measure_profile
from servelib.memory import capacity, kv_bytes_per_sequence, min_tp_degree, weight_bytes
from servelib.models import get_model
from servelib.roofline import (critical_batch, decode_bytes_per_step, decode_flops_per_step, decode_intensity,
                               decode_intensity_limit, decode_tokens_per_s, predict_tpot_s)
from servelib.units import GiB, fmt_bytes

plots.apply_style()
DATA = pathlib.Path("../book/data")   # profiles measured on real GPUs, committed with the book

# %% [markdown]
# ## Bytes per step: $W + B \cdot KV$
#
# One decode step for a batch of $B$ sequences reads every weight once, because all $B$
# tokens go through the same matrices together, and reads each sequence's own KV cache:
#
# $$
# \begin{aligned}
# \text{bytes per step} &= W + B \cdot KV(\text{context}), &
# \text{FLOPs per step} &= 2PB, \\
# I(B) &= \frac{2PB}{W + B \cdot KV}.
# \end{aligned}
# $$
#
# With 2-byte weights $W = 2P$, so while $B \cdot KV \ll W$ the intensity is about $B$:
# every extra sequence is almost free, since it adds FLOPs but hardly any bytes. For
# Llama-3-70B ({glue:text}`w70_gib` of fp16 weights at its exact 70.55 billion parameters,
# 320 KiB of KV per token):

# %%
# NBVAL_CHECK_OUTPUT
llama70 = get_model("llama-3-70b")
W70 = weight_bytes(llama70)
print(f"{'batch':>6}{'context':>9}{'weights GiB':>13}{'KV GiB':>8}{'FLOP/byte':>11}")
for ctx in (1024, 8192):
    kv = kv_bytes_per_sequence(llama70, ctx)
    for batch in (1, 8, 32, 128):
        total = decode_bytes_per_step(W70, kv, batch)
        print(f"{batch:>6}{ctx:>9}{W70 / GiB:>13.1f}{batch * kv / GiB:>8.1f}"
              f"{decode_flops_per_step(llama70.n_params, batch) / total:>11.1f}")
kv_over_w = 128 * kv / W70                   # kv is the 8k-context sequence here
print(f"batch 128 at 8k: KV bytes / weight bytes = {kv_over_w:.1f}")
assert decode_bytes_per_step(W70, kv, 128) == W70 + 128 * kv
assert round(W70 / GiB, 1) == 131.4 and round(kv_over_w, 1) == 2.4

# %% tags=["remove-cell"]
glue("w70_gib", fmt_bytes(W70))
glue("kv_over_w_8k", f"{kv_over_w:.1f}");

# %% [markdown]
# At 1k tokens of context the KV read stays small next to the weights and intensity tracks
# the batch. At 8k, 128 sequences read {glue:text}`kv_over_w_8k` times as many bytes of KV as of weights,
# and intensity falls far behind the batch.
#
# ## Where decode turns compute-bound
#
# Decode becomes compute-bound when $I(B)$ reaches the ridge $I^*$. Solving for $B$:
#
# $$
# B^* = \frac{I^* \, W}{2P - I^* \cdot KV},
# $$
#
# which exists only while $2P > I^* \cdot KV$. As $B$ grows, $I(B)$ tends to
# $2P / KV$: once the KV reads dominate, each extra sequence brings $2P$ FLOPs and $KV$ bytes.
# When that limit lies below the ridge, no batch makes decode compute-bound.

# %%
# NBVAL_CHECK_OUTPUT
ridge = ridge_point("h100-sxm", "bf16")
llama8 = get_model("llama-3-8b")
print(f"H100 SXM bf16 ridge: {ridge:.0f} FLOP/byte")
print(f"{'model':<12}{'context':>9}{'limit 2P/KV':>13}{'compute-bound from batch':>26}")
for m in (llama8, llama70):
    for ctx in (128, 1024, 2048, 8192, 32768):
        b = critical_batch(m, ridge, ctx)
        print(f"{m.name:<12}{ctx:>9}{decode_intensity_limit(m, ctx):>13.0f}{b if b else 'never':>26}")
assert critical_batch(llama70, ridge, 1024) == 993 and critical_batch(llama70, ridge, 8192) is None
assert round(decode_intensity_limit(llama70, 8192) / ridge, 2) == 0.18

# %% tags=["remove-cell"]
glue("limit70_8k", f"{decode_intensity_limit(llama70, 8192):.0f}")
glue("limit70_8k_share", f"{decode_intensity_limit(llama70, 8192) / ridge:.0%}")
glue("bstar70_1k", critical_batch(llama70, ridge, 1024));

# %% [markdown]
# For Llama-3-70B at 1k context decode turns compute-bound from a batch of
# {glue:text}`bstar70_1k`; at 8k the limit is {glue:text}`limit70_8k` FLOP/byte,
# {glue:text}`limit70_8k_share` of the ridge, and no batch gets there. Llama-3-8B has a smaller ratio of parameters to KV, so
# it stops even sooner.

# %%
batches = [2**k for k in range(11)]
fig, ax = plots.new_axes("batch size", "decode arithmetic intensity (FLOP/byte)",
                         "Llama-3-70B, fp16 weights and KV", logx=True, logy=True)
for ctx in (512, 2048, 8192, 32768):
    ax.plot(batches, [decode_intensity(llama70, b, ctx) for b in batches], marker="o", ms=3,
            label=f"context {ctx:,}")
ax.axhline(ridge, color="grey", ls="--", lw=1, label=f"H100 ridge ({ridge:.0f})")
plots.legend(fig)

# %% [markdown]
# *Figure: decode intensity against batch size for four context lengths, with the H100's
# ridge dashed. Notice that every curve starts at 1 and rises with slope 1, then bends flat
# at its limit $2P/KV$: at 512 tokens the bend is above the ridge, at 8k and 32k it is far
# below, so long-context decode stays memory-bound at any batch.*
#
# ## Long contexts cap the gain
#
# The same arithmetic in tokens per second, predicted for Llama-3-8B on one H100. Each
# curve stops at the batch the KV cache can hold (the KV-cache chapter's concurrency, with a
# 10% reserve):

# %%
fig, ax = plots.new_axes("batch size", "decode tokens/s (predicted)", "Llama-3-8B on one H100 SXM",
                         logx=True, logy=True)
for ctx in (1024, 4096, 16384):
    cap = capacity(llama8, "h100-sxm", n_gpus=1, context_len=ctx).sequences_per_replica
    bs = [b for b in batches if b <= cap] + [cap]
    ax.plot(bs, [decode_tokens_per_s(llama8, "h100-sxm", b, ctx) for b in bs], marker="o", ms=3,
            label=f"context {ctx:,} (fits {cap})")
plots.legend(fig)

# %% [markdown]
# *Figure: predicted decode throughput against batch size. Notice how the curves part: at
# 1k context throughput grows almost in proportion to the batch up to a few hundred; at 16k
# it flattens early, because every added sequence adds its whole KV read, and memory holds
# few such sequences anyway.*
#
# ## Measure: a batching sweep on this machine
#
# The toy decoder's decode step timed at growing batch sizes, each with two predictions
# from this machine's measured ceilings: the roofline, the larger of compute time and
# memory time (the step overlaps the two perfectly), and their sum (it overlaps nothing).
# The first is a lower bound, the second an upper one; they differ by at most 2x, at the
# ridge. On a GPU the sweep runs until the KV cache no longer fits and stops cleanly there,
# reporting the batch it reached. Not checked: the numbers depend on the machine and its
# load.

# %%
live = measure_profile(quick=True)
print("measured on:", describe(live))
print(f"{'batch':>6}{'step ms':>9}{'roofline':>10}{'no overlap':>12}{'tokens/s':>10}")
for p in live["batching_sweep"]:
    print(f"{p['batch']:>6}{p['step_s'] * 1e3:>9.2f}{p['predicted_step_s'] * 1e3:>10.2f}"
          f"{p['predicted_serial_s'] * 1e3:>12.2f}{p['tokens_per_s']:>10.0f}")
if live["sweep_stopped_at"]:
    print(f"stopped at batch {live['sweep_stopped_at']}: {live['sweep_stop_reason']}")
sw = live["batching_sweep"]
glue("live_gain", f"{sw[-1]['tokens_per_s'] / sw[0]['tokens_per_s']:.0f}")
glue("live_batch_max", sw[-1]["batch"]);

# %%
profiles = [live] + load_profiles(DATA)
fig, ax = plots.new_axes("batch size", "decode tokens/s", "batching sweep: measured and predicted", logy=True)
for prof in profiles:
    pts = prof["batching_sweep"]
    bs = [p["batch"] for p in pts]
    plots.sweep(ax, bs, [p["tokens_per_s"] for p in pts], [b / p["predicted_step_s"] for b, p in zip(bs, pts)],
                label=plots.device_label(prof, live),
                serial_tokens_per_s=[b / p["predicted_serial_s"] for b, p in zip(bs, pts)])
plots.sweep_key(ax)
plots.legend(fig)
for prof in profiles:
    print(describe(prof))

# %% [markdown]
# *Figure: decode tokens/s of the toy decoder against batch size (points), with the
# roofline prediction from the same machine's measured copy bandwidth and matmul FLOP/s
# (dashed) and the no-overlap prediction (dotted). Notice the two regimes: while
# memory-bound, throughput grows almost in proportion to the batch; past the measured ridge
# it flattens at the matmul ceiling. The measurement runs between the two predictions,
# furthest from the roofline near the ridge, where a CPU overlaps memory traffic and
# arithmetic least.*
#
# Here the largest batch ({glue:text}`live_batch_max`) gives {glue:text}`live_gain` times the
# tokens/s of batch 1, on the same hardware. A second run can give other figures (the
# earlier chapters' measurements too): a few seconds of timing share the machine with
# whatever else it runs. The predictions use the ceilings of this same run.
#
# ## The latency/throughput trade-off
#
# Batching is not free for the individual user. Each step takes longer as the batch grows,
# slowly while memory-bound and in proportion once compute-bound. Throughput is what the
# operator sees, TPOT what each user sees:

# %%
# NBVAL_CHECK_OUTPUT
ctx = 2048
print(f"Llama-3-8B, one H100 SXM, context {ctx}")
print(f"{'batch':>6}{'TPOT ms':>9}{'tokens/s':>10}{'per user tokens/s':>19}")
rows = {}
for b in (1, 16, 64, 128, 256, 384):
    tpot = predict_tpot_s(llama8, "h100-sxm", b, ctx)
    rows[b] = tpot
    print(f"{b:>6}{tpot * 1e3:>9.2f}{b / tpot:>10.0f}{1 / tpot:>19.1f}")
tpot_growth, tput_growth = rows[64] / rows[1], 64 * rows[1] / rows[64]
print(f"batch 1 -> 64: TPOT x{tpot_growth:.1f}, tokens/s x{tput_growth:.0f}")
assert (round(tpot_growth, 1), round(tput_growth)) == (2.0, 31)

# %% tags=["remove-cell"]
glue("tpot_growth_64", f"{tpot_growth:.1f}")
glue("tput_growth_64", f"{tput_growth:.0f}");

# %% [markdown]
# From batch 1 to 64 throughput grows {glue:text}`tput_growth_64` times while TPOT grows only
# {glue:text}`tpot_growth_64` times.
# A TPOT target (say 50 ms for a chat product) sets the largest batch worth running;
# below it, a larger batch is nearly free throughput.
#
# ## Batch before you buy GPUs
#
# A service must generate 5,000 tokens/s of Llama-3-8B at 2k contexts. How many H100s?

# %%
# NBVAL_CHECK_OUTPUT
need = 5000
for b in (1, 64):
    per_gpu = decode_tokens_per_s(llama8, "h100-sxm", b, ctx)
    print(f"batch {b:>3}: {per_gpu:6.0f} tokens/s per GPU -> {math.ceil(need / per_gpu):>3} GPUs")
assert math.ceil(need / decode_tokens_per_s(llama8, "h100-sxm", 1, ctx)) > 20 * math.ceil(
    need / decode_tokens_per_s(llama8, "h100-sxm", 64, ctx))

# %% [markdown]
# ## Tensor parallelism makes a model fit, not run cheaper
#
# Llama-3-70B in fp16 is {glue:text}`w70_gib` of weights; an H100 holds {glue:text}`h100_gib`.
# It cannot run on one card at all. {term}`Tensor parallelism` {cite}`shoeybi2019megatron`
# splits every weight matrix across devices, so each holds and reads $W/\text{TP}$. For a
# model this size that is the reason to use it: without it there is nowhere to put the
# weights. It does not make the work per GPU more efficient. At a given batch, TP divides each
# device's bytes, so TPOT falls, but the tokens/s *per GPU* stay where they were (the
# roofline ignores the all-reduce communication TP adds, so real TP does a little worse):

# %%
# NBVAL_CHECK_OUTPUT
print(f"smallest TP for Llama-3-70B fp16 on H100 at 8k: {min_tp_degree(llama70, 'h100-sxm', context_len=8192)}")
print(f"fits on one H100: {capacity(llama70, 'h100-sxm', n_gpus=1, context_len=8192).fits}")
print(f"{'TP':>3}{'TPOT ms (batch 8)':>19}{'tokens/s per GPU':>18}")
per_gpu, tpots = {}, {}
for tp in (2, 4, 8):
    tpots[tp] = predict_tpot_s(llama70, "h100-sxm", 8, 2048, tp_degree=tp)
    per_gpu[tp] = 8 / tpots[tp] / tp
    print(f"{tp:>3}{tpots[tp] * 1e3:>19.1f}{per_gpu[tp]:>18.0f}")
print(f"one H100 holds {fmt_bytes(get_gpu('h100-sxm').memory_bytes)}, the weights need {fmt_bytes(W70)}")
assert min_tp_degree(llama70, "h100-sxm", context_len=8192) == 2
assert max(per_gpu.values()) / min(per_gpu.values()) < 1.01
assert round(tpots[2] / tpots[8], 2) == 4.0

# %% tags=["remove-cell"]
glue("h100_gib", fmt_bytes(get_gpu("h100-sxm").memory_bytes));

# %% [markdown]
# Quadrupling the TP degree cuts TPOT by four and leaves tokens/s per GPU unchanged.
#
# ## Choosing the TP degree from the load
#
# On an 8-GPU node the same 70B model can run as four TP=2 replicas, two TP=4 replicas or
# one TP=8 replica. A larger degree holds *more* sequences on the same node, because every
# replica keeps its own copy of the weights and fewer replicas means fewer copies. But each
# step of a TP group waits for all-reduces across all its devices, a failure stops the
# whole group, and there are fewer independent replicas to route load to. So the rule is:
# use the smallest degree that holds the load, meaning the concurrency and latency the
# service needs; every degree above that adds communication between devices and buys
# nothing the load asked for. Say the load is 100 concurrent 8k conversations (the counts
# use the exact parameter count of Llama-3-70B, so they run a little below a plan built on
# a round 70 billion):

# %%
# NBVAL_CHECK_OUTPUT
target = 100
print(f"Llama-3-70B fp16, 8 x H100, 8k context, target {target} conversations")
chosen = None
for tp in (2, 4, 8):
    c = capacity(llama70, "h100-sxm", n_gpus=8, context_len=8192, tp_degree=tp)
    holds = c.concurrency >= target
    chosen = chosen or (tp if holds else None)
    print(f"TP={tp}: {c.replicas} replicas x {c.sequences_per_replica:>3} = {c.concurrency:>3} conversations"
          f"{'  holds the target' if holds else ''}")
print(f"smallest TP that holds the target: {chosen}")
assert chosen == 4

# %% [markdown]
# ## Beginner mistake: maximizing the TP degree
#
# "The node has eight GPUs, so shard the model eight ways." The unit of capacity is a
# replica, and a TP=8 replica is eight GPUs. Llama-3-8B fits one H100 with room for
# {glue:text}`seqs8_tp1` 8k-token conversations. A service that must deliver 1,000 tokens/s
# of it needs:

# %%
# NBVAL_CHECK_OUTPUT
demand, ctx8 = 1000, 8192          # tokens/s to deliver, 8k-token conversations
print(f"smallest TP for Llama-3-8B on H100 at 8k: {min_tp_degree(llama8, 'h100-sxm', context_len=ctx8)}")
gpus, per_gpu8 = {}, {}
for tp, label in ((8, "wrong: TP=8"), (1, "right: TP=1")):
    c = capacity(llama8, "h100-sxm", n_gpus=tp, context_len=ctx8, tp_degree=tp)
    per_replica = decode_tokens_per_s(llama8, "h100-sxm", c.sequences_per_replica, ctx8, tp_degree=tp)
    gpus[tp] = math.ceil(demand / per_replica) * tp
    per_gpu8[tp] = per_replica / tp
    print(f"{label}: a replica is {tp} GPU(s), holds {c.sequences_per_replica} conversations, up to "
          f"{per_replica:,.0f} tokens/s ({per_replica / tp:,.0f} per GPU) -> {gpus[tp]} GPU(s)")
tp1_shortfall = 1 - per_gpu8[1] / per_gpu8[8]
print(f"tokens/s per GPU, TP=1 below TP=8: {tp1_shortfall:.0%}")
assert (gpus[1], gpus[8]) == (1, 8)
assert capacity(llama8, "h100-sxm", n_gpus=1, context_len=ctx8).sequences_per_replica == 58
assert round(tp1_shortfall, 2) == 0.18

# %% tags=["remove-cell"]
glue("seqs8_tp1", capacity(llama8, "h100-sxm", n_gpus=1, context_len=ctx8).sequences_per_replica)
glue("tp1_shortfall", f"{tp1_shortfall:.0%}");

# %% [markdown]
# Eight GPUs where one serves the load. As the load grows, add TP=1 replicas: per GPU they
# deliver {glue:text}`tp1_shortfall` fewer tokens/s than TP=8 in this roofline (TP=8 packs more
# sequences into its batch), and the roofline leaves out the all-reduces a TP=8
# replica performs in every layer of every step, and each replica fails alone instead of
# taking eight GPUs down with it.
#
# ## Summary: the numbers to carry
#
# | what | value |
# |---|---|
# | decode bytes per step | $W + B \cdot KV$ |
# | intensity | $2PB / (W + B \cdot KV)$, about $B$ at short context, at most $2P/KV$ |
# | Llama-3-70B on H100: compute-bound from batch (1k context) | {glue:text}`bstar70_1k` |
# | Llama-3-70B intensity limit at 8k | {glue:text}`limit70_8k` FLOP/byte (never compute-bound) |
# | this machine: tokens/s, largest batch over batch 1 | {glue:text}`live_gain` x |
#
# A batch pays for one pass over the weights together, while every sequence still pays for
# its own KV cache, so long contexts cap what batching gains. Low decode throughput calls
# for bigger batches on the GPUs already there before it calls for more GPUs. Tensor
# parallelism is what lets a large model fit at all: pick the smallest degree that holds the
# concurrency and latency you need, since each larger degree adds communication between
# devices.
#
# ## Exercises
#
# Each exercise states every constant it needs; model and GPU presets in servelib hold the
# same numbers. Weights and KV cache in fp16 (2 bytes). Solutions are behind the toggles.
#
# **bt-1.** Llama-3-70B (70.55 billion parameters, 320 KiB of KV per token) decodes a
# batch of 32 sequences at a 4,096-token context on one (hypothetical) device that holds it
# all. How many GB ($10^9$ bytes) does one step read?

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = decode_bytes_per_step(weight_bytes(llama70), kv_bytes_per_sequence(llama70, 4096), 32) / 1e9
### END SOLUTION
check("bt-1", answer)

# %% [markdown]
# **bt-2.** At what batch size does decode of Llama-3-8B (8.03 billion parameters, 128 KiB
# of KV per token) at a 128-token context turn compute-bound on an H100 SXM (ridge
# 989.5e12 / 3.35e12 FLOP/byte)? Give the smallest whole batch.

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = critical_batch(llama8, ridge_point("h100-sxm"), 128)
### END SOLUTION
check("bt-2", answer)

# %% [markdown]
# **bt-3.** What is the highest arithmetic intensity Llama-3-8B decode can reach, at any
# batch, with 32,768-token contexts? (FLOP/byte)

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = decode_intensity_limit(llama8, 32_768)
### END SOLUTION
check("bt-3", answer)

# %% [markdown]
# **bt-4.** What is the smallest TP degree that serves Llama-3-70B in fp16 on A100 40GB
# cards (40 GiB) at 4,096-token contexts, with a 10% reserve and at least one full
# sequence per device?

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = min_tp_degree(llama70, "a100-40gb", context_len=4096)
### END SOLUTION
check("bt-4", answer)

# %% [markdown]
# **bt-5.** On a node of 8 H100s (80 GiB), Llama-3-70B runs as two TP=4 replicas at 8k
# contexts with a 10% reserve. How many conversations does the node hold?

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = capacity(llama70, "h100-sxm", n_gpus=8, context_len=8192, tp_degree=4).concurrency
### END SOLUTION
check("bt-5", answer)

# %% [markdown]
# **bt-6.** Predict the decode throughput (tokens/s) of Llama-3-8B on one H100 SXM at a
# batch of 64 and a 2,048-token context.

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = decode_tokens_per_s(llama8, "h100-sxm", 64, 2048)
### END SOLUTION
check("bt-6", answer)
