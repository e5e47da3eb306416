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
# spread a model over GPUs, tensor parallelism: what its all-reduces cost, held against
# published measurements and timed here, and how much of it to use.
#
# **You will be able to**
# 1. write decode bytes per step as $W + B \cdot KV$ and the intensity that follows;
# 2. find the batch at which decode turns compute-bound, and the context beyond which it never does;
# 3. read a latency/throughput trade-off and pick a batch size against a TPOT target;
# 4. show that batching, not more GPUs, fixes low throughput;
# 5. model the all-reduces tensor parallelism adds to every step, and pick a {term}`TP degree` from the concurrency and latency the service needs.

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
import math
import pathlib

from servelib import plots
from servelib.book import glue, table
from servelib.grading import check
from servelib.hardware import get_gpu, ridge_point
from servelib.interconnect import fit_allreduce, get_link
from servelib.measure import describe, load_profiles, measure_profile, time_allreduce
from servelib.memory import capacity, kv_bytes_per_sequence, min_tp_degree, weight_bytes
from servelib.models import get_model
from servelib.published import (GPT_FAST_SOURCE, fit_tp_scaling, predicted_tpot_s,
                                published_decode, weights_read_per_gpu_bytes)
from servelib.roofline import (check_batch_fits, critical_batch, decode_bytes_per_step,
                               decode_intensity, decode_intensity_limit, decode_step,
                               decode_tokens_per_s, max_decode_batch,
                               tp_allreduce_bytes)
from servelib.units import GiB, KiB, fmt_bytes

plots.apply_style()
# Profiles committed with the book (python -m servelib.measure).
DATA = pathlib.Path("../book/data")

# %% [markdown]
# ## Bytes per step: $W + B \cdot KV$
#
# One decode step for a batch of $B$ sequences reads every weight once, because all $B$
# tokens go through the same matrices together, and reads each sequence's own KV cache.
# Each sequence does $2P$ FLOPs through the weights and $A = 4 L H d_\text{head} \cdot
# \text{context}$ more in attention over its cache:
#
# $$
# \begin{aligned}
# \text{bytes per step} &= W + B \cdot KV(\text{context}), &
# \text{FLOPs per step} &= B\,(2P + A), \\
# I(B) &= \frac{B\,(2P + A)}{W + B \cdot KV}.
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
rows = []
for ctx in (1024, 8192):
    kv = kv_bytes_per_sequence(llama70, ctx)
    for batch in (1, 8, 32, 128):
        step = decode_bytes_per_step(W70, kv, batch)
        rows.append((batch, ctx, W70 / GiB, batch * kv / GiB, step / GiB,
                     decode_intensity(llama70, batch, ctx)))
print(table(rows, ["batch", "context", "weights GiB", "KV GiB", "step GiB",
                   "FLOP/byte"], ["", ",d", ".1f", ".1f", ".1f", ".1f"]))
kv_over_w = 128 * kv / W70                   # kv is the 8k-context sequence here
print(f"batch 128 at 8k: KV bytes / weight bytes = {kv_over_w:.1f}")
assert decode_bytes_per_step(W70, kv, 128) == W70 + 128 * kv

# %% tags=["remove-cell"]
# The figures the prose quotes, pinned (run by the tests, hidden in the book).
assert round(W70 / GiB, 1) == 131.4 and round(kv_over_w, 1) == 2.4
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
# B^* = \frac{I^* \, W}{2P + A - I^* \cdot KV},
# $$
#
# which exists only while $2P + A > I^* \cdot KV$. As $B$ grows, $I(B)$ tends to
# $(2P + A) / KV$: once the KV reads dominate, each extra sequence brings $2P + A$ FLOPs and
# $KV$ bytes. When that limit lies below the ridge, no batch makes decode compute-bound.
#
# The attention part of the limit does not fall with the context: $A / KV = 4 L H d \cdot c
# \,/\, (2 L H_{kv} d\, b \cdot c) = 2 (H / H_{kv}) / b$, the GQA group size over the
# bytes per element, 8 FLOP/byte for Llama-3-70B in fp16 (groups of 8) and 4 for
# Llama-3-8B. At long contexts the limit sinks toward that floor, not toward zero; counting
# only the weights' $2P$ understates it most exactly there.

# %%
# NBVAL_CHECK_OUTPUT
ridge = ridge_point("h100-sxm", "bf16")
llama8 = get_model("llama-3-8b")
print(f"H100 SXM bf16 ridge: {ridge:.0f} FLOP/byte")
rows = []
for m in (llama8, llama70):
    for ctx in (128, 1024, 2048, 8192, 32768):
        b = critical_batch(m, ridge, ctx)
        rows.append((m.name, ctx, decode_intensity_limit(m, ctx),
                     decode_intensity_limit(m, ctx, attention=False), b or "never"))
print(table(rows, ["model", "context", "limit (2P+A)/KV", "weights only 2P/KV",
                   "compute-bound from batch"], ["", ",d", ".1f", ".1f", ""]))

