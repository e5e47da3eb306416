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
# # Disaggregated prefill and decode
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-serving-book/serving-capacity-economics/blob/v0.1.0/notebooks/10_disaggregated.ipynb)
#
# A serving replica does two jobs with opposite bottlenecks: it reads prompts, which is
# arithmetic, and it writes answers one token at a time, which is memory traffic. Put both
# in the same step and the step lasts as long as the prompt's arithmetic, so every request
# in the middle of an answer waits for someone else's prompt. Chunked prefill cuts the
# prompt into slices; {term}`disaggregated serving <Disaggregated serving>` moves prompts to
# GPUs of their own and ships each prompt's KV cache to the GPUs that decode it. This
# chapter derives what a prompt does to a decode step, what chunking buys, what the KV
# transfer costs, how many GPUs each pool needs for a latency target, and when one pool or
# two is cheaper.
#
# **You will be able to**
# 1. derive the time of a step that carries prompt tokens beside a decode batch, and the prompt tokens such a step carries almost for free;
# 2. say what chunked prefill buys (a bounded stall per step) and what it does not (capacity: the prompt's work stays on the same GPUs), and read the TTFT-vs-TPOT trade it sets;
# 3. compute the KV bytes a request moves between pools and their time over a link;
# 4. size a prefill pool and a decode pool for a {term}`TTFT` and a {term}`TPOT` target with an {term}`M/D/1 queue` and a Poisson batch;
# 5. compare the GPUs and the cost per million tokens of one pool and of two at the same targets, and say what the answer depends on;
# 6. catch three beginner mistakes: a decode-only TPOT for a pool that also prefills, a prefill pool sized to its average load, and a decode batch sized by memory alone.

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

import numpy as np

from servelib import plots
from servelib.audit.examples import mistake_plans
from servelib.audit.report import finding_lines
from servelib.book import glue, table
from servelib.disagg import (SLO, Workload, cheapest_disaggregated, cheapest_mixed_pool,
                             chunked_prefill, kv_transfer_bytes, max_prefill_tokens,
                             mixed_step_time_s, prefill_slack_tokens, size_decode_pool,
                             size_disaggregated, size_prefill_pool, transfer_time_s,
                             usd_per_million_tokens)
from servelib.economics import H100_USD_PER_GPU_HOUR, LLAMA_3_70B_HOSTED
from servelib.grading import check
from servelib.hardware import get_gpu, ridge_point
from servelib.measure import measure_ceilings
from servelib.measure.mixed import token_sweep
from servelib.memory import capacity
from servelib.models import get_model
from servelib.queueing import lindley_waits, md1_max_utilization, md1_wait_s
from servelib.roofline import predict_tpot_s, predict_ttft_s
from servelib.sim import roofline_step_time, simulate, workloads
from servelib.units import fmt_bytes

plots.apply_style()

# %% [markdown]
# ## A prompt in a decode step
#
# A step processes every token scheduled in it (a {term}`mixed batch <Mixed batch>` when both
# kinds are there): one token for each of the $B$ sequences
# that are decoding, and $p$ prompt tokens of a request being prefilled. Every weight
# matrix multiplies all $B + p$ tokens at once, so the weights are read once for the
# step; the decoding sequences' KV caches are read, and the prompt tokens' keys and values
# written. With $P$ parameters, $W$ bytes of weights, KV bytes per token $kv$ and the
# decoding sequences at context $c$, split over $t$ devices of peak $F$ FLOP/s and
# bandwidth $BW$:
#
# $$
# T_{\text{mixed}}(B, p) = \max\left(\frac{2P\,(B + p)}{t\,F},\;
#   \frac{W/t + B \cdot kv \cdot c + p \cdot kv}{BW}\right).
# $$
#
# With $p = 0$ this is the decode step of the roofline chapter; with $B = 0$ it is a
# prefill. A decode step is far below the ridge point, so its time is the memory term; a
# prompt of a few thousand tokens is far above it, so the mixed step's time is the compute
# term, and the decoding sequences wait for it. Take Llama-3-70B on eight H100s (TP=8),
# 64 sequences decoding at 2,304 tokens of context, and a 2,048-token prompt arriving.

# %%
# NBVAL_CHECK_OUTPUT
llama70, h100 = get_model("llama-3-70b"), get_gpu("h100-sxm")
TP, B, CTX, PROMPT = 8, 64, 2304, 2048
at = dict(decode_batch=B, context_len=CTX, tp_degree=TP)
decode_ms = mixed_step_time_s(llama70, h100, prefill_tokens=0, **at) * 1e3
mixed_ms = mixed_step_time_s(llama70, h100, prefill_tokens=PROMPT, **at) * 1e3
print(f"decode step, {B} sequences:            {decode_ms:6.2f} ms")
print(f"the same step with a {PROMPT:,}-token prompt: {mixed_ms:6.2f} ms "
      f"({mixed_ms / decode_ms:.1f}x)")
# The two ends are the book's own predictions.
assert decode_ms / 1e3 == predict_tpot_s(llama70, h100, B, CTX, tp_degree=TP)
prefill_alone = mixed_step_time_s(llama70, h100, decode_batch=0, context_len=1,
                                  prefill_tokens=PROMPT, tp_degree=TP)
assert prefill_alone == predict_ttft_s(llama70, h100, PROMPT, tp_degree=TP)

# %% tags=["remove-cell"]
assert (round(decode_ms, 2), round(mixed_ms, 1), round(mixed_ms / decode_ms, 1)) == \
    (7.07, 37.6, 5.3)
glue("decode_ms", f"{decode_ms:.1f} ms")
glue("mixed_ms", f"{mixed_ms:.1f} ms")
glue("mixed_ratio", f"{mixed_ms / decode_ms:.1f}x")

# %% [markdown]
# The prompt stretches the step from {glue:text}`decode_ms` to {glue:text}`mixed_ms`,
# {glue:text}`mixed_ratio`: for that step, the 64 sequences decoding see their answer pause
# for the length of a prefill. The figure shows the step time as prompt tokens join the
# batch.

# %%
slack = prefill_slack_tokens(llama70, h100, **at)
ps = np.unique(np.geomspace(1, 4096, 60).astype(int))
fig, ax = plots.new_axes("prompt tokens in the step", "step time (ms)",
                         f"Llama-3-70B, TP={TP} on H100, {B} sequences decoding",
                         logx=True)
# The decode step alone, wide and pale underneath: the max line runs along it at first.
ax.axhline(decode_ms, color="grey", lw=5, alpha=0.35, label="decode step alone")
for overlap, style, name in ((True, "-", "compute and memory overlapped (max)"),
                             (False, ":", "not overlapped (sum)")):
    ms = [mixed_step_time_s(llama70, h100, prefill_tokens=int(p), overlap=overlap,
                            **at) * 1e3 for p in ps]
    ax.plot(ps, ms, style, color="C0", label=name)
ax.axvline(slack, color="C1", lw=0.8, ls="--",
           label=f"{slack} tokens: compute = memory")
plots.legend(fig, ncols=1)

# %% tags=["remove-cell"]
glue("slack", f"{slack}")
glue("slack_ridge", f"{ridge_point(h100):.0f}")

# %% [markdown]
# *Figure: the step's time against the prompt tokens it carries, both roofline bounds.
# Up to {glue:text}`slack` prompt tokens the step stays memory-bound and barely moves
# (the solid line runs along the pale band of the decode step alone): the prompt uses
# arithmetic the decode step leaves idle. Past that point every token adds its own
# compute time. The dotted line assumes the step's
# arithmetic and memory traffic do not overlap at all: then there is no free ride, and
# each prompt token lengthens the step from the first.*
#
# Setting compute time equal to memory time gives the prompt tokens a decode step carries
# before it turns compute-bound:
#
# $$
# p^* = \frac{(W/t + B \cdot kv \cdot c)}{BW} \cdot \frac{t F}{2P} - B
# $$
#
# (a little less once the prompt's KV writes are counted), which is
# `prefill_slack_tokens`: {glue:text}`slack` here. It is the ridge point in disguise: the
# weights bring about one FLOP per byte per token, so the step has room for roughly
# ridge-point ({glue:text}`slack_ridge`) tokens in all, decode tokens included, plus what
# the KV reads add.
#
# ## Measure: tokens joining a weight-bound product
#
# Whether a step gets that free ride depends on the kernels. A linear layer applied to the
# step's tokens is the part every token shares. Below, one layer's weight matrix (too big
# for the caches) multiplies a growing number of token rows on this machine, timed with
# warm-up and medians, beside both predictions from the machine's measured ceilings.

