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
# # Speculative decoding
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-serving-book/serving-capacity-economics/blob/v0.1.0/notebooks/09_speculative.ipynb)
#
# Decoding one sequence leaves almost all of a GPU's arithmetic idle: each step reads every
# weight to produce one token. {term}`Speculative decoding` spends some of that idle
# arithmetic on guesses. A small {term}`draft model <Draft model>` proposes several tokens,
# and the large model checks them all in one forward pass, keeping those it agrees with
# {cite}`leviathan2023speculative,chen2023speculative`. With the right acceptance rule the
# output is exactly what the large model alone would have produced. This chapter derives
# how many tokens a round yields, what a round costs on the roofline, why the trick pays
# at batch 1 and stops paying as the batch grows, and where it stops. Then it measures the
# same trade-off on your machine with two random-weight decoders.
#
# **You will be able to**
# 1. derive the tokens a speculative round yields, $(1 - \alpha^{k+1}) / (1 - \alpha)$, and check it by simulation;
# 2. cost a round (draft steps plus one verification pass) with the roofline, and predict the speed-up;
# 3. explain why it pays while decode is memory-bound and derive the batch at which it stops paying;
# 4. measure the speed-up and the crossover on this machine, beside the prediction;
# 5. read a published figure (gpt-fast's 70B-with-7B-draft) as an implied {term}`acceptance rate <Acceptance rate>`.

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

from servelib import plots
from servelib.audit import audit
from servelib.audit.examples import mistake_plans
from servelib.book import glue, table
from servelib.grading import check
from servelib.hardware import get_gpu, ridge_point
from servelib.measure import ToyDecoder, measure_ceilings, toy_spec
from servelib.measure.speculative import ceilings_spec, draft_spec, speculative_sweep
from servelib.models import get_model
from servelib.published import (GPT_FAST_SOURCE, GPT_FAST_SPECULATIVE_TOKENS_PER_S,
                                published_decode)
from servelib.roofline import critical_batch, decode_intensity_limit
from servelib.speculative import (crossover_batch, crossover_batch_estimate,
                                  expected_tokens_per_step, implied_acceptance_rate,
                                  simulate_tokens_per_step, speculative_concurrency,
                                  speculative_estimate)

plots.apply_style()
target, draft = get_model("llama-3-70b"), get_model("llama-3-8b")
h100 = get_gpu("h100-sxm")

# %% [markdown]
# ## A round and the tokens it yields
#
# A round has two parts. The draft model decodes $k$ tokens, one step each, as usual. Then
# the target runs one forward pass over those $k$ tokens for every sequence, the way
# prefill runs over a prompt, and so obtains its own next-token distribution at each of the
# $k + 1$ positions. It accepts the drafted tokens from the left until the first one it
# rejects, and adds one token of its own: the correction at the rejected position, or a
# bonus token after the last position if all $k$ were accepted.
#
# If each drafted token is accepted with probability $\alpha$, independently, the round
# yields at least $i + 1$ tokens when the first $i$ are accepted, with probability
# $\alpha^i$. Summing over $i = 0 \dots k$:
#
# $$
# E[\text{tokens per round}] = \sum_{i=0}^{k} \alpha^i = \frac{1 - \alpha^{k+1}}{1 - \alpha},
# $$
#
# between 1 (nothing accepted) and $k + 1$ (everything accepted, the limit as
# $\alpha \to 1$). The acceptance rate depends on how well the draft imitates the target
# on the traffic at hand; it is measured, not chosen. `servelib.speculative` computes it,
# and a seeded simulation of 20,000 rounds checks the formula:

# %%
# NBVAL_CHECK_OUTPUT
rates, lengths = (0.5, 0.6, 0.7, 0.8, 0.9), (1, 2, 4, 8)
rows = [[a] + [expected_tokens_per_step(a, k) for k in lengths] for a in rates]
print("tokens per round")
print(table(rows, ["alpha"] + [f"k={k}" for k in lengths],
            ["g"] + [".2f"] * len(lengths)))