# %% tags=["remove-cell"]
assert critical_batch(llama70, ridge, 1024) == 933
assert critical_batch(llama70, ridge, 8192) is None
assert round(decode_intensity_limit(llama70, 8192) / ridge, 2) == 0.21
assert round(decode_intensity_limit(llama8, 32768), 1) == 7.7
assert round(decode_intensity_limit(llama8, 32768, attention=False), 1) == 3.7
limit70 = decode_intensity_limit(llama70, 8192)
weights70 = decode_intensity_limit(llama70, 8192, attention=False)
limit8 = decode_intensity_limit(llama8, 32768)
weights8 = decode_intensity_limit(llama8, 32768, attention=False)
glue("limit70_8k", f"{limit70:.0f}")
glue("limit70_8k_weights", f"{weights70:.0f}")
glue("limit8_32k", f"{limit8:.1f}")
glue("limit8_32k_weights", f"{weights8:.1f}")
glue("limit70_8k_share", f"{limit70 / ridge:.0%}")
glue("bstar70_1k", critical_batch(llama70, ridge, 1024));

# %% [markdown]
# For Llama-3-70B at 1k context decode turns compute-bound from a batch of
# {glue:text}`bstar70_1k`; at 8k the limit is {glue:text}`limit70_8k` FLOP/byte
# ({glue:text}`limit70_8k_weights` from the weights alone), {glue:text}`limit70_8k_share` of
# the ridge, and no batch gets there. Llama-3-8B has a smaller ratio of parameters to KV,
# so it stops even sooner; at 32k its limit is {glue:text}`limit8_32k` FLOP/byte, twice the
# {glue:text}`limit8_32k_weights` that the weights alone would say, because attention's
# own floor of 4 is most of it.

# %%
batches = [2**k for k in range(11)]
fig, ax = plots.new_axes("batch size", "decode arithmetic intensity (FLOP/byte)",
                         "Llama-3-70B, fp16 weights and KV", logx=True, logy=True)
for ctx in (512, 2048, 8192, 32768):
    node = max_decode_batch(llama70, "h100-sxm", ctx, tp_degree=8)   # what 8 H100s hold
    inside = [b for b in batches if b < node] + [node]
    beyond = [node] + [b for b in batches if b > node]
    (line,) = ax.plot(inside, [decode_intensity(llama70, b, ctx) for b in inside],
                      marker="o", ms=3,
                      label=f"context {ctx:,} (8 x H100 hold {node:,})")
    color = line.get_color()
    ax.plot(beyond, [decode_intensity(llama70, b, ctx) for b in beyond],
            ls=":", color=color)
    ax.plot([node], [decode_intensity(llama70, node, ctx)], "s", color=color, ms=6)
ax.axhline(ridge, color="grey", ls="--", lw=1, label=f"H100 ridge ({ridge:.0f})")
plots.legend(fig)

# %% [markdown]
# *Figure: decode intensity against batch size for four context lengths, with the H100's
# ridge dashed. Notice that every curve starts near 1 and rises with slope 1, then bends
# flat at its limit $(2P + A)/KV$: at 512 tokens the bend is above the ridge, at 8k and 32k
# it is far below, so long-context decode stays memory-bound at any batch. The square marks
# the batch a node of eight H100s (TP=8) holds at that context; dotted, the batches beyond
# it, which that node cannot run.*
#
# ## Long contexts cap the gain
#
# The same arithmetic in tokens per second, predicted for Llama-3-8B on one H100. Each
# curve stops at the batch the KV cache can hold (the KV-cache chapter's concurrency, with a
# 10% reserve):

# %%
fig, ax = plots.new_axes("batch size", "decode tokens/s (predicted)",
                         "Llama-3-8B on one H100 SXM", logx=True, logy=True)
for ctx in (1024, 4096, 16384):
    cap = capacity(llama8, "h100-sxm", n_gpus=1, context_len=ctx).sequences_per_replica
    bs = [b for b in batches if b <= cap] + [cap]
    ax.plot(bs, [decode_tokens_per_s(llama8, "h100-sxm", b, ctx) for b in bs],
            marker="o", ms=3, label=f"context {ctx:,} (fits {cap})")
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
sw = live["batching_sweep"]
rows = [(p["batch"], p["step_s"] * 1e3, p["predicted_step_s"] * 1e3,
         p["predicted_serial_s"] * 1e3, p["tokens_per_s"]) for p in sw]
print(table(rows, ["batch", "step ms", "roofline ms", "no overlap ms", "tokens/s"],
            ["", ".2f", ".2f", ".2f", ",.0f"]))
if live["sweep_stopped_at"]:
    print(f"stopped at batch {live['sweep_stopped_at']}: {live['sweep_stop_reason']}")
glue("live_gain", f"{sw[-1]['tokens_per_s'] / sw[0]['tokens_per_s']:.0f}")
glue("live_batch_max", sw[-1]["batch"]);

# %%
profiles = [live] + load_profiles(DATA)
fig, ax = plots.new_axes("batch size", "decode tokens/s",
                         "batching sweep: measured and predicted", logy=True)
for prof in profiles:
    pts = prof["batching_sweep"]
    bs = [p["batch"] for p in pts]
    plots.sweep(ax, bs, [p["tokens_per_s"] for p in pts],
                [b / p["predicted_step_s"] for b, p in zip(bs, pts)],
                label=plots.device_label(prof, live),
                serial_tokens_per_s=[b / p["predicted_serial_s"]
                                     for b, p in zip(bs, pts)])
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
# Batching is not free for each sequence. Each step takes longer as the batch grows,
# slowly while memory-bound and in proportion once compute-bound. Throughput is what the
# operator sees; TPOT is the gap between tokens that every sequence in the batch sees. A
# row whose batch does not fit the H100's KV memory at this context is marked, not
# predicted: no engine can run it.

