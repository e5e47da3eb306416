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
# # A serving engine you can read: the scheduling claims, measured
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-serving-book/serving-capacity-economics/blob/v0.1.0/notebooks/06_engine.ipynb)
#
# The previous chapter's numbers came from a simulator. This one runs a real engine:
# `servelib.engine`, a few hundred lines of PyTorch that serve requests with a small
# random-weight decoder, a paged KV cache (one preallocated tensor of blocks, a block table
# per sequence) and *the same scheduler code* the simulator uses. The simulator charges each
# step a modelled duration; the engine runs the forward pass and reads the clock. So every
# scheduling claim of the last chapter can be measured here, on your machine, and the
# simulator can be held to the engine: where the two disagree, the step-time model is wrong,
# not the scheduling.
#
# **You will be able to**
# 1. say what one engine step does, and check that a paged cache gives the same logits as a contiguous one;
# 2. write a step's duration as a sum of physical costs, fit it to this machine, and predict runs with it;
# 3. measure continuous against static batching, prompt-length admission, paged against contiguous reservation, prefix sharing, preemption and chunked prefill;
# 4. sweep the arrival rate, find the knee, explain it, and check Little's law on a measured run;
# 5. read {term}`TTFT`, {term}`TPOT`, {term}`ITL`, percentiles and {term}`goodput <Goodput>` the way serving benchmarks report them.

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
import numpy as np
import torch

from servelib import plots
from servelib.book import glue, table
from servelib.engine import (Engine, calibrate, capacity_rps, compare, predict,
                             step_overhead)
from servelib.engine import workloads as ew
from servelib.grading import check
from servelib.sim import (STEP_TERMS, Request, StepTimeModel, fit_step_time, simulate,
                          workloads)

plots.apply_style()

# %% [markdown]
# The engine runs on one CPU thread. This chapter compares step times, and on a machine
# shared with other work a second thread waits at every synchronisation for a core that
# someone else holds, which makes step times jump. On a GPU the setting does not matter.

# %%
if DEVICE.kind == "cpu":
    torch.set_num_threads(1)
engine = Engine("small", device=DEVICE)
print(engine)

# %% [markdown]
# ## One step of a real engine
#
# `Engine.run` drives `servelib.sim.Scheduler`, the class that `simulate` drives, through a
# loop of steps. In each step:
#
# 1. the **scheduler decides**: arrivals join the queue (or are rejected if they can never
#    fit), running sequences reserve their growth (preempting the newest, or, without
#    preemption, losing the whole batch to an out-of-memory), waiting requests are admitted
#    into free slots, and prompts are cut into chunks within the step's token budget;
# 2. the engine is told of each admission and release, and **takes or frees blocks** of its
#    pool; every decoding sequence whose last block is full takes one more;
# 3. **one forward pass** runs every row: one token per decoding sequence, and each prefill
#    chunk. All rows share the matrix products (the weights are read once per step: that is
#    why batching pays); attention reads each sequence's keys and values through its block
#    table;
# 4. the next token of each decoding sequence and of each finished prefill is the **argmax**
#    of its logits;
# 5. the scheduler is told **how long the step took**, by the clock, and retires what finished.
#
# After every step the engine checks that its pool holds exactly the blocks the scheduler's
# accounting says it should. The pool is one tensor,
# `(layers, K/V, blocks, block_size, KV heads, head_dim)`, allocated once; a block holding a
# shared prompt prefix counts its users and returns to the pool when the last one leaves.
#
# Paging must not change the arithmetic. Below, 34 requests run through a small engine in
# fp32 with every feature on at once (chunked prefill, a pool so small that sequences are
# preempted and recomputed, four requests sharing a prompt prefix), and every generated
# token's logits are compared with those of the plain decoder of the measurement chapters,
# which runs one sequence at a time over a contiguous cache and is fed the same tokens.

# %%
# NBVAL_CHECK_OUTPUT
check_engine = Engine("tiny", device=DEVICE, dtype="fp32")
rng = np.random.default_rng(0)
probe = workloads.make_requests(
    workloads.poisson_arrivals(30, 300.0, seed=0), rng.integers(8, 70, 30),
    workloads.output_lengths(30, 16, 1.0, seed=1, max_len=48), 48)
probe += [Request(0.01, 50, 10, prefix_id="system", prefix_len=35) for _ in range(4)]
run = check_engine.run(probe, max_batch=8, kv_capacity_tokens=320, block_size=8,
                       admission="prompt", preemption="recompute",
                       max_batched_tokens=24, offline=True, record_logits=True)
model = check_engine.model
worst, n_tokens = 0.0, 0
for i, q in enumerate(probe):
    prompt, gen = check_engine.prompt_tokens(i, q), run.tokens[i]
    cache = model.new_cache(1, len(prompt) + len(gen))     # contiguous, one sequence
    ref = [model.forward(torch.tensor([prompt], device=DEVICE.kind), cache, 0)[0]]
    for k in range(1, len(gen)):
        token = torch.tensor([[gen[k - 1]]], device=DEVICE.kind)
        ref.append(model.forward(token, cache, len(prompt) + k - 1)[0])
    for got, want in zip(run.logits[i], ref):
        worst = max(worst, float((got - want.float().cpu()).abs().max()))
        n_tokens += 1
res = run.result
print(f"{n_tokens} tokens, {res.n_preempted} preemptions, "
      f"{res.recomputed_tokens} tokens recomputed")
print(f"largest logit difference from the contiguous decoder below 1e-4: "
      f"{worst < 1e-4}")
assert worst < 1e-4 and res.n_preempted > 0