sim = simulate_tokens_per_step(0.8, 4, 20_000, seed=0)
print(f"simulated, alpha=0.8, k=4: {sim:.2f} "
      f"(formula {expected_tokens_per_step(0.8, 4):.2f})")
assert abs(sim - expected_tokens_per_step(0.8, 4)) < 0.03
assert expected_tokens_per_step(1.0, 4) == 5 and expected_tokens_per_step(0.0, 4) == 1

# %% tags=["remove-cell"]
assert round(expected_tokens_per_step(0.8, 4), 4) == 3.3616
glue("e_08_4", f"{expected_tokens_per_step(0.8, 4):.2f}")

# %% [markdown]
# With $\alpha = 0.8$ and $k = 4$ a round yields {glue:text}`e_08_4` tokens, not 5.
# Long drafts pay less and less: the chance of reaching the $i$-th drafted token falls as
# $\alpha^i$.
#
# ## What a round costs
#
# A round takes $k$ draft steps and one verification pass:
#
# $$
# t_\text{round} = k \, t_\text{draft} + t_\text{verify}, \qquad
# \text{speed-up} = \frac{E \, t_\text{target}}{k \, t_\text{draft} + t_\text{verify}} ,
# $$
#
# where $t_\text{target}$ is an ordinary decode step of the target. The roofline prices
# each pass as in the batching chapter: FLOPs $(2P + A) B n$ for $n$ new tokens per
# sequence, $A$ being one token's attention over the cache, and bytes
# $W + B \cdot \text{KV}$. The verification pass ($n = k + 1$) reads the same bytes as a
# decode step and does $k + 1$ times the arithmetic. While decode is memory-bound that
# arithmetic is free, $t_\text{verify} \approx t_\text{target}$, and with
# $c = t_\text{draft} / t_\text{target}$
#
# $$
# \text{speed-up at batch 1} \approx \frac{E}{1 + k c} .
# $$
#
# Llama-3-70B drafted by Llama-3-8B (same tokenizer), both bf16 on eight H100s (TP=8, the
# book's node), 512-token contexts, $\alpha = 0.8$, $k = 4$:

# %%
# NBVAL_CHECK_OUTPUT
ctx, alpha, k, tp = 512, 0.8, 4, 8
kw = dict(context_len=ctx, acceptance_rate=alpha, draft_len=k, tp_degree=tp)
est, rows = {}, []
for b in (1, 16, 64, 128, 256, 512):
    e = est[b] = speculative_estimate(target, draft, h100, batch=b, **kw)
    rows.append((b, e.target_step_s * 1e3, e.draft_step_s * 1e3, e.verify_step_s * 1e3,
                 e.round_s * 1e3, e.baseline_tokens_per_s, e.tokens_per_s, e.speedup))
print(table(rows, ["batch", "target ms", "draft ms", "verify ms", "round ms",
                   "tokens/s", "with spec.", "speed-up"],
            ["d", ".2f", ".2f", ".2f", ".2f", ".0f", ".0f", ".2f"]))
c1 = est[1].draft_step_s / est[1].target_step_s
assert abs(est[1].speedup - expected_tokens_per_step(alpha, k) / (1 + k * c1)) < 0.01
assert est[1].speedup > 2 and est[256].speedup < 1

# %% tags=["remove-cell"]
assert round(est[1].speedup, 2) == 2.31
glue("s_b1", f"{est[1].speedup:.2f}")
glue("s_c", f"{c1:.2f}")
glue("s_b256", f"{est[256].speedup:.2f}")