# %%
# NBVAL_CHECK_OUTPUT
ctx = 2048
fit8 = max_decode_batch(llama8, "h100-sxm", ctx)
print(f"Llama-3-8B, one H100 SXM, context {ctx:,}: "
      f"the KV memory holds {fit8} sequences")
rows, tpot, marked = [], {}, []
for b in (1, 16, 64, 128, fit8, 256, 384):
    step = decode_step(llama8, "h100-sxm", b, ctx)
    if not step.fits:                 # no engine can run it: marked, not predicted
        marked.append(b)
        continue
    tpot[b] = step.tpot_s
    rows.append((b, step.tpot_s * 1e3, step.tokens_per_s, 1 / step.tpot_s))
print(table(rows, ["batch", "TPOT ms", "tokens/s", "tokens/s per sequence"],
            ["", ".2f", ",.0f", ".1f"]))
for b in marked:
    print(f"batch {b}: does not fit "
          f"({fit8} sequences of {ctx:,} tokens fill the KV memory)")
tpot_growth, tput_growth = tpot[64] / tpot[1], 64 * tpot[1] / tpot[64]
print(f"batch 1 -> 64: TPOT x{tpot_growth:.1f}, tokens/s x{tput_growth:.0f}")

# %% tags=["remove-cell"]
assert fit8 == 234 and marked == [256, 384]
assert (round(tpot_growth, 1), round(tput_growth)) == (2.0, 31)
glue("fit8_2k", fit8)
glue("tpot_growth_64", f"{tpot_growth:.1f}")
glue("tput_growth_64", f"{tput_growth:.0f}");

# %% [markdown]
# From batch 1 to 64 throughput grows {glue:text}`tput_growth_64` times while TPOT grows only
# {glue:text}`tpot_growth_64` times.
# A TPOT target (say 50 ms for a chat product) sets the largest batch worth running;
# below it, a larger batch is nearly free throughput, up to the {glue:text}`fit8_2k`
# sequences the memory holds at this context.
#
# ## Batch before you buy GPUs
#
# A service must generate 5,000 tokens/s of Llama-3-8B at 2k contexts. How many H100s?

# %%
# NBVAL_CHECK_OUTPUT
need = 5000
gpus = {}
for b in (1, check_batch_fits(llama8, "h100-sxm", 64, ctx)):
    per_gpu = decode_tokens_per_s(llama8, "h100-sxm", b, ctx)
    gpus[b] = math.ceil(need / per_gpu)
    print(f"batch {b:>3}: {per_gpu:6.0f} tokens/s per GPU -> {gpus[b]:>3} GPUs")
assert gpus[1] > 20 * gpus[64]        # the batch, not the GPU count, was the problem

# %% tags=["remove-cell"]
b7_tp1 = published_decode("llama-2-7b", weights="bf16", tp_degree=1)[0]
sheet_Bps = get_gpu("a100-80gb").hbm_bandwidth_Bps
glue("pub_share_sheet", f"{b7_tp1.bandwidth_GBps * 1e9 / sheet_Bps:.0%}");

# %% [markdown]
# The ratio is the lesson; the GPU counts themselves come from the datasheet's peak
# bandwidth, which no real kernel reaches (published: Llama-2-7B decodes at
# {glue:text}`pub_share_sheet` of an A100's datasheet bandwidth, see the roofline chapter),
# so a plan built on them needs a margin, or a measured bandwidth in their place.
#
# ## Tensor parallelism makes a model fit, not run cheaper
#
# Llama-3-70B in fp16 is {glue:text}`w70_gib` of weights; an H100 holds {glue:text}`h100_gib`.
# It cannot run on one card at all. {term}`Tensor parallelism` {cite}`shoeybi2019megatron`
# splits every weight matrix across devices, so each holds and reads $W/\text{TP}$. For a
# model this size that is the reason to use it: without it there is nowhere to put the
# weights. It does not make the work per GPU more efficient. At a given batch, TP divides
# each device's bytes, so the roofline's TPOT falls by the degree and the tokens/s *per
# GPU* stay where they were. The roofline leaves out what TP adds to every step, the
# all-reduces between the devices (the next section models them); counted, TPOT falls by
# less and the tokens/s per GPU fall:

# %%
# NBVAL_CHECK_OUTPUT
print("smallest TP for Llama-3-70B fp16 on H100 at 8k:",
      min_tp_degree(llama70, "h100-sxm", context_len=8192))
print("fits on one H100:",
      capacity(llama70, "h100-sxm", n_gpus=1, context_len=8192).fits)
print(f"one H100 holds {fmt_bytes(get_gpu('h100-sxm').memory_bytes)}, "
      f"the weights need {fmt_bytes(W70)}")
steps = {tp: decode_step(llama70, "h100-sxm", 8, 2048, tp_degree=tp)
         for tp in (2, 4, 8)}
roof_per_gpu = {tp: 8 / st.roofline_s / tp for tp, st in steps.items()}
rows = [(tp, st.roofline_s * 1e3, st.tpot_s * 1e3, roof_per_gpu[tp],
         st.tokens_per_gpu_s) for tp, st in steps.items()]