# %% [markdown]
# ## A step's duration, derived and fitted
#
# The simulator needs one thing from the engine: how long a step of a given shape takes. The
# costs add up, each for a physical reason:
#
# $$
# t_\text{step} = t_0 + c_\text{tok} T + c_\text{logit} R + c_\text{key} B L_\text{max}
#   + c_\text{chunk} N_\text{chunks} + c_\text{pair} P
# $$
#
# * $t_0$, every step: launching each layer's operations one after another (on a small model,
#   dispatch overhead, not arithmetic, sets the floor), reading the weights, scheduling;
# * $T$ tokens through the matrix products, one row each (decode tokens and prompt tokens
#   alike); a small batch uses the matrix units less well, which the fixed cost absorbs;
# * $R$ rows that need next-token logits (the LM head and sampling), one per decoding
#   sequence and one per finished prefill;
# * $B L_\text{max}$ keys read by decode attention: this engine's attention pads every row
#   to the longest context in the step, so the cost grows with the *longest* context
#   (production kernels such as vLLM's read each sequence's own blocks, costing the sum);
# * per prefill chunk, its own attention call, and the query-key pairs $P$ it computes: a
#   prompt's first chunk of $n$ tokens runs the causal kernel, which skips the masked half
#   ($n^2/2$ pairs); a later chunk starting at position $s$ is masked explicitly and computes
#   the whole rectangle, $n (s + n)$ pairs.
#
# Every coefficient is fitted, none assumed: the engine's warm-up runs three small
# workloads chosen so that the batch, the contexts and the chunks vary widely, and the
# model is fitted to every step (each weighed by the inverse of its duration, coefficients
# kept non-negative). Every step counts, not a median per shape, because a run's makespan is
# a *sum* of steps: on a machine that other work slows now and then, the model must carry
# the mean. The fit, like every timing in this chapter, is this machine's and this run's: a
# second run, or a busier machine, gives other figures.

# %%
CHAT = dict(n=60, mean_output=32)    # each chat replay below: 60 requests
reqs_uneven, kw_uneven = ew.uneven(0, mean_output=32)
probe_chat, kw_chat = ew.chat(1.0, 0, **CHAT)
max_ctx = max(r.final_len for r in reqs_uneven + probe_chat)
cal = calibrate(engine, max_batch=kw_uneven["max_batch"], max_context=max_ctx,
                max_chunk=512)
step_model = cal.model
print(engine)
print(f"warm-up: {len(cal.steps)} steps in {cal.wall_s:.1f} s")
print(f"fitted step times: median error {cal.median_abs_error:.0%} per step, "
      f"{cal.total_error:+.1%} in total")
rows = [(name, value * 1e6) for name, value in zip(STEP_TERMS, step_model.coefficients)]
print(table(rows, ["term of the model", "fitted (µs)"], ["", ".3f"]))

# %%
fig, ax = plots.new_axes("measured step time (ms)", "fitted step time (ms)",
                         "the step-time model against the warm-up's steps", logy=True)
ax.set_xscale("log")
ax.scatter(cal.seconds * 1e3, cal.fitted * 1e3, s=6, alpha=0.6)
lims = [cal.seconds.min() * 1e3, cal.seconds.max() * 1e3]
ax.plot(lims, lims, color="grey", lw=0.8, ls="--", label="fitted = measured")
plots.legend(fig)

# %% [markdown]
# *Figure: each warm-up step's measured duration against the model's. The long steps are
# prefills, the short ones decodes. Points above the line at the bottom left are decode
# steps that ran faster than average; points far to the right of the line are steps that
# other work on the machine delayed: the model keeps their mean, not their spikes.*
#
# How much does the engine's bookkeeping cost? The measurement chapters time the same
# decoder bare: one forward pass over a contiguous cache. The engine's step is a whole
# iteration: scheduling, block tables, the paged forward pass, sampling.

# %%
overhead = {b: step_overhead(engine, b, 128, rounds=3) for b in (1, 32)}
rows = [(b, o.context_len, o.bare_s * 1e3, o.engine_s * 1e3, o.ratio)
        for b, o in overhead.items()]
print(table(rows, ["batch", "context", "bare decoder (ms)", "engine step (ms)",
                   "engine / bare"], ["d", "d", ".2f", ".2f", ".2f"]))
print("medians of back-to-back rounds (the ratio: the median of each round's ratio)")
glue("live_overhead_b1", f"{overhead[1].ratio:.2f}x")
glue("live_overhead_b32", f"{overhead[32].ratio:.2f}x")

# %% [markdown]
# Here an engine step at batch 1 took {glue:text}`live_overhead_b1` the bare forward pass
# and at batch 32 {glue:text}`live_overhead_b32`. The engine pays a little per step
# (scheduling, building the batch's index tensors, checking its blocks) and a little per
# row: attention first gathers each sequence's keys and values from its blocks, where the
# contiguous decoder reads them in place. A production kernel reads the blocks where they
# lie; this one trades that for being a few lines of PyTorch.
#
# ## Continuous against static batching, measured
#
# The previous chapter simulated the uneven-outputs backlog and found continuous batching
# {glue:text}`ch5_wall` sooner in wall-clock and {glue:text}`ch5_lat` lower in mean latency.
# Here is the same backlog shape, scaled so that a CPU runs it in seconds: 184 requests
# queued at once, 40 slots, 64-token prompts, exponential outputs with a mean of 32 tokens
# (`ew.uneven`). The engine runs it under both policies; the simulator predicts both twice,
# once with a constant step time (as in the previous chapter) and once with the step-time
# model just fitted.

# %%
POLICIES = ("static", "continuous")


def ratios(runs):
    """Static over continuous: wall-clock and mean latency."""
    s, c = runs["static"], runs["continuous"]
    return s.makespan_s / c.makespan_s, s.mean_latency_s / c.mean_latency_s


uneven_at_0 = [Request(0.0, r.prompt_len, r.output_len, r.max_output_len)
               for r in reqs_uneven]