# %%
ceil = measure_ceilings(DEVICE, min_run_time=0.3)
counts = [2**k for k in range(0, 9 if DEVICE.kind == "cpu" else 12)]
sweep = token_sweep(counts, device=DEVICE, ceilings=ceil)
print(f"{DEVICE}; measured ceilings {ceil.matmul_flops / 1e12:.2f} TFLOP/s, "
      f"{ceil.copy_bandwidth_Bps / 1e9:.0f} GB/s (ridge {ceil.ridge:.0f} FLOP/byte); "
      f"d_model {sweep[0].d_model}")
rows = [(pt.tokens, pt.step_s * 1e3, pt.predicted_step_s * 1e3,
         pt.predicted_serial_s * 1e3) for pt in sweep]
print(table(rows, ["tokens", "measured ms", "max bound ms", "sum bound ms"],
            ["d", ".2f", ".2f", ".2f"]))
fig, ax = plots.new_axes("token rows in the product", "time (ms)",
                         "one linear layer, measured here", logx=True, logy=True)
# the bounds as wide pale bands underneath: a measurement on top of them shows
ax.plot(counts, [pt.predicted_step_s * 1e3 for pt in sweep], lw=9, alpha=0.3,
        color="C1", label="roofline, max(compute, memory)")
ax.plot(counts, [pt.predicted_serial_s * 1e3 for pt in sweep], lw=5, alpha=0.3,
        color="C2", label="compute + memory")
ax.plot(counts, [pt.step_s * 1e3 for pt in sweep], "o-", color="C0",
        label="measured (median)")
plots.legend(fig, ncols=1)

# %% [markdown]
# *Figure: the time of one weight-bound product against the tokens in it, measured here
# (points; the two bounds are the pale bands; a busy, shared machine gives noisy figures; the device, dtype and library versions are
# printed above). Notice the flat start, where extra tokens ride on the weight read, and
# the rise once arithmetic dominates. The two bounds use ceilings measured with large,
# well-shaped operations: measured points between them show how much of the arithmetic
# this machine overlaps with the memory traffic; points above both show a product too
# small to reach either ceiling, common for a few rows on a CPU. A serving step also reads
# each sequence's KV cache in separate attention kernels, which the free ride does not
# cover.*
#
# ## Chunked prefill: what it buys
#
# {term}`Chunked prefill <Chunked prefill>` caps the tokens a step processes
# (`max_batched_tokens`): decode tokens first, the prompt in the rest. A
# {glue:text}`prompt_len`-token prompt beside the same 64 decodes, whole or in chunks:

# %%
# NBVAL_CHECK_OUTPUT
chunks = [None, 2048, 1024, 512, B + slack, 256]
runs, rows = {}, []
for c in chunks:
    cp = runs[c] = chunked_prefill(llama70, h100, prompt_len=PROMPT,
                                   max_batched_tokens=c, **at)
    serial = chunked_prefill(llama70, h100, prompt_len=PROMPT, max_batched_tokens=c,
                             overlap=False, **at)
    rows.append((str(c), cp.n_steps, cp.step_s * 1e3, cp.ttft_s * 1e3,
                 cp.total_stall_s * 1e3, serial.total_stall_s * 1e3))
print(table(rows, ["max_batched_tokens", "steps", "worst step ms", "prompt TTFT ms",
                   "stall, all steps ms", "stall, no overlap ms"],
            ["", "d", ".1f", ".1f", ".1f", ".1f"]))
assert runs[None].step_s > 5 * runs[512].decode_step_s   # whole, a prompt stalls a step
assert runs[B + slack].total_stall_s < 0.5e-3            # in the free ride: no stall

# %% tags=["remove-cell"]
assert [round(runs[c].ttft_s * 1e3, 1) for c in (None, 512, 256)] == [37.6, 43.6, 77.8]
glue("prompt_len", f"{PROMPT:,}")
glue("chunk_free", f"{B + slack}")
glue("stall_whole", f"{runs[None].total_stall_s * 1e3:.1f} ms")
glue("worst_512", f"{runs[512].step_s * 1e3:.1f} ms")
glue("ttft_whole", f"{runs[None].ttft_s * 1e3:.1f} ms")
glue("ttft_256", f"{runs[256].ttft_s * 1e3:.1f} ms")
glue("stall_serial", f"{serial.total_stall_s * 1e3:.1f} ms")

# %% [markdown]
# The worst gap between two tokens falls with the chunk, to {glue:text}`worst_512` at 512
# tokens a step: chunking bounds the stall of every step. The total the decoding sequences
# wait over the prompt's steps, {glue:text}`stall_whole` when the prompt runs whole, falls
# only by the part of the prompt that rides free: in every step, the tokens beyond the
# {glue:text}`chunk_free`-token free ride (decode tokens included) still cost their full
# arithmetic, on these same GPUs. Chunks within the free ride hide the prompt entirely,
# and only if the hardware overlaps arithmetic with memory traffic: in the last column,
# without overlap, every chunk size costs the same {glue:text}`stall_serial`. Meanwhile
# the prompt's own TTFT grows as the chunks shrink, from {glue:text}`ttft_whole` to
# {glue:text}`ttft_256`, because each step carries fewer of its tokens.
#
# ## What chunking does not buy: capacity
#
# Now a stream of traffic on one such replica, in the simulator (whose step times are the
# roofline's overlapped bound): requests with 2,048-token prompts and 256-token answers
# arrive at random, 16 a second. The targets ({term}`SLOs <SLO>`): 90% of requests see their
# first token within 300 ms, and no gap between two tokens exceeds 15 ms.