# %% [markdown]
# At batch 1 speculation more than doubles the tokens per second ({glue:text}`s_b1`x; the
# draft costs $c$ = {glue:text}`s_c` of a target step). At batch 256 it runs at
# {glue:text}`s_b256`x: slower than not speculating at all.
#
# ## Where it stops paying: the crossover batch
#
# Let $B^*$ be the target's {term}`critical batch <Ridge point>`, where its ordinary decode
# step turns compute-bound (the batching chapter: about the ridge point in bf16 at short
# contexts). The verification pass carries $k + 1$ tokens per sequence, so it turns
# compute-bound $k + 1$ times sooner, at $B^* / (k + 1)$. Past that batch it costs
# $B (k + 1) / B^*$ target steps instead of one, while the target's own step still costs
# one, and the speed-up is
#
# $$
# \frac{E}{k c + B (k + 1) / B^*} = 1
# \quad \Longrightarrow \quad
# B_{\times} = B^* \, \frac{E - k c}{k + 1} .
# $$
#
# That assumes short contexts (the weights dominate every step's bytes) and a draft that is
# still memory-bound. servelib scans the exact roofline batch by batch, KV reads and
# attention included:

# %%
# NBVAL_CHECK_OUTPUT
bstar = critical_batch(target, ridge_point(h100), 1)
closed = crossover_batch_estimate(bstar, alpha, k, c1)
short = crossover_batch(target, draft, h100, **{**kw, "context_len": 1})
at_ctx = crossover_batch(target, draft, h100, **kw)
fits = speculative_concurrency(target, draft, h100, context_len=ctx, tp_degree=tp)
print(f"B* (H100 bf16, short context) = {bstar}; "
      f"E = {expected_tokens_per_step(alpha, k):.2f}; c = {c1:.3f}")
print(f"closed form: B_x = {closed:.0f};  scanned at a 1-token context: {short};  "
      f"at {ctx} tokens: {at_ctx}")
print(f"sequences of {ctx} tokens that fit on TP={tp}, both models and caches: "
      f"{fits:,}")
assert round(closed) == short and at_ctx < fits

# %% tags=["remove-cell"]
assert (bstar, short, at_ctx) == (296, 172, 194)
glue("bstar", bstar)
glue("bx_closed", f"{closed:.0f}")
glue("bx_ctx", at_ctx)
glue("bx_fits", f"{fits:,}")

# %% [markdown]
# The closed form and the scan agree ({glue:text}`bx_closed`); with 512-token contexts the
# KV reads keep the steps memory-bound a little longer and the crossover moves to
# {glue:text}`bx_ctx` sequences, well within the {glue:text}`bx_fits` that fit in memory with
# the draft's weights and cache beside the target's. The figure shows the speed-up against
# batch size for several acceptance rates:

# %%
batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
fig, ax = plots.new_axes("batch size", "speed-up over plain decoding (x)",
                         f"70B drafted by 8B, 8 x H100, {ctx}-token context, k={k}",
                         logx=True)
for a in (0.6, 0.7, 0.8, 0.9):
    at_a = {**kw, "acceptance_rate": a}
    ups = [speculative_estimate(target, draft, h100, batch=b, **at_a).speedup
           for b in batches]
    ax.plot(batches, ups, marker="o", label=f"acceptance {a}")
ax.axhline(1, color="grey", lw=0.8)
ax.axvline(bstar / (k + 1), color="grey", lw=0.8, ls=":")
plots.legend(fig)

# %% [markdown]
# *Figure: predicted speed-up of speculative decoding against batch size. Notice the flat
# start, where the verification pass is memory-bound and costs one step whatever it
# carries, the bend at $B^*/(k+1)$ (dotted), where it turns compute-bound, and that every
# curve crosses 1: a higher acceptance rate only moves the crossover.*
#
# Long contexts change the picture. Each sequence's KV read grows with its context and is
# not shared, so as the batch grows decode's
# {term}`arithmetic intensity <Arithmetic intensity>` tends to $(2P + A) / \text{KV}$,
# which falls as the context grows; the verification pass does $k + 1$ times the
# arithmetic for the same bytes. Once $(k + 1)(2P + A)/\text{KV}$ is below the ridge, the
# verification pass stays memory-bound at every batch, and what ends the gain is the
# draft's own KV reads, which grow with every sequence too:

# %%
# NBVAL_CHECK_OUTPUT
rows, cross_ctx = [], {}
for c in (512, 2048, 8192, 32_768):
    cross_ctx[c] = [crossover_batch(target, draft, h100,
                                    **{**kw, "context_len": c, "acceptance_rate": a})
                    for a in (0.8, 0.6)]
    limit = decode_intensity_limit(target, c)
    fit = speculative_concurrency(target, draft, h100, context_len=c, tp_degree=tp)
    rows.append((c, limit, (k + 1) * limit, *map(str, cross_ctx[c]), fit))
print(table(rows, ["context", "(2P+A)/KV", "x (k+1)", "crossover, alpha 0.8",
                   "alpha 0.6", "fits (TP=8)"], [",d", ".0f", ".0f", "", "", ",d"]))
print(f"ridge point: {ridge_point(h100):.0f} FLOP/byte")
assert cross_ctx[8192][0] is None and cross_ctx[8192][1] > rows[2][-1]

# %% tags=["remove-cell"]
glue("bx_8k_06", cross_ctx[8192][1])
glue("fits_8k", rows[2][-1])

# %% [markdown]
# At 8,192 tokens $(k + 1)(2P + A)/\text{KV}$ is barely above the ridge: at
# $\alpha = 0.8$ no batch up to 4,096 stops speculation paying (None in the table), and at
# $\alpha = 0.6$ the draft's reads end it only at {glue:text}`bx_8k_06` sequences, more
# than the {glue:text}`fits_8k` that fit. At long contexts speculation pays at every batch
# the memory allows. The question "does speculation pay here?" has no answer without the
# batch, the context and the acceptance rate.
#
# ## Measure: two random-weight decoders on this machine
#
# The target is the toy decoder of the earlier chapters; the draft is the same design with
# a third of the layers (at least one) and half the width. Random weights never agree, so
# acceptance is simulated: a round's tokens are drawn at $\alpha = 0.8$. Everything that
# costs time is real: four draft decode steps and the target's verification pass over five
# tokens per sequence (causal attention over the cache, logits at every position), timed
# together as a round, against a plain decode step of the target at the same batch. The
# three are timed in turn, three times over, medians kept. The prediction is the same
# roofline, on the ceilings measured here. On a CPU the sweep stops at a batch of 8, past
# the few sequences where the gain ends there, so that it takes seconds; a GPU runs larger
# batches. Not checked: the numbers depend on the machine and its load.

# %%
ceil = measure_ceilings(DEVICE, min_run_time=0.3)
spec = toy_spec(DEVICE, "small")
big, small = ToyDecoder(spec, DEVICE), ToyDecoder(draft_spec(spec), DEVICE)
live_batches = [1, 2, 4, 8] if DEVICE.kind == "cpu" else [1, 4, 16, 64, 256]
print(f"measured on {DEVICE}; copy {ceil.copy_bandwidth_Bps / 1e9:.1f} GB/s, matmul "
      f"{ceil.matmul_flops / 1e12:.2f} TFLOP/s, ridge {ceil.ridge:.1f} FLOP/byte")
print(f"target {big.n_params / 1e6:.0f}M parameters "
      f"({big.weights_read_bytes / 2**20:.0f} MiB read per step), "
      f"draft {small.n_params / 1e6:.0f}M ({small.weights_read_bytes / 2**20:.0f} MiB, "
      f"{small.weights_read_bytes / big.weights_read_bytes:.0%} of the target's bytes)")
sweep = speculative_sweep(big, small, live_batches, context_len=256,
                          acceptance_rate=0.8, draft_len=4, ceilings=ceil)
rows = [(p.batch, p.target_step_s * 1e3, p.verify_step_s * 1e3, p.round_s * 1e3,
         p.tokens_per_step, p.speedup, p.predicted_speedup) for p in sweep.points]