const = {pol: simulate(uneven_at_0, policy=pol, max_batch=kw_uneven["max_batch"],
                       step_time_s=0.025) for pol in POLICIES}
ch5 = workloads.uneven_outputs(seed=0)       # the previous chapter's backlog, simulated
ch5_wall, ch5_lat = ratios({pol: simulate(policy=pol, **ch5) for pol in POLICIES})
w_const, lat_const = ratios(const)

# %% tags=["remove-cell"]
glue("ch5_wall", f"{ch5_wall:.1f}x")
glue("ch5_lat", f"{ch5_lat:.1f}x")
glue("cont_wall_const", f"{w_const:.1f}x")
glue("cont_lat_const", f"{lat_const:.1f}x")

# %%
measured_runs = {pol: engine.run(reqs_uneven, policy=pol, **kw_uneven)
                 for pol in POLICIES}
measured_res = {pol: run.result for pol, run in measured_runs.items()}
fitted = {pol: predict(reqs_uneven, step_model, policy=pol, **kw_uneven)
          for pol in POLICIES}
rows = [(name, *ratios(runs)) for name, runs in (
    ("simulated, constant step time", const),
    ("simulated, fitted step times", fitted),
    ("measured on the engine", measured_res))]
print(table(rows, ["static / continuous", "wall-clock", "mean latency"],
            ["", ".2f", ".2f"]))
rows = [(pol, r.makespan_s, r.mean_latency_s, r.n_steps, r.throughput_tokens_per_s)
        for pol, r in measured_res.items()]
print(table(rows, ["measured", "makespan (s)", "mean latency (s)", "steps", "tokens/s"],
            ["", ".2f", ".2f", "d", ",.0f"]))
w_meas, lat_meas = ratios(measured_res)
w_fit, lat_fit = ratios(fitted)
assert w_meas > 1.5 and lat_meas > 1.5
glue("live_cont_wall_meas", f"{w_meas:.1f}x")
glue("live_cont_lat_meas", f"{lat_meas:.1f}x")
glue("live_cont_wall_fit", f"{w_fit:.1f}x")
glue("live_cont_lat_fit", f"{lat_fit:.1f}x")

# %% [markdown]
# Measured, continuous batching finished the backlog {glue:text}`live_cont_wall_meas`
# sooner and cut the mean latency {glue:text}`live_cont_lat_meas`. The simulator says
# {glue:text}`cont_wall_const` and {glue:text}`cont_lat_const` for these requests with a
# constant step time, and {glue:text}`live_cont_wall_fit` and
# {glue:text}`live_cont_lat_fit` with the step times fitted to this machine. The direction
# is the same everywhere. The size depends on what a step costs, and the fitted model says
# why. A real step costs more the more tokens it carries, and all 184 prompts must be
# prefilled under either policy: that work is the same in both runs, a floor under both
# makespans that continuous batching cannot shorten. A constant step time charges a
# prefill nothing, so it overstates the gain wherever prompt tokens are expensive next to a
# decode step: on a CPU, whose steps cost nearly in proportion to their tokens, and with
# prompts as long as these (64 tokens for answers of 32 on average; the previous chapter's
# answers averaged 256). On a GPU, where a few hundred more tokens hardly lengthen a step,
# the measured gain comes closer to the constant-step figure. Where the time goes differs
# too: a static batch pays for its prompts in one large step and then runs pure decode
# steps, padding rows included, while continuous batching spreads the prompts over the run,
# making each of its steps longer.
#
# The scheduler's decisions for an offline run do not depend on how long steps take, so the
# engine and the simulator take *exactly* the same steps; only their durations differ:

# %%
# NBVAL_CHECK_OUTPUT
rows = []
for pol in POLICIES:
    e, s = measured_res[pol].trace, fitted[pol].trace
    same = np.array_equal(e.batch, s.batch) and np.array_equal(e.tokens, s.tokens)
    rows.append((pol, len(e.batch), len(s.batch), same))
    assert same
print(table(rows, ["", "steps, engine", "simulated", "same batches and tokens"],
            ["", "d", "d", ""]))

# %% [markdown]
# ## Admission on the prompt: the real pool overflows
#
# **Beginner mistake: admitting on prompt length.** Four requests with 100-token prompts and
# 50-token answers, a pool of 35 blocks of 16 tokens (560 tokens). Admitted on their prompts,
# all four start; each step they grow, until a step needs blocks that the pool does not have.
# The engine asks its pool, and the pool refuses: every sequence in flight is lost.

# %%
# NBVAL_CHECK_OUTPUT
four = [Request(0, 100, 50) for _ in range(4)]
pool = dict(max_batch=4, kv_capacity_tokens=560, block_size=16)
wrong = engine.run(four, admission="prompt", **pool)      # admit on the prompt
right = engine.run(four, admission="final", **pool)       # reserve prompt + max output
w, r = wrong.result, right.result
print(f"wrong (prompt): {w.n_completed} completed, {w.n_oom_killed} killed, "
      f"{w.oom_tokens_lost} generated tokens lost")
print(f"  the pool said: {wrong.oom_errors[0]}")
print(f"right (final):  {r.n_completed} completed, "
      f"at most {r.trace.batch.max()} at once")
assert (w.n_oom_killed, r.n_completed) == (4, 4)

# %% [markdown]
# The simulator, with the same pool, kills the same batch at the same step and loses the
# same tokens: the accounting that decides admission is the accounting of the real pool.
#
# ## Paged against contiguous: the memory actually reserved
#
# A contiguous cache must reserve each request's final length (prompt plus the most tokens
# it may generate) when it is admitted; a paged one takes a block when the sequence needs
# it. The engine can do both with the same pool: `reserve_max=True` takes the blocks of the
# final length at admission, as a contiguous slab would, and holds them until the request
# leaves. Forty-eight chat requests queued at once (prompts of 32 to 255 tokens, answers
# averaging 48 tokens, every client allowing up to 1,024) on a pool of 8,192 tokens:

# %%
chat_reqs, _ = ew.chat(1.0, 3, n=48)
offline_chat = [Request(0.0, q.prompt_len, q.output_len, 1024) for q in chat_reqs]
mem_kw = dict(max_batch=32, kv_capacity_tokens=8192, block_size=16)
memory_runs = {
    "contiguous (reserve the final length)":
        engine.run(offline_chat, reserve_max=True, **mem_kw),
    "paged, final admission": engine.run(offline_chat, **mem_kw),
    "paged, over-commit + recompute":
        engine.run(offline_chat, admission="prompt", preemption="recompute", **mem_kw),
}

# %%
# NBVAL_CHECK_OUTPUT
mem_stats = {}
for name, run in memory_runs.items():
    tr = run.result.trace
    # Averages per step, not over time: the step counts do not depend on the clock.
    stored = float(np.mean(tr.kv_used_tokens / tr.kv_allocated_tokens))
    peak_blocks = int(tr.kv_allocated_tokens.max() // 16)
    mem_stats[name] = (peak_blocks, float(np.mean(tr.batch)), stored,
                       run.result.n_preempted)
print(table([(name, *s) for name, s in mem_stats.items()],
            ["", "peak blocks", "mean batch", "stored/held", "preempted"],
            ["", "d", ".1f", ".0%", "d"]))
contig, paged, over = mem_stats.values()
assert contig[2] < 0.5 < paged[2] and over[1] > contig[1]

# %% tags=["remove-cell"]
glue("mem_contig_stored", f"{contig[2]:.0%}")
glue("mem_paged_stored", f"{paged[2]:.0%}")
glue("mem_batch_gain", f"{over[1] / contig[1]:.1f}x")

# %%
fig, ax = plots.new_axes("time (s)", "KV blocks (16 tokens each)",
                         "blocks held and tokens stored, 512-block pool")
for (name, run), c in zip(memory_runs.items(), ("C0", "C1", "C2")):
    tr = run.result.trace
    ax.plot(tr.end_s, tr.kv_allocated_tokens / 16, color=c, lw=1, label=f"{name}: held")
    ax.plot(tr.end_s, tr.kv_used_tokens / 16, color=c, lw=1, ls=":")
# The pool's size as the edge of a shaded band: a line would hide the reservations.
ax.axhspan(512, 560, color="red", alpha=0.12, lw=0, label="beyond the 512-block pool")
ax.set_ylim(0, 560)
plots.legend(fig)

# %% [markdown]
# *Figure: blocks held (solid) and blocks' worth of tokens actually stored (dotted) through
# each run. Reserving the final length fills the pool with reservations while the tokens
# stored stay far below; paging holds what it stores.*
#
# Reserving the final length, only {glue:text}`mem_contig_stored` of the blocks held store a
# token on average; paged, {glue:text}`mem_paged_stored`. With final admission the paged
# cache still *promises* the final length, so its batch does not grow; over-committing
# (admitting on what is held now, preempting when that bet loses) runs
# {glue:text}`mem_batch_gain` as many sequences at once as the contiguous reservation.
#
# ### Prefix sharing
#
# Sixteen requests start with the same 256-token system prompt. Shared, its 16 full blocks
# are stored once and counted by each user; private, each request holds its own copy.

# %%
# NBVAL_CHECK_OUTPUT
own = np.random.default_rng(5).integers(16, 64, 16)
shared_reqs = [Request(0.0, 256 + int(n), 24, prefix_id="system", prefix_len=256)
               for n in own]
private_reqs = [Request(0.0, 256 + int(n), 24) for n in own]
share_kw = dict(max_batch=16, kv_capacity_tokens=16 * 512, block_size=16)
peak, rows = {}, []
for name, reqs in (("private copies", private_reqs), ("shared prefix", shared_reqs)):
    r = engine.run(reqs, **share_kw).result
    sim = simulate(reqs, step_time_s=1.0, **share_kw)
    peak[name] = r.kv_peak_tokens // 16
    rows.append((name, peak[name], sim.kv_peak_tokens // 16))
    assert r.kv_peak_tokens == sim.kv_peak_tokens
saved = peak["private copies"] - peak["shared prefix"]
print(table(rows, ["", "peak blocks, engine", "simulator"], ["", "d", "d"]))
print(f"sharing saves {saved} blocks = 15 copies of the 16-block prefix")
assert saved == 15 * 16

# %% [markdown]
# ## Preemption under pressure
#
# Over-commit is a bet that not every sequence reaches its cap at once. Shrink the pool and
# the bet loses more often: the newest sequence is evicted, its blocks freed, and later its
# prompt *and* the tokens it had generated are prefilled again (recompute). That is the only
# preemption of vLLM's V1 engine, and the only one this engine implements; copying blocks to
# host memory and back (swap) was an option of vLLM's V0 engine. The counts of preemptions
# and recomputed tokens do not depend on timing; the makespans do.

# %%
pressure, rows = {}, []
for cap in (8192, 4096, 2048):
    kw = dict(max_batch=32, kv_capacity_tokens=cap, block_size=16, admission="prompt",
              preemption="recompute")
    if cap == 8192:                  # the over-commit run above
        r = memory_runs["paged, over-commit + recompute"].result
    else:
        r = engine.run(offline_chat, **kw).result
    p = predict(offline_chat, step_model, **kw)
    pressure[cap] = (r.n_preempted, r.recomputed_tokens)
    rows.append((cap, r.n_preempted, r.recomputed_tokens, r.makespan_s, p.makespan_s))
    assert r.n_completed == len(offline_chat) and r.n_oom_killed == 0
    assert r.n_preempted == p.n_preempted            # the simulator's decisions, too
print(table(rows, ["pool (tokens)", "preempted", "recomputed", "makespan (s)",
                   "predicted (s)"], [",d", "d", ",d", ".2f", ".2f"]))
assert pressure[2048][0] > pressure[8192][0]

# %% tags=["remove-cell"]
glue("pre_small", f"{pressure[2048][0]}")
glue("pre_recomputed", f"{pressure[2048][1]:,}")

# %% [markdown]
# With the smallest pool the engine preempted {glue:text}`pre_small` times and recomputed
# {glue:text}`pre_recomputed` tokens, and still completed every request: a preemption costs
# time, never the batch.
#
# ## Chunked prefill: inter-token latency when a long prompt arrives
#
# Chat traffic (48 requests arriving at 60 per second) is decoding when two 2,048-token
# prompts arrive, at 0.4 s and at 0.8 s. Unchunked, each long prefill runs in one step, and
# every running sequence waits that step out between two of its tokens. With
# `max_batched_tokens=128`, decode tokens go first and the prompt is cut into chunks that
# fill the rest of each step.

# %%
steady, _ = ew.chat(60.0, 7, n=48)
longs = [Request(0.4, 2048, 8), Request(0.8, 2048, 8)]
itl_runs, itl_pred, rows = {}, {}, []
for chunk in (None, 128):
    kw = dict(max_batch=32, kv_capacity_tokens=32 * 2304, block_size=16,
              max_batched_tokens=chunk)
    r = itl_runs[chunk] = engine.run(steady + longs, **kw).result
    itl_pred[chunk] = predict(steady + longs, step_model, **kw)
    rows.append((str(chunk), r.itl_percentile_s(50) * 1e3, r.itl_percentile_s(99) * 1e3,
                 r.trace.step_s.max() * 1e3, np.mean(r.ttft_s[-2:]) * 1e3,
                 itl_pred[chunk].itl_percentile_s(99) * 1e3))
print("all in ms; 'long TTFT': the mean of the two long prompts'")
print(table(rows, ["max_batched_tokens", "ITL p50", "ITL p99", "worst", "long TTFT",
                   "ITL p99 predicted"], ["", ".1f", ".1f", ".0f", ".0f", ".1f"]))
for chunk, key in ((None, "none"), (128, "chunk")):
    glue(f"live_itl_p99_{key}", f"{itl_runs[chunk].itl_percentile_s(99) * 1e3:.0f} ms")
    glue(f"live_itl_worst_{key}", f"{itl_runs[chunk].trace.step_s.max() * 1e3:.0f} ms")

# %%
fig, ax = plots.new_axes("time (s)", "step time = gap between tokens (ms)",
                         "a long prompt arrives, measured")
for chunk in (None, 128):
    r = itl_runs[chunk]
    ax.plot(r.trace.end_s, r.trace.step_s * 1e3, lw=0.8,
            label=f"max_batched_tokens={chunk}")
ax.set_yscale("log")
plots.legend(fig)

# %% [markdown]
# *Figure: each measured step's duration, which every decoding sequence feels as the gap
# between two of its tokens. Unchunked, each long prompt is one spike of
# {glue:text}`live_itl_worst_none`; chunked, the worst step is
# {glue:text}`live_itl_worst_chunk`.*
#
# Does chunking cost throughput? It adds steps, and every step pays the fixed cost, but it
# also lets decodes run beside prefills. Offline, eight 768-token prompts with 32-token
# answers, with and without chunks of 256 tokens, measured and predicted:

# %%
long_batch = [Request(0.0, 768, 32) for _ in range(8)]
tp = {}
for chunk in (None, 256):
    kw = dict(max_batch=8, kv_capacity_tokens=8 * 1024, block_size=16,
              max_batched_tokens=chunk)
    tp[chunk] = (engine.run(long_batch, **kw).result.throughput_tokens_per_s,
                 predict(long_batch, step_model, **kw).throughput_tokens_per_s)
change = [tp[256][k] / tp[None][k] - 1 for k in (0, 1)]
rows = [(name, tp[None][k], tp[256][k], change[k])
        for k, name in enumerate(("measured", "predicted"))]
print(table(rows, ["tokens/s", "unchunked", "chunked", "change"],
            ["", ",.0f", ",.0f", "+.1%"]))
glue("live_chunk_tp_meas", f"{change[0]:+.0%}")
glue("live_chunk_tp_pred", f"{change[1]:+.0%}")

# %% [markdown]
# Chunking changed offline throughput by {glue:text}`live_chunk_tp_meas` measured and
# {glue:text}`live_chunk_tp_pred` predicted. The model names the costs: each extra step pays
# the fixed cost again, and a chunk that starts deep in its prompt computes the whole
# rectangle of its queries against every earlier key, where a prompt prefilled at once runs
# the causal kernel over half of it. Against that, decodes ride along in the chunked steps.
#
# ## A load sweep: where the knee is, and why
#
# Chat traffic (60 requests, prompts of 32 to 255 tokens, answers of 32 tokens on average)
# replayed open-loop (each request joins when the engine's clock passes its arrival time;
# idle gaps are skipped, since nothing runs in them) at fractions of the replica's capacity. The capacity is what the replica completes when saturated: the
# simulator's requests per second for the same requests all queued at once, with the fitted
# step times. Objectives, set from this machine's own speed so that the cell means the same
# on a laptop and on a GPU: TTFT within 10 times a 256-token prefill, TPOT within 3 times a
# batch-1 decode step.

# %%
cap_rps = capacity_rps(probe_chat, step_model, **kw_chat)
slo = dict(ttft_slo_s=10 * step_model.of_shape(chunks=[(0, 256)]),
           tpot_slo_s=3 * step_model.of_shape(decode=1, max_context=256))
print(f"capacity {cap_rps:.1f} requests/s; "
      f"SLOs: TTFT {slo['ttft_slo_s'] * 1e3:.0f} ms, "
      f"TPOT {slo['tpot_slo_s'] * 1e3:.1f} ms")
loads = (0.5, 0.7, 0.9, 1.2)
sweep, rows = {}, []
for load in loads:
    reqs, kw = ew.chat(load * cap_rps, 0, **CHAT)
    run = engine.run(reqs, **kw)
    r = run.result
    sweep[load] = (reqs, kw, r, predict(reqs, step_model, **kw), run.steps)
    rows.append((f"{load:.0%}", load * cap_rps, r.percentile("ttft_s", 99) * 1e3,
                 r.percentile("tpot_s", 99) * 1e3, r.goodput_rps(**slo),
                 r.throughput_tokens_per_s,
                 np.average(r.trace.batch, weights=r.trace.step_s)))
print(table(rows, ["load", "rate/s", "TTFT p99 (ms)", "TPOT p99 (ms)", "goodput/s",
                   "tokens/s", "mean batch"],
            ["", ".1f", ".0f", ".1f", ".1f", ",.0f", ".1f"]))

# %%
rates = [load * cap_rps for load in loads]
fig, ax = plots.new_axes("arrival rate (requests/s)", "p99 (ms)",
                         "measured load sweep: latency", logy=True)
# the simulation as a wide pale band underneath: a measurement on top of it shows
ax.plot(rates, [sweep[x][3].percentile("ttft_s", 99) * 1e3 for x in loads], lw=8,
        alpha=0.3, color="C0", label="TTFT p99, simulated")
for metric, name in (("ttft_s", "TTFT p99"), ("tpot_s", "TPOT p99")):
    p99_ms = [sweep[x][2].percentile(metric, 99) * 1e3 for x in loads]
    ax.plot(rates, p99_ms, marker="o", label=name)
ax.axvline(cap_rps, color="grey", lw=0.8, ls="--", label="capacity")
plots.legend(fig)

# %%
fig, ax = plots.new_axes("arrival rate (requests/s)", "requests/s within both SLOs",
                         "measured load sweep: goodput")
ax.plot(rates, [sweep[x][3].goodput_rps(**slo) for x in loads], lw=8, alpha=0.3,
        color="C0", label="goodput, simulated")
ax.plot(rates, [sweep[x][2].goodput_rps(**slo) for x in loads], marker="o",
        color="C0", label="goodput, measured")
ax.plot(rates, rates, color="grey", lw=0.8, ls="--", label="arrival rate")
plots.legend(fig)

# %% [markdown]
# *Figures: p99 TTFT and TPOT against the arrival rate, then goodput, measured (points)
# and simulated with the fitted step times (the wide pale band). TPOT rises with the load
# all along; TTFT stays near a prefill's worth until the rate nears capacity, then climbs;
# goodput follows the arrival rate, then falls away from it.*
#
# Below capacity a request rarely finds the batch full: it waits less than a step, and its
# TTFT is its own prefill. Each step carries more rows as the load grows, so each step, and
# with it every sequence's TPOT, gets longer: that is the price of the throughput. As the
# arrival rate $\lambda$ nears the service rate $\mu$, requests arrive faster than slots free
# up more and more often and a queue forms; in the simplest queueing model its length grows
# like $\rho / (1 - \rho)$ with the load $\rho = \lambda / \mu$, so the last tenth of
# capacity costs more waiting than all the rest. Past capacity the queue grows for as long
# as the overload lasts. Goodput follows the arrival rate while both objectives hold, then
# falls as one objective after the other breaks: the knee is where a capacity plan must stop.
#
# **Little's law** ties the three numbers together: the mean number of requests in the
# system $L$ equals the arrival rate $\lambda$ times the mean time each spends there $W$. On
# the measured 90% run, $L$ is taken from the engine's trace (requests queued or in the batch
# at each step, weighed by the step's duration) and $\lambda W$ from the requests' own
# timestamps: two independent measurements.

# %%
r90 = sweep[0.9][2]
lam = r90.n_completed / r90.makespan_s
L_trace, lam_w = r90.mean_in_system(), lam * r90.mean_latency_s
print(f"lambda = {lam:.2f} requests/s, W = {r90.mean_latency_s:.3f} s: "
      f"lambda x W = {lam_w:.2f}")
print(f"L from the trace = {L_trace:.2f} requests ({L_trace / lam_w - 1:+.1%})")
assert abs(L_trace / lam_w - 1) < 0.1
glue("live_little_L", f"{L_trace:.2f}")
glue("live_little_lw", f"{lam_w:.2f}")

# %% [markdown]
# The trace says {glue:text}`live_little_L` requests on average, the timestamps
# {glue:text}`live_little_lw`. They differ only by the moments the trace cannot see: a
# request that arrives during a step is counted from the next step's start.
#
# ## The simulator held to the engine
#
# The figures the previous chapter relied on, predicted by the simulator with the step-time
# model fitted at the start and measured on the engine, for the uneven backlog (both
# policies) and for chat traffic at 50% and 90% of capacity. The last column refits the
# model to each run's own steps: what is left there is the model's shape, with the
# machine's drift between the warm-up and the run taken out. Timings, so not checked.

# %%
held = {}
for pol in ("continuous", "static"):
    held[f"uneven, {pol}"] = (reqs_uneven, dict(kw_uneven, policy=pol),
                              measured_res[pol], measured_runs[pol].steps)
for load in (0.5, 0.9):
    reqs, kw, r, _, steps = sweep[load]
    held[f"chat at {load:.0%} load"] = (reqs, kw, r, steps)
rows, errors = [], []
for name, (reqs, kw, r, steps) in held.items():
    refit = fit_step_time(steps, r.trace.step_s)
    in_run = compare(r, predict(reqs, refit, **kw))
    fitted_first = compare(r, predict(reqs, step_model, **kw))
    for (k, m, p, e), (*_, e_in) in zip(fitted_first, in_run):
        errors.append(abs(e))
        rows.append((name, k.removesuffix("_s"), m, p, e, e_in))
print(engine)
print(table(rows, ["workload", "figure (s)", "measured", "predicted", "error",
                   "in-run fit"], ["", "", ".4f", ".4f", "+.1%", "+.1%"]))
print(f"largest error {max(errors):.0%}, median {np.median(errors):.0%}")
glue("live_held_max", f"{max(errors):.0%}")
glue("live_held_median", f"{np.median(errors):.0%}")

# %% [markdown]
# On this machine the largest error was {glue:text}`live_held_max` and the median
# {glue:text}`live_held_median`. Where the simulator misses, the step-time model is what is
# wrong, and each term of it names a cause: a fixed cost that is dispatch overhead on a
# small model; attention that grows with the longest context in the step; matrix products
# whose cost per token is not constant at small batch. Two more causes are not in any
# model: other work on the machine, which makes some steps slower than the warm-up's average
# (the tails, TTFT p99 above all, suffer first), and the machine's speed drifting between
# the warm-up and the run, which a quiet machine, or a model refitted to the run, removes.
# A third cause hid in the library, and this chapter's engine met it. On a CPU, PyTorch
# runs bf16 matrix products through oneDNN, which builds a kernel the first time it meets a
# shape (about half a millisecond each); a step's shapes follow its token count and its
# longest context, which change almost every step. Untreated, steps with shapes the
# warm-up had met were fast and the rest paid for new kernels, and the chat replays ran
# about half as fast as the model predicted. The engine now pads each step's rows and keys
# up to a few fixed sizes and builds every kernel in the warm-up. GPU engines do the same
# for the same reason: vLLM pads each decode step to one of a few batch sizes for which it
# captured a CUDA graph.
# Near capacity every error is magnified: at 90% load a stretch of steps a tenth slower than
# the model puts the replica at capacity for that stretch, a queue builds, and the waiting
# it causes is far more than a tenth. Predicting latency close to the knee needs a step
# time right to a few per cent, which is one more reason to plan below it.
#
# ## Mistakes, wrong against right
#
# **Beginner mistake: timing the first step.** The first forward pass of a fresh engine pays
# for allocations and kernel selection; a step time taken from it, or from any one
# unrepeated call on a machine that also runs other work, says little about a warm engine.
# Warm up, repeat, take the median:

# %%
fresh = Engine("small", device=DEVICE, seed=1)
reqs = [Request(0.0, 64, 4)] * 8
# wrong: one call, on a cold engine
cold = fresh.run(reqs, max_batch=8).result.trace.step_s[0]
# right: warm, repeated, the median
warm = np.median([fresh.run(reqs, max_batch=8).result.trace.step_s[0]
                  for _ in range(5)])
print("prefill step of 8 x 64 tokens:")
print(f"wrong (first call, cold) {cold * 1e3:7.2f} ms")
print(f"right (median of 5, warm) {warm * 1e3:6.2f} ms")

# %% [markdown]
# **Beginner mistake: sizing for throughput instead of goodput.** Tokens per second keep
# rising as the load passes capacity, because bigger batches use the hardware better; the
# users, though, wait longer and longer. A plan made on throughput picks the overloaded
# point; one made on goodput picks the load where most requests per second meet the
# objectives. The simulator, with this machine's fitted step times, sweeps the load more
# finely, and with longer runs (400 requests a point), than the engine could in a minute:

# %%
fine = {}
for load in np.arange(0.5, 1.45, 0.1):
    reqs, kw = ew.chat(load * cap_rps, 0, **dict(CHAT, n=400))
    fine[round(load, 1)] = predict(reqs, step_model, **kw)
by_tput = max(fine, key=lambda x: fine[x].throughput_tokens_per_s)   # wrong: tokens/s
by_goodput = max(fine, key=lambda x: fine[x].goodput_rps(**slo))     # right: goodput
plans = (("wrong: most tokens/s", by_tput), ("right: most goodput", by_goodput))
rows = [(name, f"{load:.0%}", fine[load].throughput_tokens_per_s,
         fine[load].goodput_rps(**slo), fine[load].percentile("ttft_s", 99) * 1e3,
         fine[load].percentile("tpot_s", 99) * 1e3) for name, load in plans]
print(table(rows, ["plan", "load", "tokens/s", "goodput/s", "TTFT p99 (ms)",
                   "TPOT p99 (ms)"], ["", "", ",.0f", ".1f", ".0f", ".1f"]))
assert by_tput > by_goodput

# %% [markdown]
# ## Summary: the numbers to carry
#
# | what | on this machine |
# |---|---|
# | paged vs contiguous logits | equal within 1e-4 (fp32), with chunks, preemption and shared prefixes |
# | engine step vs bare decoder, batch 1 / 32 (measured) | {glue:text}`live_overhead_b1` / {glue:text}`live_overhead_b32` |
# | continuous vs static, wall-clock / mean latency (measured) | {glue:text}`live_cont_wall_meas` / {glue:text}`live_cont_lat_meas` |
# | the same, simulated with a constant step / the previous chapter's backlog | {glue:text}`cont_wall_const` / {glue:text}`cont_lat_const`; {glue:text}`ch5_wall` / {glue:text}`ch5_lat` |
# | blocks storing tokens, contiguous reservation vs paged | {glue:text}`mem_contig_stored` vs {glue:text}`mem_paged_stored` |
# | ITL p99 with a 2,048-token prompt arriving, unchunked vs chunks of 128 (measured) | {glue:text}`live_itl_p99_none` vs {glue:text}`live_itl_p99_chunk` |
# | Little's law on the 90% run, L vs lambda W (measured) | {glue:text}`live_little_L` vs {glue:text}`live_little_lw` |
# | simulator vs engine, largest / median error (measured) | {glue:text}`live_held_max` / {glue:text}`live_held_median` |
#
# In short: the scheduler that the simulator runs is the one a real engine needs; a step's
# duration is a handful of physical costs that can be fitted in seconds; with them, the
# simulator predicts a real engine's latencies, and where it misses, the cause can be named.
#
# ## Exercises
#
# Each exercise states every constant it needs. Write your answer in the cell and run it:
# `check` says whether it is right. Solutions are behind the toggles.
#
# **eng-1.** A paged cache uses 16-token blocks. A sequence with a 100-token prompt has
# generated 30 tokens. How many blocks does it hold?

# %% tags=["hide-input"]
### BEGIN SOLUTION
tokens = 100 + 30                # the prompt and every generated token are cached
answer = -(-tokens // 16)        # whole blocks, rounded up: the last is partly filled
one = simulate([Request(0, 100, 30)], max_batch=1, block_size=16, admission="prompt",
               step_time_s=1.0)
print(f"{answer} blocks (the simulator's peak: {one.kv_peak_tokens // 16})")
### END SOLUTION
check("eng-1", answer)

# %% [markdown]
# **eng-2.** A replica receives 12 requests per second and each spends 2.5 s in it on
# average. How many requests are in the replica on average?

# %% tags=["hide-input"]
### BEGIN SOLUTION
rate, time_inside = 12, 2.5          # lambda (requests/s) and W (s)
answer = rate * time_inside          # Little's law: L = lambda x W
print(f"{answer:.0f} requests in the replica on average")
### END SOLUTION
check("eng-2", answer)

# %% [markdown]
# **eng-3.** A fitted step-time model charges 2 ms per step, 0.1 ms per token, 1 µs per
# key read by decode attention and 0.5 ms per prefill chunk (nothing else). A step holds 32
# decoding sequences, the longest at 500 tokens of context, and one 256-token prefill
# chunk. How long does it take (ms)?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# fixed + tokens (32 decode rows and the chunk's 256) + keys (every decode row padded to
# the longest context) + one chunk
answer = 2 + 0.1 * (32 + 256) + 1e-3 * 32 * 500 + 0.5
fitted_model = StepTimeModel(fixed_s=2e-3, per_token_s=1e-4, per_logit_row_s=0,
                             per_key_s=1e-6, per_chunk_s=5e-4, per_prefill_pair_s=0)
by_model = fitted_model.of_shape(decode=32, max_context=500, chunks=[(0, 256)]) * 1e3
print(f"{answer:.1f} ms (StepTimeModel: {by_model:.1f} ms)")
### END SOLUTION
check("eng-3", answer)

# %% [markdown]
# **eng-4.** Four requests (16-token prompts, outputs of 4, 1, 1 and 2 tokens) arrive at
# t = 0 on two slots with continuous batching, 50 ms per step. What is the goodput (requests
# per second of makespan) under a TTFT objective of 100 ms and a TPOT objective of 60 ms?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# Each step gives every running request a token (the prefill step gives the first).
# Step 1: r0, r1 (done); step 2: r0, r2 (done); step 3: r0, r3; step 4: r0 and r3 done.
# TTFT: r0 and r1 50 ms, r2 100 ms, r3 150 ms (over 100 ms); every TPOT is 50 ms.
makespan_s = 4 * 0.05
answer = 3 / makespan_s               # three requests met both objectives
four_reqs = simulate([Request(0, 16, o) for o in (4, 1, 1, 2)], max_batch=2,
                     step_time_s=0.05)
print(f"{answer:.1f} requests/s "
      f"(the simulator: {four_reqs.goodput_rps(ttft_slo_s=0.1, tpot_slo_s=0.06):.1f})")
### END SOLUTION
check("eng-4", answer)

# %% [markdown]
# **eng-5.** A replica runs 8 requests that share a 512-token system prompt; each adds 100
# tokens of its own and generates 50. Only full blocks of a prefix are shared. With
# 16-token blocks, how many blocks does sharing the prefix save when all 8 have finished
# generating?

# %% tags=["hide-input"]
### BEGIN SOLUTION
prefix_blocks = 512 // 16        # the prefix's full blocks: stored once, not 8 times
answer = (8 - 1) * prefix_blocks
kw = dict(max_batch=8, block_size=16, admission="prompt", step_time_s=1.0)
private = simulate([Request(0, 612, 50)] * 8, **kw).kv_peak_tokens
shared = simulate([Request(0, 612, 50, prefix_id="system", prefix_len=512)] * 8,
                  **kw).kv_peak_tokens
print(f"{answer} blocks (the simulator: {(private - shared) // 16})")
### END SOLUTION
check("eng-5", answer)

# %% [markdown]
# **eng-6.** A step costs 4 ms plus 0.08 ms per token. A 2,048-token prompt is prefilled in
# chunks of 256 tokens beside no other work. How long is the longest step (ms)?

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = 4 + 0.08 * 256               # every chunk is 256 tokens: one step's worth
chunked = StepTimeModel(4e-3, 8e-5, 0, 0, 0, 0)
by_model = chunked.of_shape(chunks=[(0, 256)]) * 1e3
unchunked = chunked.of_shape(chunks=[(0, 2048)]) * 1e3
print(f"{answer:.2f} ms (StepTimeModel: {by_model:.2f} ms; "
      f"unchunked, one step of {unchunked:.0f} ms)")
### END SOLUTION
check("eng-6", answer)