print("batch 8, context 2,048: TPOT and tokens/s per GPU, the roofline's and "
      "with all-reduces")
print(table(rows, ["TP", "TPOT ms", "+ all-reduces", "tokens/s per GPU",
                   "+ all-reduces"], ["", ".1f", ".1f", ",.0f", ",.0f"]))
# The roofline alone: TP divides each GPU's bytes and its share of the tokens alike.
assert max(roof_per_gpu.values()) / min(roof_per_gpu.values()) < 1.01

# %% tags=["remove-cell"]
assert min_tp_degree(llama70, "h100-sxm", context_len=8192) == 2
assert all(st.fits for st in steps.values())
assert round(steps[2].roofline_s / steps[8].roofline_s, 2) == 4.0
assert round(steps[2].tpot_s / steps[8].tpot_s, 1) == 3.3
assert round(1 - steps[8].tokens_per_gpu_s / steps[2].tokens_per_gpu_s, 2) == 0.16
glue("h100_gib", fmt_bytes(get_gpu("h100-sxm").memory_bytes))
per_gpu_loss = 1 - steps[8].tokens_per_gpu_s / steps[2].tokens_per_gpu_s
glue("tp_speedup_comm", f"{steps[2].tpot_s / steps[8].tpot_s:.1f}")
glue("tp_per_gpu_loss", f"{per_gpu_loss:.0%}");

# %% [markdown]
# In the roofline, quadrupling the TP degree cuts TPOT by four and leaves tokens/s per GPU
# unchanged. With the all-reduces, TPOT falls {glue:text}`tp_speedup_comm` times and each
# GPU delivers {glue:text}`tp_per_gpu_loss` fewer tokens/s at TP=8 than at TP=2.
#
# ## What tensor parallelism costs: the all-reduces
#
# TP in the Megatron style splits attention by heads and the MLP by its inner dimension.
# Each block then leaves every device with a partial sum of its output, and an
# {term}`all-reduce <All-reduce>` adds the partial sums up before the next block can start: two all-reduces per layer,
# $2L$ per decode step, on the critical path. Each carries one hidden-size vector per
# sequence, $m = B \cdot h \cdot b$ bytes ($h$ the hidden size, $b$ bytes per activation).
# A ring all-reduce over $n$ devices sends $2(n-1)/n$ of the message from each device (a
# reduce-scatter, then an all-gather) {cite}`nccltests_performance`. With a fixed cost
# $\alpha$ per call and a link bandwidth $\beta$ per direction, the alpha-beta model:
#
# $$
# t_\text{AR} = \alpha + \frac{2(n-1)}{n} \cdot \frac{m}{\beta},
# \qquad
# t_\text{comm} = 2L \cdot t_\text{AR},
# \qquad
# \text{TPOT} = \text{roofline} + t_\text{comm}.
# $$
#
# $\beta$ comes from the datasheets, kept with their sources in `servelib.interconnect`:
# NVLink 900 GB/s on an H100 SXM counts both directions, so 450 GB/s each way; an L40S has
# no NVLink and talks over PCIe Gen4 at 32 GB/s each way. Real collectives reach less than
# the line rate (about 80% on NVLink, by NCCL's own account). $\alpha$ is on no datasheet:
# servelib takes published small-message measurements, about 9 µs over NVLink and 20 µs
# over PCIe. The share of a decode step at 2k context that goes to all-reduces, on H100s:

# %%
# NBVAL_CHECK_OUTPUT
link = get_link("h100-sxm")
print(f"H100 SXM link: {link.kind}, {link.bandwidth_Bps / 1e9:.0f} GB/s per direction, "
      f"{link.latency_s * 1e6:.0f} us per all-reduce")
rows, share, unfit = [], {}, []
for m in (llama8, llama70):
    for b in (1, 64):
        for tp in (1, 2, 4, 8):
            st = decode_step(m, "h100-sxm", b, 2048, tp_degree=tp)
            if not st.fits:
                unfit.append(f"{m.name}, batch {b}, TP={tp}: does not fit "
                             f"({st.max_batch} sequences of 2,048 tokens per replica)")
                continue
            share[m.name, b, tp] = st.comm_share
            rows.append((m.name, b, fmt_bytes(tp_allreduce_bytes(m, b)), tp,
                         st.roofline_s * 1e3, st.comm_s * 1e3, st.comm_share,
                         st.tokens_per_gpu_s))
print(table(rows, ["model", "batch", "message", "TP", "roofline ms", "all-reduces ms",
                   "share", "tokens/s per GPU"],
            ["", "", "", "", ".2f", ".2f", ".0%", ",.0f"]))
print("\n".join(unfit))

# %% tags=["remove-cell"]
assert tp_allreduce_bytes(llama70, 1) == 16 * KiB
assert ("llama-3-70b", 64, 2) not in share
assert round(share["llama-3-8b", 1, 8], 2) == 0.49
assert round(share["llama-3-70b", 1, 8], 2) == 0.22
glue("share_8b_tp8", f"{share['llama-3-8b', 1, 8]:.0%}")
glue("share_70b_tp8", f"{share['llama-3-70b', 1, 8]:.0%}")
glue("share_70b_tp8_b64", f"{share['llama-3-70b', 64, 8]:.0%}");