# %%
TP_SIM = 8
cap8 = capacity(llama70, h100, n_gpus=TP_SIM, context_len=2304, tp_degree=TP_SIM)
kv_tokens = int(cap8.kv_budget_bytes_per_device // cap8.kv_bytes_per_token_per_device)
step8 = roofline_step_time(llama70, h100, tp_degree=TP_SIM)


def replica(rate, chunk, max_batch=256, n=3000):
    """A TP=8 replica of Llama-3-70B: 2,048 + 256-token requests, ``rate`` a second."""
    arrivals = workloads.poisson_arrivals(n, rate, seed=1)
    reqs = workloads.make_requests(arrivals, 2048, 256)
    return simulate(reqs, max_batch=max_batch, kv_capacity_tokens=kv_tokens,
                    max_batched_tokens=chunk, step_time_s=step8)


# %%
# NBVAL_CHECK_OUTPUT
TTFT_P90, TPOT_MAX = 0.3, 0.015
runs_to_try = {16: (None, 2048, 1024, 512, 256), 24: (1024, 512)}
sims = {(rate, c): replica(rate, c) for rate, cs in runs_to_try.items() for c in cs}
rows, met = [], {}
for (rate, c), r in sims.items():
    ttft90, worst = r.percentile("ttft_s", 90), r.trace.step_s.max()
    met[rate, c] = ttft90 <= TTFT_P90 and worst <= TPOT_MAX
    rows.append((rate, str(c), ttft90 * 1e3, worst * 1e3,
                 "yes" if met[rate, c] else "no"))
print(table(rows, ["rate", "max_batched_tokens", "TTFT p90 ms", "worst gap ms",
                   "both targets met"], ["d", "", ".0f", ".1f", ""]))
assert [k for k, ok in met.items() if ok] == [(16, 512)]      # one run meets both

# %% tags=["remove-cell"]
glue("sim_worst_none", f"{sims[16, None].trace.step_s.max() * 1e3:.0f} ms")
glue("sim_ttft_256", f"{sims[16, 256].percentile('ttft_s', 90) * 1e3:.0f} ms")
glue("sim_ttft_24", f"{sims[24, 512].percentile('ttft_s', 90):.1f} s")
# Seconds of prefill in each second, at 24 requests a second:
prefill_share = 24 * predict_ttft_s(llama70, h100, 2048, tp_degree=TP_SIM)
assert round(prefill_share, 2) == 0.88
glue("prefill_share", f"{prefill_share:.0%}")

# %%
fig, ax = plots.new_axes("worst gap between two tokens (ms, log scale)",
                         "TTFT p90 (ms, log scale)",
                         "one TP=8 replica, 2,048 + 256-token requests", logy=True)
ax.set_xscale("log")
ax.set_xticks([5, 10, 20, 50, 100, 200], ["5", "10", "20", "50", "100", "200"])
points = {k: (r.trace.step_s.max() * 1e3, r.percentile("ttft_s", 90) * 1e3)
          for k, r in sims.items()}
for rate, marker in ((16, "o"), (24, "s")):
    xy = [points[k] for k in points if k[0] == rate]
    ax.plot(*zip(*xy), marker, label=f"{rate} requests/s")
ax.fill_between([1, TPOT_MAX * 1e3], 50, TTFT_P90 * 1e3, color="C2", alpha=0.15,
                label="both targets met")
ax.set_xlim(4, 300)
ax.set_ylim(50, 5000)
plots.legend(fig)
for (rate, c), xy in points.items():
    plots.label(ax, str(c), xy)

# %% [markdown]
# *Figure: each point is one run, labelled with its `max_batched_tokens`. At 16 requests a
# second the whole-prompt runs stretch some steps to {glue:text}`sim_worst_none`; 256-token
# chunks keep every gap short but spread each prompt over so many steps that prompts queue
# (TTFT p90 {glue:text}`sim_ttft_256`); 512 tokens meets both targets. At 24 requests a
# second neither chunk size meets the TTFT target: the prompts alone take
# {glue:text}`prefill_share` of every second of the replica's arithmetic, and with the
# decodes beside them the queue of prompts grows (TTFT p90 {glue:text}`sim_ttft_24` at
# 512-token chunks). Chunking spreads the work; it does not make it smaller.*
#
# ## Moving the KV cache
#
# On separate pools the prefill GPUs compute the prompt's keys and values and the decode
# GPUs need them: the {term}`KV transfer`. Under tensor parallelism each prefill device
# holds its share of the KV heads and sends it to its peer, so one request moves, per
# device,
#
# $$
# \text{bytes per shard} = kv(t) \times \text{prompt tokens},
# $$
#
# the KV of the prompt at the prefill pool's TP degree (`kv_transfer_bytes`), in time
# $\text{latency} + \text{bytes} / \text{link bandwidth}$ (`transfer_time_s`), the shards
# in parallel when every device has its own link. For the 2,048-token prompt, with a
# 50 GB/s link per GPU (a 400 Gb/s port) and 100 µs of latency, both of them assumptions
# to replace with your own network's figures:

# %%
# NBVAL_CHECK_OUTPUT
LINK_BPS, LINK_LATENCY_S = 50e9, 100e-6
rows = []
for tp in (1, 4, 8):
    shard = kv_transfer_bytes(llama70, PROMPT, tp_degree=tp)
    t = transfer_time_s(shard, LINK_BPS, LINK_LATENCY_S)
    rows.append((tp, fmt_bytes(shard), t * 1e3,
                 predict_ttft_s(llama70, h100, PROMPT, tp_degree=tp) * 1e3))
print(table(rows, ["prefill TP", "KV per device", "transfer ms", "prefill ms"],
            ["d", "", ".2f", ".1f"]))
shard8 = kv_transfer_bytes(llama70, PROMPT, tp_degree=8)
transfer8 = transfer_time_s(shard8, LINK_BPS, LINK_LATENCY_S)
prefill8 = predict_ttft_s(llama70, h100, PROMPT, tp_degree=8)
assert transfer8 < prefill8 / 10               # small beside the prefill at 50 GB/s

# %% tags=["remove-cell"]
assert (fmt_bytes(shard8), round(transfer8 * 1e3, 2)) == ("80 MiB", 1.78)
glue("kv_total", fmt_bytes(kv_transfer_bytes(llama70, PROMPT)))
glue("kv_shard8", fmt_bytes(shard8))
glue("transfer8", f"{transfer8 * 1e3:.1f} ms")
glue("prefill8", f"{prefill8 * 1e3:.1f} ms")
glue("link_even", f"{shard8 / prefill8 / 1e9:.1f} GB/s")

# %%
bws = np.geomspace(1e9, 1e12, 50)
fig, ax = plots.new_axes("link bandwidth per device (GB/s)", "time (ms)",
                         f"moving a {PROMPT:,}-token prompt's KV", logy=True)
ax.set_xscale("log")
for tp in (1, 4, 8):
    shard = kv_transfer_bytes(llama70, PROMPT, tp_degree=tp)
    ms = [transfer_time_s(shard, bw, LINK_LATENCY_S) * 1e3 for bw in bws]
    ax.plot(bws / 1e9, ms, label=f"TP={tp}")
ax.axhline(prefill8 * 1e3, color="grey", lw=0.8, ls="--",
           label="the prefill itself at TP=8")
plots.legend(fig)

# %% [markdown]
# *Figure: transfer time per request against the link's bandwidth, one line per prefill
# TP degree (each device sends its shard over its own link). The whole cache is
# {glue:text}`kv_total`; at TP=8 each device sends {glue:text}`kv_shard8`, in
# {glue:text}`transfer8` at 50 GB/s: small beside the {glue:text}`prefill8` prefill.
# Below about {glue:text}`link_even` per device the transfer takes longer than the
# prefill itself, and a slow link, not the GPUs, sets the TTFT. An fp8 KV cache halves
# the bytes.*
#
# ## Sizing the pools for a latency target
#
# **Prefill pool.** One prefill instance takes a prompt at a time, in a fixed time $t_p$
# (the roofline prefill; batching prompts would not shorten it, since it is compute-bound).
# Requests arrive at random at rate $\lambda$ and are spread at random over $n$ instances,
# so each is an M/D/1 queue with utilisation $\rho = \lambda t_p / n$. Its mean wait is
# the Pollaczek-Khinchine formula with no variance in service {cite}`kleinrock1975queueing`,
#
# $$
# \bar W = \frac{\rho\, t_p}{2(1 - \rho)},
# $$
#
# and a request waits at all with probability exactly $\rho$. For a percentile, Kingman's
# bound $P(W > t) \le e^{-x t / t_p}$ {cite}`kingman1964martingale`, with $x$ the positive
# root of $\rho (e^x - 1) = x$, gives the $q$-th percentile of the wait at most
# $t_p \ln\frac{1}{1-q} / x$ (zero when $\rho \le 1 - q$). The first token comes at
# $\text{wait} + t_p + \text{transfer}$; the target caps $\rho$, and $n$ is the fewest
# instances that keep every one under the cap. Check the two formulas against a queue
# simulated one request at a time (Lindley's recursion, `lindley_waits`):

# %%
# NBVAL_CHECK_OUTPUT
rng = np.random.default_rng(0)
rows = []
for rho in (0.5, 0.7, 0.85):            # arrivals per service time; service time 1
    w = lindley_waits(rng.exponential(1 / rho, 200_000), 1.0)[10_000:]
    mean, bound90 = md1_wait_s(rho, 1.0), md1_wait_s(rho, 1.0, 90)
    rows.append((rho, mean, w.mean(), bound90, np.percentile(w, 90)))
    assert abs(w.mean() / mean - 1) < 0.05 and np.percentile(w, 90) <= bound90
print(table(rows, ["utilisation", "mean wait: formula", "simulated", "p90 wait: bound",
                   "simulated"], [".2f", ".2f", ".2f", ".2f", ".2f"]))

# %% [markdown]
# Waits are in units of the service time. The mean formula matches the simulated queue;
# the percentile bound sits a little above the simulated percentile, on the safe side.
#
# **Decode pool.** A decode instance's step must fit the TPOT target, which caps its batch
# $B$: the largest batch whose step, at the average context of a decoding sequence, is
# within the target, and that fits in KV memory at the final length. A request decodes
# for $(\text{output} - 1)$ steps of time $T(B)$, so an instance taking $r$ requests a
# second holds on average $r\,(\text{output} - 1)\,T(B)$ of them (Little's law); arriving
# at random, that count is Poisson. The instance is sized so that it exceeds $B$ at most
# 10% of the time.
#
# The scenario: {glue:text}`sc_rate` requests a second of 2,048-token prompts and
# 256-token answers, TTFT p90 within 300 ms, every gap within 15 ms, Llama-3-70B on H100s
# and the 50 GB/s link above; every TP degree pair is tried and the fewest GPUs kept.

# %%
# NBVAL_CHECK_OUTPUT
wl = Workload(arrival_rate_per_s=32, prompt_len=2048, output_len=256)
slo = SLO(ttft_s=TTFT_P90, tpot_s=TPOT_MAX, percentile=90)
link = dict(link_Bps=LINK_BPS, link_latency_s=LINK_LATENCY_S)
split = cheapest_disaggregated(llama70, h100, wl, slo, tp_degrees=(2, 4, 8), **link)
p, d = split.prefill, split.decode
print(f"prefill pool: {p.n_instances} x TP={p.tp_degree} = {p.n_gpus} GPUs; "
      f"prefill {p.prefill_s * 1e3:.1f} ms, each busy {p.prefill_busy:.0%}, "
      f"TTFT p90 at most {p.ttft_s * 1e3:.0f} ms "
      f"(KV transfer {split.transfer_s * 1e3:.1f} ms)")
print(f"decode pool:  {d.n_instances} x TP={d.tp_degree} = {d.n_gpus} GPUs; "
      f"batch up to {d.batch}, step {d.step_s * 1e3:.1f} ms, "
      f"{d.mean_batch:.0f} sequences on average")
print(f"in all: {split.n_gpus} GPUs")
assert p.ttft_s <= slo.ttft_s and d.step_s <= slo.tpot_s      # both targets met

# %% tags=["remove-cell"]
assert (p.n_gpus, d.n_gpus, d.batch) == (16, 8, 83)
glue("sc_rate", f"{wl.arrival_rate_per_s:g}")
glue("split_gpus", f"{split.n_gpus}")
glue("split_prefill", f"{p.n_instances} x TP={p.tp_degree}")
glue("split_decode", f"{d.n_instances} x TP={d.tp_degree}")
glue("split_batch", f"{d.batch}")

# %% [markdown]
# Separate pools meet both targets on {glue:text}`split_gpus` GPUs: prefill
# {glue:text}`split_prefill`, decode {glue:text}`split_decode` with batches of up to
# {glue:text}`split_batch`. The prefill instances run compute-bound, the decode instances
# memory-bound, each far from the ridge point. The two pool functions take their own GPU,
# so a pool can also run on a part that suits its phase {cite}`patel2024splitwise`; here
# both use the H100.
#
# ## One pool or two: GPUs and cost
#
# A pool that does both (`size_mixed_pool`) chooses, for each batch, the largest chunk
# whose step stays within the TPOT target (`max_prefill_tokens`); a prompt then spans
# several steps, prompts queue for the chunk slot as an M/D/1 queue, and the decode
# batch's occupancy is Poisson as above. Both deployments are sized under both roofline
# bounds, since a mixed pool's chunks sit right at the ridge point, where the bounds
# differ most. Cost: the GPUs at {glue:text}`gpu_price` an hour, every hour, over the
# tokens they carry.

# %%
# NBVAL_CHECK_OUTPUT
TPS = (2, 4, 8)                     # the TP degrees each deployment may use
plans, rows = {}, []
for overlap in (True, False):
    plans["one pool", overlap] = cheapest_mixed_pool(
        llama70, h100, wl, slo, tp_degrees=TPS, overlap=overlap)
    plans["two pools", overlap] = cheapest_disaggregated(
        llama70, h100, wl, slo, tp_degrees=TPS, overlap=overlap, **link)
for (name, overlap), plan in plans.items():
    usd = usd_per_million_tokens(plan.n_gpus, wl, H100_USD_PER_GPU_HOUR)
    rows.append((name, "overlap" if overlap else "no overlap", plan.n_gpus, usd))
print(table(rows, ["deployment", "bound", "GPUs", "$ per 1M tokens"],
            ["", "", "d", ".3f"]))
gpus = {k: v.n_gpus for k, v in plans.items()}
assert gpus["two pools", True] == gpus["two pools", False]   # far from the ridge: alike

# %% tags=["remove-cell"]
assert gpus == {("one pool", True): 16, ("two pools", True): 24,
                ("one pool", False): 32, ("two pools", False): 24}
usd = {k: usd_per_million_tokens(v, wl, H100_USD_PER_GPU_HOUR) for k, v in gpus.items()}
glue("gpu_price", f"${H100_USD_PER_GPU_HOUR:.2f}")
glue("mixed_ov", f"{gpus['one pool', True]}")
glue("mixed_no", f"{gpus['one pool', False]}")
glue("split_ov", f"{gpus['two pools', True]}")
glue("split_no", f"{gpus['two pools', False]}")
glue("usd_mixed_ov", f"${usd['one pool', True]:.2f}")
glue("usd_mixed_no", f"${usd['one pool', False]:.2f}")
glue("usd_split", f"${usd['two pools', True]:.2f}")
glue("mixed_chunk", f"{plans['one pool', True].max_batched_tokens:,}")
glue("mixed_tp", f"{plans['one pool', True].tp_degree}")
glue("hosted_price", f"${LLAMA_3_70B_HOSTED.usd_per_1k_input * 1000:.2f}")

# %% [markdown]
# If the engine overlaps a chunk's arithmetic with the decode batch's memory traffic, one
# pool with chunked prefill is the cheaper deployment: {glue:text}`mixed_ov` GPUs
# ({glue:text}`usd_mixed_ov` per million tokens) against {glue:text}`split_ov`
# ({glue:text}`usd_split`), because it fills the decode steps' idle arithmetic with
# prompts. If it does not overlap them, one pool needs {glue:text}`mixed_no` GPUs
# ({glue:text}`usd_mixed_no`), and separate pools are cheaper. Separate pools need
# {glue:text}`split_no` GPUs under either bound: each phase runs far from the ridge, where
# the bounds agree. Real engines fall between the bounds, so which deployment wins at
# this target is a measurement of your engine, while the cost of separate pools can be
# planned with confidence. (For scale: the same model from a hosting provider costs
# {glue:text}`hosted_price` per million tokens; all of these are GPU hours only.)
#
# The sized mixed pool, replayed in the simulator: one of its TP={glue:text}`mixed_tp`
# instances, its share of the arrivals, its batch limit and its
# {glue:text}`mixed_chunk`-token budget per step.

# %%
# NBVAL_CHECK_OUTPUT
mixed = plans["one pool", True]
chunk = max_prefill_tokens(llama70, h100, decode_batch=mixed.batch,
                           context_len=wl.mean_decode_context, step_target_s=slo.tpot_s,
                           tp_degree=mixed.tp_degree)
assert mixed.max_batched_tokens == mixed.batch + min(chunk, wl.prompt_len)
print(f"sized: {mixed.n_instances} x TP={mixed.tp_degree}, batch up to {mixed.batch}, "
      f"{chunk} prompt tokens a step beside them")
check_run = replica(wl.arrival_rate_per_s / mixed.n_instances, mixed.max_batched_tokens,
                    max_batch=mixed.batch)
ttft90, worst = check_run.percentile("ttft_s", 90), check_run.trace.step_s.max()
print(f"predicted: TTFT p90 at most {mixed.ttft_s * 1e3:.0f} ms, "
      f"worst gap {mixed.step_s * 1e3:.1f} ms")
print(f"simulated: TTFT p90 {ttft90 * 1e3:.0f} ms, worst gap {worst * 1e3:.1f} ms, "
      f"{check_run.n_completed} of 3000 completed")
assert ttft90 <= slo.ttft_s and worst <= slo.tpot_s * 1.001

# %% [markdown]
# The sizing is conservative (it assumes a full batch in every step) and the simulated
# replica meets both targets. Across TPOT targets, at the same rate and TTFT target:

# %%
targets_ms = [10, 12.5, 15, 20, 25, 30, 40, 50, 60]


def fewest_gpus(name, target_slo, overlap):
    """GPUs of the cheapest deployment, one pool or two (NaN if none meets the SLO)."""
    plan = (cheapest_mixed_pool(llama70, h100, wl, target_slo, tp_degrees=TPS,
                                overlap=overlap) if name == "one pool" else
            cheapest_disaggregated(llama70, h100, wl, target_slo, tp_degrees=TPS,
                                   overlap=overlap, **link))
    return plan.n_gpus if plan else math.nan


# %%
curves = {(name, overlap): [fewest_gpus(name, SLO(TTFT_P90, t / 1e3), overlap)
                            for t in targets_ms]
          for overlap in (True, False) for name in ("one pool", "two pools")}
fig, ax = plots.new_axes("TPOT target: longest gap between two tokens (ms)",
                         "GPUs (H100)",
                         f"{wl.arrival_rate_per_s:g} requests/s, "
                         f"TTFT p90 within {TTFT_P90 * 1e3:.0f} ms")
for (name, overlap), ys in curves.items():     # overlap: wide and pale, drawn first
    style = dict(lw=6, alpha=0.35) if overlap else dict(ls=":", marker="o", lw=1.5)
    ax.plot(targets_ms, ys, color="C0" if name == "one pool" else "C1",
            label=f"{name}, {'overlap' if overlap else 'no overlap'}", **style)
ax.set_ylim(0, None)
plots.legend(fig, ncols=2)
assert all(a <= b for a, b in zip(curves["one pool", True], curves["two pools", True]))
assert curves["one pool", False][0] == 2 * curves["two pools", False][0]

# %% tags=["remove-cell"]
assert max(abs(a - b) for a, b in zip(curves["two pools", True],
                                      curves["two pools", False])) <= 4
glue("tight_mixed_no", f"{curves['one pool', False][0]:.0f}")
glue("tight_split_no", f"{curves['two pools', False][0]:.0f}")
glue("tight_ms", f"{targets_ms[0]:g} ms")

# %% [markdown]
# *Figure: the fewest H100s that meet both targets, over TP degrees 2, 4 and 8, for one
# pool (blue) and two (orange), with (wide, pale) and without (dotted) overlap of arithmetic
# and memory traffic. With overlap, one pool is never dearer. Without it, one pool's
# count climbs as the target tightens, to {glue:text}`tight_mixed_no` GPUs at
# {glue:text}`tight_ms` against {glue:text}`tight_split_no` for separate pools: a tight
# token target leaves a shared step little room for prompts, and every prompt token then
# costs decode time. The two-pool lines barely move between the bounds.*
#
# Takeaway: a prompt in a decode step costs every sequence decoding beside it the prompt's arithmetic.
# Chunk it, and that cost is bounded per step; give it its own GPUs, and it is gone from
# the decode step, at the price of moving the KV and of two pools to size. Which costs
# fewer GPUs depends on how tight the token target is and on how well the engine overlaps
# a mixed step. DistServe {cite}`zhong2024distserve` makes its case for separate pools in
# exactly these terms: the requests a second a deployment serves within both a TTFT and a
# TPOT target, its {term}`goodput <Goodput>`.
#
# ## Beginner mistakes, wrong and right
#
# **A decode-only TPOT for a pool that also prefills.** A benchmark of decode steps alone
# promises a TPOT that a pool with arriving prompts does not deliver: each whole prompt
# stretches one step for everyone.

# %%
# NBVAL_CHECK_OUTPUT
busy = sims[16, None]
median_batch = int(np.median(busy.trace.decode))
wrong = predict_tpot_s(llama70, h100, median_batch, 2176, tp_degree=TP_SIM)
right = busy.itl_percentile_s(99)
print(f"wrong (decode steps alone, median batch): {wrong * 1e3:5.1f} ms between tokens")
print(f"right (the same replica with prompts arriving, ITL p99): {right * 1e3:5.1f} ms")
assert right > 5 * wrong

# %% [markdown]
# **A prefill pool sized to its average load.** Three instances carry the prompts of 32
# requests a second at TP=4 on average (each busy 78%): the mean TTFT looks fine, and
# the 90th percentile is far above the target. Size for the percentile.

# %%
# NBVAL_CHECK_OUTPUT
t_p = predict_ttft_s(llama70, h100, 2048, tp_degree=4)
wrong_n = math.ceil(wl.arrival_rate_per_s * t_p)                  # enough on average
right_n = size_prefill_pool(llama70, h100, wl, slo, tp_degree=4).n_instances
for name, n in (("wrong", wrong_n), ("right", right_n)):
    gaps = np.random.default_rng(2).exponential(n / wl.arrival_rate_per_s, 100_000)
    ttft = lindley_waits(gaps, t_p)[5000:] + t_p              # one instance's queue
    print(f"{name}: {n} instances, each busy {wl.arrival_rate_per_s * t_p / n:.0%}; "
          f"simulated TTFT mean {ttft.mean() * 1e3:.0f} ms, "
          f"p90 {np.percentile(ttft, 90) * 1e3:.0f} ms")
    assert (np.percentile(ttft, 90) <= slo.ttft_s) == (name == "right")
assert (wrong_n, right_n) == (3, 4)

# %% [markdown]
# **A decode batch sized by memory alone.** At TP=4 the KV memory holds
# {glue:text}`mem_batch` sequences at their final length, but a step of that batch takes
# longer than the 15 ms target; the target, not the memory, sets the batch.

# %%
# NBVAL_CHECK_OUTPUT
mem_batch = capacity(llama70, h100, n_gpus=4, context_len=wl.final_len,
                     tp_degree=4).sequences_per_replica
wrong = predict_tpot_s(llama70, h100, mem_batch, wl.mean_decode_context, tp_degree=4)
right_pool = size_decode_pool(llama70, h100, wl, slo, tp_degree=4)
print(f"wrong: batch {mem_batch} (what fits), {wrong * 1e3:.1f} ms a step")
print(f"right: batch {right_pool.batch} (what the target allows), "
      f"{right_pool.step_s * 1e3:.1f} ms a step")
assert wrong > slo.tpot_s >= right_pool.step_s and right_pool.batch < mem_batch

# %% tags=["remove-cell"]
glue("mem_batch", f"{mem_batch}")

# %% [markdown]
# ## The audit: one pool under a tight token target
#
# `servelib.audit` checks a capacity plan that states latency targets. A plan that runs
# whole prompts in its decode steps under a TPOT target those steps cannot meet gets the
# code `one-pool-tight-slos`, with the chunk that would fit and the GPUs each remedy needs
# at the plan's load. The capstone's node, with a 30 ms target:

# %%
# NBVAL_CHECK_OUTPUT
print("\n".join(finding_lines(mistake_plans()["one-pool-tight-slos"])))

# %% [markdown]
# At this plan's modest load the cheaper remedy is chunking, not a second pool.

# %% [markdown]
# ## Simulated: one pool against two
#
# The sizing rests on queueing formulas and on a full batch in every step. The simulator
# replays both deployments request by request, each instance a scheduler with its own
# pool's roofline step times and TP degree. `simulate_pool` runs the one pool;
# `simulate_disaggregated` runs the two, where a prefill instance's step makes a
# request's first token, the prompt's KV crosses the link (`kv_transfer_time`, the 50
# GB/s link above), and a decode instance generates the rest without ever prefilling.
# The first token reaches the user when the transfer ends, as the sizing charged it:
# TTFT includes the transfer. A wait for a decode slot falls in the gap before the
# second token, so in TPOT, each request's mean gap between tokens. Requests are dealt
# to instances in turn (round robin). Both deployments as sized for the overlapped
# bound, at {glue:text}`sc_rate` requests a second, simulated under each bound:

# %%
# NBVAL_CHECK_OUTPUT
import dataclasses

from servelib.book import table
from servelib.sim import (PoolSpec, Request, kv_transfer_time, simulate_disaggregated,
                          simulate_pool, sized_pool)

one_plan = cheapest_mixed_pool(llama70, h100, wl, slo, tp_degrees=(2, 4, 8))
two_plan = cheapest_disaggregated(llama70, h100, wl, slo, tp_degrees=(2, 4, 8), **link)
move_kv = kv_transfer_time(llama70, tp_degree=two_plan.prefill.tp_degree, **link)


def one_pool(reqs, overlap=True, instances=None):
    """The sized one-pool deployment (or another instance count) serving reqs."""
    spec = sized_pool(llama70, h100, one_plan, overlap=overlap)
    spec = dataclasses.replace(spec, n_instances=instances or spec.n_instances)
    return simulate_pool(reqs, spec)


def two_pools(reqs, overlap=True, prefill=None, decode=None, dispatch="round_robin"):
    """The sized two-pool deployment (or other instance counts) serving reqs."""
    pre = sized_pool(llama70, h100, two_plan.prefill, overlap=overlap)
    dec = sized_pool(llama70, h100, two_plan.decode, overlap=overlap)
    pre = dataclasses.replace(pre, n_instances=prefill or pre.n_instances)
    dec = dataclasses.replace(dec, n_instances=decode or dec.n_instances)
    return simulate_disaggregated(reqs, prefill=pre, decode=dec, transfer_s=move_kv,
                                  dispatch=dispatch)


def stream(rate, n=1200):
    """n requests of the scenario's size arriving at random, rate a second."""
    arrivals = workloads.poisson_arrivals(n, rate, seed=1)
    return workloads.make_requests(arrivals, wl.prompt_len, wl.output_len)


def within(r):
    """Both targets: TTFT p90, and the gaps (each request's mean, and every step)."""
    return (r.percentile("ttft_s", 90) <= slo.ttft_s
            and r.percentile("tpot_s", 90) <= slo.tpot_s
            and r.itl_percentile_s(100) <= slo.tpot_s)


def ms(r, metric, qs, digits=0):
    return "/".join(f"{r.percentile(metric, q) * 1e3:.{digits}f}" for q in qs)


deployments = {"one pool": one_pool, "two pools": two_pools}
design = stream(wl.arrival_rate_per_s)
at_design = {(name, overlap): run(design, overlap)
             for name, run in deployments.items() for overlap in (True, False)}
print(table([(name, "yes" if overlap else "no", r.n_gpus, ms(r, "ttft_s", (50, 90, 99)),
              ms(r, "tpot_s", (50, 90), 1), r.itl_percentile_s(100) * 1e3,
              "yes" if within(r) else "no")
             for (name, overlap), r in at_design.items()],
            ["deployment", "overlap", "GPUs", "TTFT p50/p90/p99", "TPOT p50/p90",
             "worst gap", "met"], ["", "", "d", "", "", ".1f", ""]))
print("(times in milliseconds)")

# %% tags=["remove-cell"]
one, two = at_design["one pool", True], at_design["two pools", True]
one_serial, two_serial = at_design["one pool", False], at_design["two pools", False]
assert [within(r) for r in at_design.values()] == [True, False, True, False]
assert one.n_gpus == one_plan.n_gpus == 16 and two.n_gpus == two_plan.n_gpus == 24
assert one.percentile("ttft_s", 90) < one_plan.ttft_s
assert two.percentile("ttft_s", 90) < two_plan.prefill.ttft_s
assert all(r.n_completed == len(design) for r in at_design.values())
assert abs(two.pools["prefill"].utilisation / two_plan.prefill.prefill_busy - 1) < 0.05
glue("pools_one_ttft90", f"{one.percentile('ttft_s', 90) * 1e3:.0f} ms")
glue("pools_two_ttft90", f"{two.percentile('ttft_s', 90) * 1e3:.0f} ms")
glue("pools_one_tpot90", f"{one.percentile('tpot_s', 90) * 1e3:.1f} ms")
glue("pools_two_tpot90", f"{two.percentile('tpot_s', 90) * 1e3:.1f} ms")
glue("pools_one_gap", f"{one.itl_percentile_s(100) * 1e3:.1f} ms")
glue("pools_two_gap", f"{two.itl_percentile_s(100) * 1e3:.1f} ms")
glue("pools_pred_one", f"{one_plan.ttft_s * 1e3:.0f} ms")
glue("pools_pred_two", f"{two_plan.prefill.ttft_s * 1e3:.0f} ms")
glue("pools_wait99", f"{np.nanpercentile(two.decode_wait_s, 99) * 1e3:.0f} ms")
glue("pools_busy", f"{two.pools['prefill'].utilisation:.0%}")
glue("pools_pred_busy", f"{two_plan.prefill.prefill_busy:.0%}")
glue("pools_batch", f"{two.pools['decode'].mean_batch:.0f}")
glue("pools_pred_batch", f"{two_plan.decode.mean_batch:.0f}")
glue("pools_one_serial_ttft", f"{one_serial.percentile('ttft_s', 90):.1f} s")
glue("pools_one_serial_gap", f"{one_serial.itl_percentile_s(100) * 1e3:.1f} ms")
glue("pools_two_serial_gap", f"{two_serial.itl_percentile_s(100) * 1e3:.1f} ms")
glue("pools_two_serial_ttft", f"{two_serial.percentile('ttft_s', 90) * 1e3:.0f} ms")
for key, r in (("pools_usd_one", one), ("pools_usd_two", two)):
    glue(key, f"${usd_per_million_tokens(r.n_gpus, wl, H100_USD_PER_GPU_HOUR):.2f}")

# %% [markdown]
# Both plans meet both targets in the simulation, with room to spare on TTFT:
# {glue:text}`pools_one_ttft90` at the 90th percentile for one pool, where the sizing
# promised at most {glue:text}`pools_pred_one`, and {glue:text}`pools_two_ttft90` for
# two pools against {glue:text}`pools_pred_two`. The sizing's percentile is a bound
# (Kingman's, for a queue fed at random), and it takes every decode step at a full
# batch, whereas the simulated decode instances hold {glue:text}`pools_batch` sequences
# on average, not {glue:text}`pools_pred_batch`; each prefill instance is busy
# {glue:text}`pools_busy` of the time, as predicted ({glue:text}`pools_pred_busy`). One
# pool's chunks fill its steps to {glue:text}`pools_one_gap`, at the target by
# construction; two pools' decode steps stay at {glue:text}`pools_two_gap`. A request's
# KV lands while a decode step is under way and waits for the next one
# ({glue:text}`pools_wait99` at the 99th percentile); that wait is in its TPOT,
# {glue:text}`pools_two_tpot90` at p90 for two pools against
# {glue:text}`pools_one_tpot90` for one pool, whose steps reach the target only while
# they carry a chunk of a prompt. In money, {glue:text}`pools_usd_one` per million
# tokens for one pool, {glue:text}`pools_usd_two` for two.
#
# If the GPUs overlap none of a step's arithmetic with its memory traffic (the rows
# without overlap), the same one pool collapses: its {glue:text}`mixed_chunk`-token
# steps take {glue:text}`pools_one_serial_gap`, prompts fall behind, and TTFT p90
# reaches {glue:text}`pools_one_serial_ttft`. The two pools miss the token target by a
# little ({glue:text}`pools_two_serial_gap` steps) and keep their TTFT
# ({glue:text}`pools_two_serial_ttft`): each phase runs far from the ridge point, where
# the two bounds nearly agree. The same load, swept:

# %%
# NBVAL_CHECK_OUTPUT
loads = (24, 32, 40, 48)
by_load = {(name, rate): at_design[name, True] if rate == wl.arrival_rate_per_s
           else run(stream(rate))
           for name, run in deployments.items() for rate in loads}
columns = (("ttft_s", 0), ("tpot_s", 1))
print(table([(rate, *(ms(by_load[name, rate], m, (90,), d)
                      for name in deployments for m, d in columns),
              *("yes" if within(by_load[name, rate]) else "no" for name in deployments))
             for rate in loads],
            ["requests/s", "one: TTFT p90", "TPOT p90", "two: TTFT p90", "TPOT p90",
             "one met", "two met"]))
print("(times in milliseconds)")

# %% tags=["remove-cell"]
held = {name: max(rate for rate in loads if within(by_load[name, rate]))
        for name in deployments}
assert held == {"one pool": 40, "two pools": 40}
assert not within(by_load["one pool", 48]) and not within(by_load["two pools", 48])
glue("pools_held", f"{held['one pool']}")
glue("pools_over_one", f"{by_load['one pool', 48].percentile('ttft_s', 90):.1f} s")
over_two = by_load["two pools", 48].percentile("tpot_s", 90)
glue("pools_over_two", f"{over_two * 1e3:.0f} ms")

# %%
title = f"Llama-3-70B on H100s, {wl.prompt_len:,} + {wl.output_len} tokens"
fig, ax = plots.new_axes("requests per second", "90th percentile / its target", title,
                         logy=True)
targets = (("ttft_s", slo.ttft_s, "-"), ("tpot_s", slo.tpot_s, "--"))
for name, color in (("one pool", "C0"), ("two pools", "C1")):
    gpus = by_load[name, loads[0]].n_gpus
    for metric, target, style in targets:
        ratios = [by_load[name, x].percentile(metric, 90) / target for x in loads]
        ax.plot(loads, ratios, style, marker="o", color=color,
                label=f"{name} ({gpus} GPUs), {metric[:4].upper()}")
ax.axhline(1, color="grey", lw=0.8, ls=":", label="the target")
ax.set_yticks([0.25, 0.5, 1, 2, 4], ["0.25", "0.5", "1", "2", "4"])
ax.minorticks_off()
plots.legend(fig)

# %% [markdown]
# *Figure: TTFT and TPOT at the 90th percentile, each over its target (300 ms and 15
# ms), as the load grows, simulated with the overlapped bound; below 1 the target holds.
# Both deployments hold both targets up to {glue:text}`pools_held` requests a second.
# Past that, one pool runs out of prefill capacity first (TTFT p90
# {glue:text}`pools_over_one` at 48 a second), two pools run out of decode slots (TPOT
# p90 {glue:text}`pools_over_two`): each gives way where its sizing left the least
# headroom.*
#
# Would fewer GPUs do? One instance fewer in each pool, at the design load:

# %%
# NBVAL_CHECK_OUTPUT
n_pre, n_dec = two_plan.prefill.n_instances, two_plan.decode.n_instances
trials = {
    "one pool, an instance fewer": one_pool(design, instances=one_plan.n_instances - 1),
    "two pools, a decode instance fewer": two_pools(design, decode=n_dec - 1),
    "two pools, a prefill instance fewer": two_pools(design, prefill=n_pre - 1),
    "  the same, dealt at random": two_pools(design, prefill=n_pre - 1,
                                             dispatch="random"),
}
print(table([(name, r.n_gpus, ms(r, "ttft_s", (90,)), ms(r, "tpot_s", (90,), 1),
              "yes" if within(r) else "no") for name, r in trials.items()],
            ["deployment", "GPUs", "TTFT p90", "TPOT p90", "met"],
            ["", "d", "", "", ""]))
print("(times in milliseconds)")

# %% tags=["remove-cell"]
assert [within(r) for r in trials.values()] == [False, False, True, False]
fewer = trials["two pools, a prefill instance fewer"]
glue("pools_fewer_gpus", f"{fewer.n_gpus}")
glue("pools_fewer_ttft", f"{fewer.percentile('ttft_s', 90) * 1e3:.0f} ms")
at_random = trials["  the same, dealt at random"]
glue("pools_random_ttft", f"{at_random.percentile('ttft_s', 90) * 1e3:.0f} ms")
glue("pools_fewer_busy", f"{fewer.pools['prefill'].utilisation:.0%}")

# %% [markdown]
# The simulation accepts one prefill instance fewer, {glue:text}`pools_fewer_gpus` GPUs
# in all (TTFT p90 {glue:text}`pools_fewer_ttft`, each prefill instance busy
# {glue:text}`pools_fewer_busy`), and nothing else. Dealt in turn, each instance's
# requests arrive at far steadier intervals than the random stream the M/D/1 sizing
# assumes; dealt at random, the same three instances miss the target
# ({glue:text}`pools_random_ttft`). The router is part of the capacity plan. Even so,
# separate pools need more GPUs than one pool's {glue:text}`mixed_ov` at this target
# with overlap, as the sizing said: the simulation confirms the answer and shows its
# margins.

# %% [markdown]
# ## Summary: the numbers to carry
#
# | what | value |
# |---|---|
# | a 2,048-token prompt in a step with 64 decodes (Llama-3-70B, TP=8, H100) | {glue:text}`decode_ms` -> {glue:text}`mixed_ms` ({glue:text}`mixed_ratio`) |
# | prompt tokens that step carries before it turns compute-bound | {glue:text}`slack` |
# | KV moved per request, 2,048-token prompt, per device at TP=8 | {glue:text}`kv_shard8` ({glue:text}`transfer8` at 50 GB/s) |
# | 32 requests/s, TTFT p90 300 ms, 15 ms a token: separate pools | {glue:text}`split_ov` GPUs ({glue:text}`usd_split` per 1M tokens) under either bound |
# | the same, one pool with chunked prefill | {glue:text}`mixed_ov` GPUs with overlap, {glue:text}`mixed_no` without |
#
# In short: a step is as long as the arithmetic of everything in it, so a whole prompt in
# a decode step pauses every running answer. Chunking bounds the pause and leaves the work
# on the same GPUs; separate pools remove it and add a KV transfer and a second queue to
# size. Size prefill for a TTFT percentile, not its average load; size decode by the
# token target, not by memory alone; and measure how well your engine overlaps a mixed
# step before choosing.
#
# ## Exercises
#
# Each exercise states every constant it needs. Write your answer in the cell and run it:
# `check` says whether it is right. Solutions are behind the toggles: each works the
# numbers by hand, then confirms them with `servelib`.
#
# **dis-1.** Llama-3-70B (70.55 billion parameters, bf16; 320 KiB of KV cache per token)
# on four H100 SXMs (TP=4; 989.5 dense bf16 TFLOP/s and 3.35 TB/s each): 128 sequences
# decode at 4,096 tokens of context when a 1,024-token prompt is prefilled in the same
# step. How many times longer is that step than the decode step alone (roofline,
# overlapped bound, $2P$ FLOPs per token)?

# %% tags=["hide-input"]
### BEGIN SOLUTION
P = 70.55e9


def step_s(batch, prompt, tp=4, context=4096):
    """A mixed step per device: the larger of compute and memory time."""
    kv = 320 * 1024 / tp                 # KV bytes a token on each device
    compute = 2 * P * (batch + prompt) / (tp * 989.5e12)
    memory = (2 * P / tp + batch * kv * context + prompt * kv) / 3.35e12
    return max(compute, memory)


by_hand = step_s(128, 1024) / step_s(128, 0)
at = dict(decode_batch=128, context_len=4096, tp_degree=4)
answer = (mixed_step_time_s(llama70, h100, prefill_tokens=1024, **at)
          / mixed_step_time_s(llama70, h100, prefill_tokens=0, **at))
print(f"{by_hand:.3f}x by hand, {answer:.3f}x from servelib")
### END SOLUTION
check("dis-1", answer)

# %% [markdown]
# **dis-2.** Llama-3-70B (70.55 billion parameters, bf16; 320 KiB of KV cache per token)
# on four H100 SXMs (TP=4; 989.5 dense bf16 TFLOP/s and 3.35 TB/s each): 128 sequences
# decode at 4,096 tokens of context. How many prompt tokens can that step carry beside
# them and still be memory-bound (the prompt tokens' KV writes counted)?

# %% tags=["hide-input"]
### BEGIN SOLUTION
per_token = 2 * 70.55e9 / (4 * 989.5e12)         # one token's compute time, per device
kv = 320 * 1024 / 4                               # KV bytes a token, per device
decode_bytes = 2 * 70.55e9 / 4 + 128 * kv * 4096  # weights and the 128 caches
# Memory-bound while per_token * (128 + p) <= (decode_bytes + p * kv) / bandwidth:
by_hand = math.floor((decode_bytes / 3.35e12 - 128 * per_token)
                     / (per_token - kv / 3.35e12))
answer = prefill_slack_tokens(llama70, h100, decode_batch=128, context_len=4096,
                              tp_degree=4)
print(f"{by_hand} prompt tokens by hand, {answer} from servelib")
### END SOLUTION
check("dis-2", answer)

# %% [markdown]
# **dis-3.** Llama-3-8B (32 layers, 8 KV heads of `head_dim` 128; fp16 KV cache) prefills
# a 4,096-token prompt at TP=2; each device sends its shard of the KV over its own
# 25 GB/s link with 20 µs of latency. How many milliseconds does the transfer take?

# %% tags=["hide-input"]
### BEGIN SOLUTION
shard = 2 * 32 * (8 // 2) * 128 * 2 * 4096   # K and V, all layers, this device's heads
by_hand = (20e-6 + shard / 25e9) * 1e3
kv_shard = kv_transfer_bytes(get_model("llama-3-8b"), 4096, tp_degree=2)
answer = transfer_time_s(kv_shard, 25e9, 20e-6) * 1e3
print(f"{shard / 2**20:.0f} MiB a device: {by_hand:.3f} ms by hand, "
      f"{answer:.3f} ms from servelib")
### END SOLUTION
check("dis-3", answer)

# %% [markdown]
# **dis-4.** Llama-3-70B (70.55 billion parameters, bf16; 320 KiB of KV cache per token)
# on eight H100 SXMs (TP=8; 989.5 dense bf16 TFLOP/s and 3.35 TB/s each): 32 sequences
# decode at 4,096 tokens of context. A 4,096-token prompt is prefilled with
# `max_batched_tokens=1024` (decode tokens first, the prompt in the rest of each step).
# How many milliseconds until its first token, with no queue (roofline, overlapped bound,
# $2P$ FLOPs per token)?

# %% tags=["hide-input"]
### BEGIN SOLUTION
chunk = 1024 - 32                    # prompt tokens a step, after the 32 decodes
steps = math.ceil(4096 / chunk)      # the last chunk is shorter
last = 4096 - (steps - 1) * chunk
# step_s: the mixed step of dis-1's solution, here at TP=8
by_hand = ((steps - 1) * step_s(32, chunk, tp=8) + step_s(32, last, tp=8)) * 1e3
answer = chunked_prefill(llama70, h100, prompt_len=4096, decode_batch=32,
                         context_len=4096, max_batched_tokens=1024,
                         tp_degree=8).ttft_s * 1e3
print(f"{steps} steps: {by_hand:.2f} ms by hand, {answer:.2f} ms from servelib")
### END SOLUTION
check("dis-4", answer)

# %% [markdown]
# **dis-5.** A prefill takes 80 ms. Requests arrive at random, 30 a second, spread at
# random over the prefill instances. The *mean* TTFT (wait plus prefill) must stay within
# 200 ms. How many instances are needed at least?

# %% tags=["hide-input"]
### BEGIN SOLUTION
service, budget = 0.080, 0.200 - 0.080          # seconds; the wait the target leaves
# M/D/1: the mean wait rho s / (2 (1 - rho)) stays within the budget while
rho_max = 2 * budget / (2 * budget + service)    # = 0.75
by_hand = math.ceil(30 * service / rho_max)      # the load, each under rho_max
answer = math.ceil(30 * service / md1_max_utilization(service, budget))
print(f"at most {rho_max:.0%} busy each: {by_hand} instances by hand, "
      f"{answer} from servelib")
### END SOLUTION
check("dis-5", answer)

# %% [markdown]
# **dis-6.** Llama-3-70B (bf16) on H100 SXMs serves 32 requests a second of 2,048-token
# prompts and 256-token answers, TTFT p90 within 300 ms and at most 15 ms a token, as
# separate pools sized with `servelib.disagg.size_disaggregated`: prefill at TP=8, decode
# at TP=4, over a 50 GB/s link with 100 µs latency. The GPUs are paid every hour; what do
# they cost per million tokens (prompt and output) at \$2.50 per GPU-hour?

# %% tags=["hide-input"]
### BEGIN SOLUTION
load = Workload(32, 2048, 256)
pools = size_disaggregated(llama70, h100, load, SLO(0.3, 0.015), prefill_tp=8,
                           decode_tp=4, link_Bps=50e9, link_latency_s=100e-6)
tokens_an_hour = 32 * (2048 + 256) * 3600             # prompt and output tokens
by_hand = pools.n_gpus * 2.50 / tokens_an_hour * 1e6
answer = usd_per_million_tokens(pools.n_gpus, load, 2.50)
print(f"{pools.prefill.n_gpus} + {pools.decode.n_gpus} GPUs: ${by_hand:.4f} per 1M "
      f"tokens by hand, ${answer:.4f} from servelib")
### END SOLUTION
check("dis-6", answer)

# %% [markdown]
# **dis-7.** Separate pools: two prefill instances each take one prompt at a time, 40 ms a
# prompt; one decode instance has two slots and 12 ms steps; moving a prompt's KV between
# them takes 4 ms. Four requests arrive at t = 0, each answering 10 tokens (the first from
# the prefill), and are dealt to the prefill instances in turn. When does the last one
# finish (ms)? Work out the timeline, then check it with `simulate_disaggregated`.

# %% tags=["hide-input"]
### BEGIN SOLUTION
# Requests 1 and 2 are prefilled by 40 ms and reach the decode instance at 44 ms; they
# take both slots and decode their other 9 tokens: done at 44 + 9 x 12 = 152 ms.
# Requests 3 and 4 are prefilled by 80 ms and arrive at 84 ms, while both slots are
# taken: they wait until 152 ms, then decode 9 tokens each.
answer = 152 + 9 * 12
four = [Request(0, 100, 10) for _ in range(4)]
run = simulate_disaggregated(four, prefill=PoolSpec(2, 0.040, 1),
                             decode=PoolSpec(1, 0.012, 2), transfer_s=0.004)
assert abs(run.latency_s.max() * 1e3 - answer) < 1e-6
print(f"the last request finishes at {answer} ms")
### END SOLUTION
check("dis-7", answer)