print(table(rows, ["batch", "plain ms", "verify ms", "round ms", "tokens/round",
                   "speed-up", "predicted"],
            ["d", ".1f", ".1f", ".1f", ".2f", ".2f", ".2f"]))
machine = ceilings_spec(ceil)
measured_x = next((p.batch for p in sweep.points if p.speedup <= 1), None)
predicted_x = crossover_batch(spec, draft_spec(spec), machine, context_len=256,
                              acceptance_rate=0.8, draft_len=4, dtype=ceil.dtype,
                              bytes_per_param=big.bytes_per_param,
                              bytes_per_elem=big.bytes_per_param)
print(f"first batch without a gain: measured {measured_x}, predicted {predicted_x}")
glue("live_ridge", f"{ceil.ridge:.0f}")
glue("live_b1", f"{sweep.points[0].speedup:.2f}")
glue("live_b1_pred", f"{sweep.points[0].predicted_speedup:.2f}")
glue("live_x", "beyond the largest batch timed" if measured_x is None
     else f"batch {measured_x}")
glue("live_x_pred", "none" if predicted_x is None else f"batch {predicted_x}")

# %%
fig, ax = plots.new_axes("batch size", "speed-up over plain decoding (x)",
                         f"toy decoders on {DEVICE.kind}", logx=True)
bs = [p.batch for p in sweep.points]
# the prediction as a wide pale band underneath: a measurement on top of it shows
ax.plot(bs, [p.predicted_speedup for p in sweep.points], lw=8, alpha=0.3, color="C1",
        label="roofline on measured ceilings")
ax.plot(bs, [p.speedup for p in sweep.points], "o-", color="C0",
        label="measured (acceptance simulated)")
ax.axhline(1, color="grey", lw=0.8)
plots.legend(fig)

# %% [markdown]
# *Figure: measured (points) and predicted (the pale band) speed-up of speculative
# decoding on this machine. Notice where each curve crosses 1. The crossover scales with
# the ridge point, measured here at {glue:text}`live_ridge` FLOP per byte: a CPU's is
# around ten, so the gain ends after a few sequences; a datacentre GPU's is in the
# hundreds, so it lasts to a batch of a hundred or more.*
#
# On the machine that ran this page speculation gave {glue:text}`live_b1`x at batch 1
# (predicted {glue:text}`live_b1_pred`x), and the gain ended at {glue:text}`live_x`
# (predicted: {glue:text}`live_x_pred`). A busy machine moves the timings from run to run.
#
# ## A published figure: gpt-fast's 70B with a 7B draft
#
# gpt-fast {cite}`gptfast2023` published speculative decoding of Llama-2-70B drafted by
# Llama-2-7B, both with int4 weights, $k = 4$, greedy decoding of a code prompt (its script
# passes `--speculate_k 4` and runs as one process, so on one of the machine's A100s). The
# same page gives each model alone, which prices the draft. At batch 1 the speed-up is
# $E / (1 + k c)$, so the published numbers imply an acceptance rate:

# %%
# NBVAL_CHECK_OUTPUT
alone, drafter = (published_decode(m, weights="int4-g32", tp_degree=1)[0].tokens_per_s
                  for m in ("llama-2-70b", "llama-2-7b"))
speedup_pub = GPT_FAST_SPECULATIVE_TOKENS_PER_S / alone
c_pub = alone / drafter
a_pub = implied_acceptance_rate(speedup_pub, 4, c_pub)
print(f"published ({GPT_FAST_SOURCE}):")
print(f"  70B int4 alone {alone} tokens/s, 7B int4 alone {drafter} tokens/s, "
      f"speculative {GPT_FAST_SPECULATIVE_TOKENS_PER_S} tokens/s")