# %% [markdown]
# At batch 1 a message is 8 or 16 KiB, which NVLink moves in a few hundredths of a
# microsecond: the per-call latency is nearly all of it, and there are $2L$ calls per token
# whatever the degree. So the communication time stays about constant while the roofline
# time falls as $1/\text{TP}$, and its share grows with the degree: at TP=8 it is
# {glue:text}`share_8b_tp8` of a Llama-3-8B step and {glue:text}`share_70b_tp8` of a
# Llama-3-70B step. A batch shares the calls as it shares the weights: at batch 64 the
# Llama-3-70B share at TP=8 is {glue:text}`share_70b_tp8_b64`. The bigger the model, the
# more work each all-reduce is spread over.
#
# ### Held against published measurements
#
# gpt-fast published batch-1 decode of Llama-2-7B and Llama-2-70B at TP 1 to 8 on A100s
# {cite}`gptfast2023` (measured by its authors; bf16, power-limited to 330 W, about
# 1,700 GB/s reachable). gpt-fast splits the layers but keeps the embedding and LM head
# whole on every GPU, so the prediction below counts the bytes its layout reads
# (`servelib.published.weights_read_per_gpu_bytes`); the A100's NVLink is 300 GB/s each way.

# %%
# NBVAL_CHECK_OUTPUT
print(f"published: {GPT_FAST_SOURCE}")
pub_rows = [r for m in ("llama-2-7b", "llama-2-70b")
            for r in published_decode(m, weights="bf16")
            if r.gpu_preset == "a100-80gb" and r.tokens_per_s is not None]
pred, rows = {}, []
for r in pub_rows:
    roof, full = predicted_tpot_s(r, comm=False), predicted_tpot_s(r)
    pred[r.model, r.tp_degree] = (roof, full, r.tpot_s)
    rows.append((r.model, r.tp_degree, weights_read_per_gpu_bytes(r) / 1e9, roof * 1e3,
                 full * 1e3, r.tpot_s * 1e3, r.tpot_s / full, r.bandwidth_GBps))
print(table(rows, ["model", "TP", "GB/GPU", "roofline ms", "+ all-reduces",
                   "published ms", "ratio", "published GB/s per GPU"],
            ["", "", ".2f", ".2f", ".2f", ".2f", ".2f", ",.0f"]))
speedup, rows = {}, []
for m, lo in (("llama-2-7b", 1), ("llama-2-70b", 2)):
    speedup[m] = tuple(x / y for x, y in zip(pred[m, lo], pred[m, 8]))
    rows.append((m, lo, 8, *speedup[m]))
print(table(rows, ["speed-up", "from TP", "to TP", "roofline", "+ all-reduces",
                   "published"], ["", "", "", ".1f", ".1f", ".1f"]))
fits = {m: fit_tp_scaling(m) for m in ("llama-2-7b", "llama-2-70b")}
for m, f in fits.items():
    degrees = "/".join(map(str, f.tp_degrees))
    print(f"fit of the published TP={degrees} rows, {m}: bandwidth "
          f"{f.bandwidth_Bps / 1e9:,.0f} GB/s, "
          f"{f.allreduce_s * 1e6:.0f} us per all-reduce")
# The model stays a lower bound on every published row.
assert all(full < published for _, full, published in pred.values())

# %% tags=["remove-cell"]
assert [round(x, 1) for x in speedup["llama-2-7b"]] == [6.3, 4.3, 3.1]
assert [round(x, 1) for x in speedup["llama-2-70b"]] == [3.8, 3.5, 2.9]
assert all(round(f.bandwidth_Bps / 1e11) == 17 for f in fits.values())
assert [round(f.allreduce_s * 1e6) for f in fits.values()] == [27, 32]
pub7 = {r.tp_degree: r for r in pub_rows if r.model == "llama-2-7b"}
glue("pub_bw_tp1", f"{pub7[1].bandwidth_GBps:,.0f}")
glue("pub_bw_tp8", f"{pub7[8].bandwidth_GBps:,.0f} GB/s")
glue("pub_speedup_7b", f"{speedup['llama-2-7b'][2]:.1f}x")
glue("roof_speedup_7b", f"{speedup['llama-2-7b'][0]:.1f}x")
glue("comm_speedup_7b", f"{speedup['llama-2-7b'][1]:.1f}x")
glue("pub_speedup_70b", f"{speedup['llama-2-70b'][2]:.1f}x")
glue("fit_bw_7b", f"{fits['llama-2-7b'].bandwidth_Bps / 1e9:,.0f} GB/s")
glue("fit_bw_70b", f"{fits['llama-2-70b'].bandwidth_Bps / 1e9:,.0f} GB/s")
glue("fit_ar_7b", f"{fits['llama-2-7b'].allreduce_s * 1e6:.0f} µs")
glue("fit_ar_70b", f"{fits['llama-2-70b'].allreduce_s * 1e6:.0f} µs")
glue("nccl_alpha", f"{get_link('a100-80gb').latency_s * 1e6:.0f} µs")
fit_alpha = fits["llama-2-70b"].allreduce_s
share_fit = decode_step(llama70, "h100-sxm", 1, 2048, tp_degree=8,
                        latency_s=fit_alpha).comm_share
glue("share_70b_tp8_fit", f"{share_fit:.0%}");