print(f"speed-up {speedup_pub:.2f}x, draft cost c = {c_pub:.3f}: implies alpha = "
      f"{a_pub:.2f} ({expected_tokens_per_step(a_pub, 4):.2f} tokens per round)")
assert abs(expected_tokens_per_step(a_pub, 4) - speedup_pub * (1 + 4 * c_pub)) < 1e-6

# %% tags=["remove-cell"]
assert round(speedup_pub, 2) == 1.92 and round(a_pub, 2) == 0.72
glue("pub_speedup", f"{speedup_pub:.2f}")
glue("pub_alpha", f"{a_pub:.2f}")

# %% [markdown]
# A {glue:text}`pub_speedup`x gain means about {glue:text}`pub_alpha` of the drafted tokens
# were accepted: a plausible rate for greedy code completion, where a 7B model often guesses
# what a 70B model would write. The figure is for one sequence; nothing in it says what
# happens at a serving batch.
#
# ## Beginner mistakes, wrong and right
#
# **Speculating at every batch size.** The gain measured at batch 1 is quoted for a
# deployment that decodes hundreds of sequences at once. The audit finds it in
# `plans/mistake-speculative-at-large-batch.toml`, the book's node with a Llama-3-8B draft
# at $\alpha = 0.5$:

# %%
# NBVAL_CHECK_OUTPUT
plan = mistake_plans()["speculative-at-large-batch"]
wrong = speculative_estimate(get_model(plan.model), get_model(plan.draft_model),
                             plan.gpu, batch=1, context_len=plan.context_len,
                             acceptance_rate=plan.acceptance_rate,
                             draft_len=plan.draft_len, tp_degree=plan.tp_degree)
finding, = audit(plan)
print(f"wrong: {wrong.speedup:.2f}x (the gain at batch 1)")
print(f"right: [{finding.code}] {finding.detail}")
assert wrong.pays and finding.wrong == 127

# %% [markdown]
# **Counting $k + 1$ tokens per round.** Drafting four tokens does not give five tokens per
# target step; only the accepted prefix counts.

# %%
# NBVAL_CHECK_OUTPUT
print(f"wrong: {k + 1} tokens per round -> {k + 1:.2f}x")
print(f"right: {expected_tokens_per_step(alpha, k):.2f} tokens per round -> "
      f"{est[1].speedup:.2f}x at batch 1")
assert est[1].speedup < expected_tokens_per_step(alpha, k) < k + 1

# %% [markdown]
# **Leaving out the draft's cost.** The draft is a model too: its $k$ steps take
# {glue:text}`s_c` of a target step each, and at long contexts its KV reads grow with the
# batch like the target's.

# %%
# NBVAL_CHECK_OUTPUT
free_draft = expected_tokens_per_step(alpha, k)
print(f"wrong (draft free): {free_draft:.2f}x")
print(f"right: {est[1].speedup:.2f}x at batch 1, {est[128].speedup:.2f}x at batch 128")
assert free_draft > est[1].speedup > est[128].speedup

# %% [markdown]
# ## Summary: the numbers to carry
#
# | what | value |
# |---|---|
# | tokens per round, $\alpha$ = 0.8, $k$ = 4 | {glue:text}`e_08_4` |
# | 70B with an 8B draft on 8 x H100, 512 tokens: speed-up at batch 1 | {glue:text}`s_b1`x |
# | the same at batch 256 | {glue:text}`s_b256`x |
# | crossover batch: closed form, and scanned at 512 tokens | {glue:text}`bx_closed`, {glue:text}`bx_ctx` |
# | gpt-fast, 70B int4 with a 7B int4 draft (published): speed-up, implied $\alpha$ | {glue:text}`pub_speedup`x, {glue:text}`pub_alpha` |
#
# Speculation buys tokens with idle arithmetic, so it pays while decode is memory-bound:
# at small batches, or at long contexts where the KV reads keep every step memory-bound.
# Past the crossover batch $B^* (E - k c)/(k+1)$ it slows decoding down. Measure the
# acceptance rate on real traffic and price it at the batch you will serve.
#
# ## Exercises
#
# Each exercise states every constant it needs. Write your answer in the cell and run it:
# `check` says whether it is right. Solutions are behind the toggles: each works the
# numbers by hand, then confirms them with `servelib`.
#
# **spec-1.** A draft proposes 5 tokens per round and each is accepted with probability
# 0.7, independently. How many tokens does a round yield on average?

# %% tags=["hide-input"]
### BEGIN SOLUTION
by_hand = sum(0.7**i for i in range(5 + 1))       # 1 + a + a^2 + ... + a^k
answer = expected_tokens_per_step(0.7, 5)
print(f"{by_hand:.4f} tokens per round by hand, {answer:.4f} from servelib")
### END SOLUTION
check("spec-1", answer)

# %% [markdown]
# **spec-2.** Llama-3-70B (70.55 billion parameters, 320 KiB of KV cache per token) is
# drafted by Llama-3-8B (8.03 billion parameters, 128 KiB per token), both bf16 on eight
# H100s (TP=8), at 1,024-token contexts, $\alpha = 0.8$, $k = 4$. By the roofline, what is
# the speed-up at batch 1?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# At batch 1 every pass is memory-bound: its time is its bytes over the bandwidth,
# which (like the TP degree) cancels in the ratio. Verifying reads what a step reads.
target_bytes = 2 * 70.55e9 + 320 * 1024 * 1024
draft_bytes = 2 * 8.03e9 + 128 * 1024 * 1024
tokens = sum(0.8**i for i in range(4 + 1))
by_hand = tokens * target_bytes / (4 * draft_bytes + target_bytes)
answer = speculative_estimate(target, draft, h100, batch=1, context_len=1024,
                              acceptance_rate=0.8, draft_len=4, tp_degree=8).speedup
print(f"{by_hand:.3f}x by hand, {answer:.3f}x from servelib")
### END SOLUTION
check("spec-2", answer)

# %% [markdown]
# **spec-3.** Llama-3-70B (70.55 billion parameters; 80 layers of 64 attention heads of
# size 128; 320 KiB of KV cache per token) is drafted by Llama-3-8B (8.03 billion
# parameters; 32 layers of 32 heads of size 128; 128 KiB per token), both bf16 on eight
# H100 SXMs (TP=8; 989.5 dense bf16 TFLOP/s and 3.35 TB/s each), at 512-token contexts,
# $\alpha = 0.8$, $k = 4$. By the roofline, attention's FLOPs counted, what is the
# smallest batch at which speculation no longer pays?

# %% tags=["hide-input"]
### BEGIN SOLUTION
def pass_s(params, layers, heads, kv_token, batch, new_tokens, context=512):
    """One pass per device at TP=8: (2P + attention) FLOPs a new token, W + B KV"""
    flops = new_tokens * batch * (2 * params + 4 * layers * heads * 128 * context) / 8
    moved = (2 * params + batch * kv_token * context) / 8
    return max(flops / 989.5e12, moved / 3.35e12)


big_model, small_model = (70.55e9, 80, 64, 320 * 1024), (8.03e9, 32, 32, 128 * 1024)
tokens = sum(0.8**i for i in range(4 + 1))
by_hand = next(b for b in range(1, 4097)
               if tokens * pass_s(*big_model, b, 1)                 # plain decoding
               <= 4 * pass_s(*small_model, b, 1) + pass_s(*big_model, b, 5))  # a round
answer = crossover_batch(target, draft, h100, context_len=512, acceptance_rate=0.8,
                         draft_len=4, tp_degree=8)
print(f"batch {by_hand} by hand, batch {answer} from servelib")
### END SOLUTION
check("spec-3", answer)