# %% [markdown]
# What the published figures show:
#
# - **TP adds devices, but the bandwidth each one delivers falls.** Llama-2-7B reads its
#   weights at {glue:text}`pub_bw_tp1` GB/s on one GPU and at {glue:text}`pub_bw_tp8` per
#   GPU on eight. Eight GPUs give {glue:text}`pub_speedup_7b` the speed of one, where the
#   roofline (with gpt-fast's whole embeddings) promises {glue:text}`roof_speedup_7b`;
#   Llama-2-70B gains {glue:text}`pub_speedup_70b` from two GPUs to eight, not 4x.
# - **The alpha-beta form fits, with a larger alpha.** Fitting each model's published TP
#   rows to "bytes over a bandwidth, plus $2L$ all-reduces of a fixed cost" gives
#   {glue:text}`fit_bw_7b` and {glue:text}`fit_ar_7b` per all-reduce (Llama-2-7B),
#   {glue:text}`fit_bw_70b` and {glue:text}`fit_ar_70b` (Llama-2-70B): the bandwidth is the
#   source's own 1,700 GB/s, and each all-reduce costs about three times the
#   {glue:text}`nccl_alpha` of a latency benchmark. Inside a real decode step every call
#   also pays for launching and synchronising its kernels, not only for the wire; these
#   A100s, moreover, sit in a hybrid cube mesh rather than behind an NVSwitch. With the
#   {glue:text}`fit_ar_70b` that the published figures imply, the all-reduces would take
#   {glue:text}`share_70b_tp8_fit` of a Llama-3-70B step at TP=8 on H100s, not
#   {glue:text}`share_70b_tp8`.
#
# So the datasheet-and-benchmark model is a lower bound on communication too; the
# published scaling says by how much, and `decode_step(..., latency_s=...)` takes the
# measured figure when there is one.
#
# ## Measure: an all-reduce on this machine
#
# `servelib.measure.time_allreduce` starts processes that all-reduce a tensor of each size
# and times the calls (after warm-up, each after a barrier, the median of many): NCCL
# between GPUs when the machine has two or more, otherwise gloo between two CPU processes.
# The sizes are those a decode step sends. Gloo between CPU processes goes through shared
# memory and the operating system, not NVLink: its figures are this machine's, far from a
# GPU server's, but the shape is the same (a floor set by the latency, then a rise with the
# bytes). Not checked: they depend on the machine and its load.

# %%
cases = ((llama8, 1), (llama70, 1), (llama70, 16), (llama70, 64), (llama70, 256))
sizes = {f"{m.name}, batch {b}": tp_allreduce_bytes(m, b) for m, b in cases}
timed = time_allreduce(list(sizes.values()), world_size=2)
t0 = timed[0]
print(f"measured on {t0.device}: backend {t0.backend}, {t0.world_size} processes, "
      f"{t0.dtype}, torch {t0.torch}, {t0.threads} thread(s) each, median of {t0.n}")
rows = [(what, fmt_bytes(t.message_bytes), t.median_s * 1e6, t.iqr_s * 1e6,
         t.busbw_Bps / 1e9) for what, t in zip(sizes, timed)]
print(table(rows, ["decode step of", "message", "median us", "IQR us", "bus GB/s"],
            ["", "", ".0f", ".0f", ".2f"]))
try:
    alpha, beta = fit_allreduce([t.message_bytes for t in timed],
                                [t.median_s for t in timed], 2)
    print(f"alpha-beta fit: {alpha * 1e6:.0f} us per call, "
          f"{beta / 1e9:.2f} GB/s per direction")
    here = decode_step(llama8, "h100-sxm", 1, 2048, tp_degree=2, latency_s=alpha,
                       bandwidth_Bps=beta)
    print(f"were two H100s joined by this link, a TP=2 Llama-3-8B step's "
          f"{2 * llama8.n_layers} all-reduces would take {here.comm_s * 1e3:.1f} ms, "
          f"against {here.roofline_s * 1e3:.1f} ms of roofline")
except ValueError as err:      # a machine too busy for the times to grow with the size
    print(f"no alpha-beta fit: {err}")

# %% [markdown]
# ## Choosing the TP degree from the load
#
# On an 8-GPU node the same 70B model can run as four TP=2 replicas, two TP=4 replicas or
# one TP=8 replica. A larger degree holds *more* sequences on the same node, because every
# replica keeps its own copy of the weights and fewer replicas means fewer copies. But each
# step of a TP group waits for its all-reduces, whose share of the step grows with the
# degree (above); a failure stops the whole group; and there are fewer independent replicas
# to route load to. So the rule is: use the smallest degree that carries the load, meaning
# the concurrency and the TPOT the service needs; every degree above that spends more of
# each step on communication and buys nothing the load asked for. Say the load is 100
# concurrent 8k conversations with a TPOT target of 50 ms (the counts use the exact
# parameter count of Llama-3-70B, so they run a little below a plan built on a round
# 70 billion):

# %%
# NBVAL_CHECK_OUTPUT
target, tpot_target = 100, 0.050
print(f"Llama-3-70B fp16, 8 x H100, 8k context: {target} conversations, "
      f"TPOT <= {tpot_target * 1e3:.0f} ms")