# %% [markdown]
# **spec-4.** Estimate where speculation stops paying for Llama-3-70B drafted by Llama-3-8B
# (70.55 and 8.03 billion parameters; 320 and 128 KiB of KV cache per token) on H100 SXMs
# (989.5 dense bf16 TFLOP/s, 3.35 TB/s), $\alpha = 0.8$, $k = 4$, with the closed form
# $B^* (E - k c)/(k + 1)$ for short contexts: $B^*$ is Llama-3-70B's critical batch on
# that GPU in bf16 at a 1-token context, and $c$ the draft's step time over the target's
# at batch 1 (same context).

# %% tags=["hide-input"]
### BEGIN SOLUTION
ridge = 989.5 / 3.35                                        # FLOP per byte
# B* solves B 2P / (W + B KV) = ridge, with W = 2P bytes in bf16 and one token of KV.
b_star = math.ceil(ridge * 2 * 70.55e9 / (2 * 70.55e9 - ridge * 320 * 1024))
c = (2 * 8.03e9 + 128 * 1024) / (2 * 70.55e9 + 320 * 1024)  # memory-bound: bytes ratio
tokens = sum(0.8**i for i in range(4 + 1))
by_hand = b_star * (tokens - 4 * c) / (4 + 1)
one = speculative_estimate(target, draft, h100, batch=1, context_len=1,
                           acceptance_rate=0.8, draft_len=4)
answer = crossover_batch_estimate(critical_batch(target, ridge_point(h100), 1), 0.8, 4,
                                  one.draft_step_s / one.target_step_s)
print(f"B* = {b_star}, c = {c:.4f}: {by_hand:.1f} by hand, {answer:.1f} from servelib")
### END SOLUTION
check("spec-4", answer)

# %% [markdown]
# **spec-5.** gpt-fast published 48.4 tokens/s for Llama-2-70B (int4) drafted by
# Llama-2-7B (int4) with $k = 4$ on one A100, and 25.25 and 196.80 tokens/s for the two
# models alone. What acceptance rate do these figures imply?

# %% tags=["hide-input"]
### BEGIN SOLUTION
speedup, c = 48.4 / 25.25, 25.25 / 196.80    # the gain; the draft's cost per step
tokens = speedup * (1 + 4 * c)               # what a round must yield: E = s (1 + k c)
lo, hi = 0.0, 1.0                               # E grows with alpha: bisect for it
for _ in range(50):
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if sum(mid**i for i in range(4 + 1)) < tokens else (lo, mid)
answer = implied_acceptance_rate(speedup, 4, c)
print(f"E = {tokens:.3f} tokens a round: alpha {lo:.4f} by hand, "
      f"{answer:.4f} from servelib")
### END SOLUTION
check("spec-5", answer)

# %% [markdown]
# **spec-6.** Llama-3-70B (70.55 billion parameters, 320 KiB of KV cache per token) is
# drafted by Llama-3-8B (8.03 billion parameters, 128 KiB per token), both bf16 on eight
# H100s (TP=8), at 512-token contexts and $\alpha = 0.8$. Which draft length $k$ from 1 to
# 10 gives the largest speed-up at batch 1?

# %% tags=["hide-input"]
### BEGIN SOLUTION
target_bytes = 2 * 70.55e9 + 320 * 1024 * 512     # memory-bound passes: time ~ bytes
draft_bytes = 2 * 8.03e9 + 128 * 1024 * 512
gain = {n: sum(0.8**i for i in range(n + 1)) * target_bytes
        / (n * draft_bytes + target_bytes) for n in range(1, 11)}
print("  ".join(f"k={n}: {g:.3f}x" for n, g in gain.items()))
by_hand = max(gain, key=gain.get)
answer = max(range(1, 11), key=lambda n: speculative_estimate(
    target, draft, h100, batch=1, context_len=512, acceptance_rate=0.8, draft_len=n,
    tp_degree=8).speedup)
print(f"k = {by_hand} by hand, k = {answer} from servelib")
### END SOLUTION
check("spec-6", answer)