rows, chosen = [], None
for tp in (2, 4, 8):
    c = capacity(llama70, "h100-sxm", n_gpus=8, context_len=8192, tp_degree=tp)
    # The load, spread over the replicas, as far as each one holds it.
    batch = min(c.sequences_per_replica, math.ceil(target / c.replicas))
    st = decode_step(llama70, "h100-sxm", batch, 8192, tp_degree=tp)
    carries = c.concurrency >= target and st.tpot_s <= tpot_target
    chosen = chosen or (tp if carries else None)
    rows.append((tp, c.replicas, c.sequences_per_replica, c.concurrency, batch,
                 st.tpot_s * 1e3, st.comm_share, "yes" if carries else "no"))
print(table(rows, ["TP", "replicas", "each holds", "node holds", "batch", "TPOT ms",
                   "all-reduces", "carries the load"],
            ["", "", "", "", "", ".1f", ".0%", ""]))
print(f"smallest TP that carries the load: {chosen}")

# %% tags=["remove-cell"]
assert chosen == 4

# %% [markdown]
# TP=2 cannot hold the conversations; TP=4 holds them within the TPOT target; TP=8 would
# also do, at a lower TPOT nobody asked for and a larger share of every step spent on
# all-reduces.
#
# ## Beginner mistake: maximizing the TP degree
#
# "The node has eight GPUs, so shard the model eight ways." The unit of capacity is a
# replica, and a TP=8 replica is eight GPUs. Llama-3-8B fits one H100 with room for
# {glue:text}`seqs8_tp1` 8k-token conversations. A service that must deliver 1,000 tokens/s
# of it needs:

# %%
# NBVAL_CHECK_OUTPUT
demand, ctx8 = 1000, 8192          # tokens/s to deliver, 8k-token conversations
print("smallest TP for Llama-3-8B on H100 at 8k:",
      min_tp_degree(llama8, "h100-sxm", context_len=ctx8))
gpus, per_gpu8, rows = {}, {}, []
for tp, label in ((8, "wrong"), (1, "right")):
    c = capacity(llama8, "h100-sxm", n_gpus=tp, context_len=ctx8, tp_degree=tp)
    st = decode_step(llama8, "h100-sxm", c.sequences_per_replica, ctx8, tp_degree=tp)
    gpus[tp] = math.ceil(demand / st.tokens_per_s) * tp     # whole replicas
    per_gpu8[tp] = st.tokens_per_gpu_s
    rows.append((label, tp, c.sequences_per_replica, st.tokens_per_s,
                 st.tokens_per_gpu_s, st.comm_share, gpus[tp]))
print(f"{demand:,} tokens/s of Llama-3-8B at 8k contexts on H100s, "
      "each replica at its full batch")
print(table(rows, ["", "TP", "replica holds", "tokens/s", "per GPU", "all-reduces",
                   "GPUs needed"], ["", "", "", ",.0f", ",.0f", ".0%", ""]))
tp1_shortfall = 1 - per_gpu8[1] / per_gpu8[8]
print(f"tokens/s per GPU, TP=1 below TP=8: {tp1_shortfall:.0%}")

# %% tags=["remove-cell"]
assert (gpus[1], gpus[8]) == (1, 8)
seqs8_tp1 = capacity(llama8, "h100-sxm", n_gpus=1,
                     context_len=ctx8).sequences_per_replica
assert seqs8_tp1 == 58 and round(tp1_shortfall, 2) == 0.12
glue("seqs8_tp1", seqs8_tp1)
glue("tp1_shortfall", f"{tp1_shortfall:.0%}");

# %% [markdown]
# Eight GPUs where one serves the load. As the load grows, add TP=1 replicas: per GPU they
# deliver {glue:text}`tp1_shortfall` fewer tokens/s than TP=8 in this model (TP=8 packs more
# sequences into its batch, and that outweighs its all-reduces here; with the per-call cost
# the published figures imply, the gap closes further), and each replica fails alone
# instead of taking eight GPUs down with it.
#
# ## Summary: the numbers to carry
#
# | what | value |
# |---|---|
# | decode bytes per step | $W + B \cdot KV$ |
# | intensity | $B(2P + A) / (W + B \cdot KV)$, about $B$ at short context, at most $(2P + A)/KV$ |
# | Llama-3-70B on H100: compute-bound from batch (1k context) | {glue:text}`bstar70_1k` |
# | Llama-3-70B intensity limit at 8k | {glue:text}`limit70_8k` FLOP/byte (never compute-bound) |
# | this machine: tokens/s, largest batch over batch 1 | {glue:text}`live_gain` x |
# | TP all-reduces per decode step | $2L$, each $\alpha + 2(n-1)/n \cdot B h b / \beta$ |
# | their share of a batch-1 step at TP=8 on H100s | {glue:text}`share_8b_tp8` (Llama-3-8B), {glue:text}`share_70b_tp8` (Llama-3-70B) |
# | published, Llama-2-7B from 1 to 8 A100s (gpt-fast) | {glue:text}`pub_speedup_7b` faster, not 8x |
#
# A batch pays for one pass over the weights together, while every sequence still pays for
# its own KV cache, so long contexts cap what batching gains. Low decode throughput calls
# for bigger batches on the GPUs already there before it calls for more GPUs. Tensor
# parallelism is what lets a large model fit at all, and every step pays for it in
# all-reduces whose share grows with the degree: pick the smallest degree that carries the
# concurrency and latency you need.
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
# One step reads every weight once (2 bytes each) and each sequence's own KV cache.
weights = 2 * 70.55e9                          # bytes
kv_seq = 4096 * 320 * 1024                     # tokens x bytes of KV per token
answer = (weights + 32 * kv_seq) / 1e9
exact = decode_bytes_per_step(W70, kv_bytes_per_sequence(llama70, 4096), 32) / 1e9
print(f"{answer:.1f} GB a step (servelib, exact parameter count: {exact:.1f} GB)")
### END SOLUTION
check("bt-1", answer)

# %% [markdown]
# **bt-2.** At what batch size does decode of Llama-3-8B (8.03 billion parameters, 128 KiB
# of KV per token, 32 layers of 32 query heads of size 128) at a 128-token context turn
# compute-bound on an H100 SXM (ridge 989.5e12 / 3.35e12 FLOP/byte)? Count the weights'
# $2P$ and attention's $A = 4 L H d_\text{head} \cdot \text{context}$ FLOPs per sequence. Give
# the smallest whole batch.

# %% tags=["hide-input"]
### BEGIN SOLUTION
# Compute-bound once B (2P + A) / (2P + B KV) reaches the ridge r, that is from
# B = r 2P / (2P + A - r KV) on, rounded up.
two_p = 2 * 8.03e9                             # FLOPs (and bytes) of the weights
attn = 4 * 32 * 32 * 128 * 128                 # A = 4 L H d_head context, FLOPs
kv_seq = 128 * 128 * 1024                      # bytes of one sequence's KV cache
r = 989.5e12 / 3.35e12                         # FLOP/byte
answer = math.ceil(r * two_p / (two_p + attn - r * kv_seq))
exact = critical_batch(llama8, ridge_point("h100-sxm"), 128)
print(f"compute-bound from a batch of {answer} (servelib: {exact})")
### END SOLUTION
check("bt-2", answer)

# %% [markdown]
# **bt-3.** What is the highest arithmetic intensity Llama-3-8B (8.03 billion parameters;
# 32 layers of 32 query heads with `head_dim` 128; 128 KiB of KV per token in fp16) decode
# can reach, at any batch, with 32,768-token contexts, attention's FLOPs included?
# (FLOP/byte)

# %% tags=["hide-input"]
### BEGIN SOLUTION
# At any batch the weights' bytes are shared away; each sequence still brings 2P + A
# FLOPs and reads its own KV cache, so the intensity tends to (2P + A) / KV.
flops = 2 * 8.03e9 + 4 * 32 * 32 * 128 * 32_768      # 2P + A
kv_seq = 32_768 * 128 * 1024                         # bytes
answer = flops / kv_seq
exact = decode_intensity_limit(llama8, 32_768)
print(f"at most {answer:.2f} FLOP/byte (servelib: {exact:.2f})")
### END SOLUTION
check("bt-3", answer)

# %% [markdown]
# **bt-4.** What is the smallest TP degree that serves Llama-3-70B in fp16 on A100 40GB
# cards (40 GiB) at 4,096-token contexts, with a 10% reserve and at least one full
# sequence per device?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# Each of tp devices holds 1/tp of the weights and of every sequence's KV (8 KV heads
# split across them); 90% of what the weights leave must hold one full sequence.
weights, kv_seq = 2 * 70.55e9, 4096 * 320 * 1024     # bytes


def fits(tp):
    return (40 * GiB - weights / tp) * 0.9 >= kv_seq / tp


answer = next(tp for tp in (1, 2, 4, 8) if fits(tp))
exact = min_tp_degree(llama70, "a100-40gb", context_len=4096)
print(f"TP={answer} (servelib: TP={exact})")
### END SOLUTION
check("bt-4", answer)

# %% [markdown]
# **bt-5.** On a node of 8 H100s (80 GiB), Llama-3-70B runs as two TP=4 replicas at 8k
# contexts with a 10% reserve. How many conversations does the node hold?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# A TP=4 replica pools four cards' memory; 90% of what its weights leave holds KV.
weights, kv_seq = 2 * 70.55e9, 8192 * 320 * 1024     # bytes
per_replica = math.floor((4 * 80 * GiB - weights) * 0.9 / kv_seq)
answer = 2 * per_replica
exact = capacity(llama70, "h100-sxm", n_gpus=8, context_len=8192,
                 tp_degree=4).concurrency
print(f"2 x {per_replica} = {answer} conversations (servelib: {exact})")
### END SOLUTION
check("bt-5", answer)

# %% [markdown]
# **bt-6.** Predict the decode throughput (tokens/s) of Llama-3-8B (8.03 billion
# parameters, 128 KiB of KV per token) on one H100 SXM (989.5 dense bf16 TFLOP/s, 3.35
# TB/s) at a batch of 64 and a 2,048-token context.

# %% tags=["hide-input"]
### BEGIN SOLUTION
# One step takes the larger of its compute time and its memory time, and yields one
# token for each of the 64 sequences. Memory wins by far here, so the attention FLOPs
# (about 7% on top of 2P at this context) change nothing.
two_p, kv_seq = 2 * 8.03e9, 2048 * 128 * 1024       # FLOPs (and bytes); bytes
step_s = max(64 * two_p / 989.5e12, (two_p + 64 * kv_seq) / 3.35e12)
answer = 64 / step_s
exact = decode_tokens_per_s(llama8, "h100-sxm", 64, 2048)
print(f"{answer:,.0f} tokens/s (servelib: {exact:,.0f})")
### END SOLUTION
check("bt-6", answer)
