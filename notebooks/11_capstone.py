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
# # What good sounds like
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-serving-book/serving-capacity-economics/blob/v0.1.0/notebooks/11_capstone.ipynb)
#
# Every earlier chapter answered one question. A capacity plan has to answer all of them at
# once, for one model on one node, and say which numbers matter and why. This chapter works
# through such a plan for a 70B {term}`GQA` model on an 8-GPU node, computing every figure
# from `servelib`: the cache per token and per conversation, the concurrency, why a
# batch-1 endpoint is slow, where a dedicated floor should sit, why a break-even needs its
# output mix (and how the capacity counts tokens), when self-hosting pays, and when cost
# is not the question at all. Then it
# turns the tables: the book's six war stories become plans, and an audit,
# `servelib.audit`, names the beginner mistake in each. Last, you find the mistakes yourself
# before the audit does.
#
# **You will be able to**
# 1. derive a node's concurrency from memory and defend it in one sentence;
# 2. explain a slow batch-1 endpoint with arithmetic intensity and fix it with batching;
# 3. size a dedicated floor at the quantile its break-even sets, with spill, and quote a break-even only with its mix and the way its capacity counts tokens;
# 4. state the assumptions behind a self-hosting crossover, against the same model hosted and against a different one, and when cost is not the question;
# 5. read a capacity plan and name each beginner mistake in it, as the audit does.

# %% tags=["hide-input"]
# Set-up. On Colab this installs servelib from the book's repository; elsewhere it is
# already installed (README). Then it reports the device that measurements would use
# (this chapter computes; it measures nothing).
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

import numpy as np

from servelib import plots
from servelib.audit import (audit, derive, load_plan, plan_model, plan_tco,
                            plan_to_toml, right_tp_degree)
from servelib.audit.examples import sound_plan, war_stories
from servelib.audit.report import finding_lines
from servelib.book import glue, table
from servelib.economics import (LLAMA_3_70B_HOSTED, MINUTES_PER_MONTH, blended_price,
                                break_even_utilization, cheapest_floor,
                                cheapest_floor_percentile, demand_trace,
                                floor_at_percentile, ptu_break_even_utilization,
                                spillover_cost)
from servelib.grading import check
from servelib.hardware import get_gpu, ridge_point
from servelib.memory import (kv_budget_bytes, kv_bytes_per_token, max_concurrency,
                             weight_bytes)
from servelib.roofline import compute_utilization, decode_intensity
from servelib.units import GiB, KiB, fmt_bytes

plots.apply_style()

# %% [markdown]
# ## The plan
#
# A plan is a short file: the model, the GPUs and how they are split, the context length,
# the working reserve, how the engine batches and admits, the money side, and the numbers
# its author claims. `servelib.audit.CapacityPlan` holds it; the same plan is kept in the
# repository as `plans/sound.toml` and is built here in code, so the chapter runs anywhere.
# When the file is at hand, the two are checked to agree.

# %%
plan = sound_plan()
repo_file = pathlib.Path("..") / "plans" / "sound.toml"
if repo_file.exists():
    assert load_plan(repo_file) == plan
print(plan_to_toml(plan))

# %% [markdown]
# The model is Llama-3-70B's architecture ($L = 80$ layers, $H_{kv} = 8$ KV heads of
# $d_\text{head} = 128$) with the round $70 \times 10^9$ parameters in fp16, as in the
# KV-cache chapter. The node is eight H100 SXM cards of 80 GiB.
#
# ## Concurrency is memory
#
# The cache per token is $2 \cdot L \cdot H_{kv} \cdot d_\text{head} \cdot b$; a conversation of
# $n$ tokens needs $n$ of them; the budget is what the weights leave, less the working
# reserve; concurrency is the budget over the conversation:
#
# $$
# \text{concurrency} = \left\lfloor \frac{(M - W)(1 - r)}{2 L H_{kv} d_\text{head} b \cdot n} \right\rfloor .
# $$

# %%
# NBVAL_CHECK_OUTPUT
model = plan_model(plan)
d = derive(plan)
node = plan.n_gpus * get_gpu(plan.gpu).memory_bytes
budget = kv_budget_bytes(node, weight_bytes(70e9), plan.reserve_fraction)
pooled = max_concurrency(budget, kv_bytes_per_token(model), plan.context_len)
print(f"KV per token         : {fmt_bytes(d.kv_bytes_per_token)}")
print(f"KV per conversation  : {fmt_bytes(d.kv_bytes_per_sequence)} "
      f"at {plan.context_len:,} tokens")
print(f"weights              : {fmt_bytes(d.weights_bytes, digits=4)} "
      f"on a {fmt_bytes(node)} node")
print(f"KV budget            : {fmt_bytes(d.kv_budget_bytes, digits=4)} "
      f"after a {plan.reserve_fraction:.0%} reserve")
print(f"concurrency          : {d.concurrency} (per device at TP={plan.tp_degree}), "
      f"{pooled} (pooled)")
assert d.concurrency == pooled                 # 8 KV heads split evenly over 8 cards

# %% tags=["remove-cell"]
assert d.kv_bytes_per_token == 320 * KiB and d.kv_bytes_per_sequence == 2.5 * GiB
assert d.concurrency == 183
glue("cap_kv_token", fmt_bytes(d.kv_bytes_per_token))
glue("cap_kv_seq", fmt_bytes(d.kv_bytes_per_sequence))
glue("cap_conc", d.concurrency)
glue("cap_tp_min", d.min_tp_degree)

# %% [markdown]
# {glue:text}`cap_kv_token` per token, {glue:text}`cap_kv_seq` per 8k conversation, and
# {glue:text}`cap_conc` conversations on the node. Per-device arithmetic at TP=8 and the
# pooled view agree here because the 8 KV heads split evenly over 8 cards.
#
# Why TP=8 and not the smallest {term}`TP degree` that fits, which is
# {glue:text}`cap_tp_min`? The plan must hold 160 conversations at once. Replicas each keep a
# full copy of the weights, so splitting the node into smaller replicas spends memory on
# weights instead of cache:

# %%
# NBVAL_CHECK_OUTPUT
rows = []
for tp in (2, 4, 8):
    c = derive(dataclasses.replace(plan, tp_degree=tp))
    rows.append((tp, plan.n_gpus // tp, c.sequences_per_replica, c.concurrency))
print(table(rows, ["TP", "replicas", "conversations each", "in all"]))
assert plan.target_concurrency == 160 and right_tp_degree(plan) == 8
assert right_tp_degree(dataclasses.replace(plan, target_concurrency=100)) == 4

# %% [markdown]
# So the degree to pick is the lowest one at which both the weights *and* the required
# concurrency fit: TP=8 is the smallest that holds 160 conversations of 8k tokens; for 100 of them TP=4 would do.
#
# ## Why the endpoint is slow
#
# A decode step reads every weight to make one token per sequence: $2P$ FLOPs against $W$
# bytes, about 1 FLOP per byte in fp16 at batch 1 (attention over an 8k-token cache adds
# some 15% to the FLOPs, and the cache a little to the bytes). The {term}`ridge point` of an H100 in
# bf16 is peak FLOP/s over bandwidth, about 295. Below it the GPU waits on memory:

# %%
# NBVAL_CHECK_OUTPUT
ridge = ridge_point(plan.gpu, plan.dtype)
rows = []
for batch in (1, 16, d.decode_batch):
    ai = decode_intensity(model, batch, plan.context_len)
    rows.append((batch, ai, compute_utilization(ai, ridge)))
print(table(rows, ["batch", "FLOP/byte", "of the arithmetic"], ["d", ".2f", ".1%"]))
ai1 = decode_intensity(model, 1, plan.context_len)
print(f"ridge point: {ridge:.0f} FLOP/byte")
assert 1 < ai1 < 1.2 and compute_utilization(ai1, ridge) < 0.01

# %% tags=["remove-cell"]
assert round(ridge) == 295 and round(compute_utilization(ai1, ridge), 4) == 0.0038
glue("cap_ai1", f"{ai1:.2f}")
glue("cap_ridge", f"{ridge:.0f}")
glue("cap_util1", f"{compute_utilization(ai1, ridge):.1%}")

# %% [markdown]
# Batch-1 decode runs at {glue:text}`cap_ai1` FLOP/byte against a ridge of
# {glue:text}`cap_ridge`: {glue:text}`cap_util1` of the arithmetic. More GPUs would idle the
# same way. {term}`Continuous batching` {cite}`yu2022orca` shares each weight read among every
# live conversation, and the memory above says {glue:text}`cap_conc` of them fit. (At 8k contexts the KV read grows
# with the batch, so intensity stops short of the batch size; the batching chapter shows why.)
#
# ## The floor and the spill
#
# Dedicated capacity ({term}`PTU`) is paid for every minute. Sized to the peak it idles most
# of the month. Each token/min of floor pays for itself only in the minutes when demand
# exceeds it, so the cheapest floor is the demand level exceeded a break-even share $u^*$
# of the time, the $(1 - u^*)$ quantile of demand; the minutes above it
# {term}`spill <Spillover>` to pay-as-you-go: the bill rises a little, nothing is refused.
# That quantile is the median only when $u^* = 50\%$. Below, the plan's workload (5.75 B
# tokens a month) is spread over a seeded month of traffic with a daily cycle and bursts,
# and the plan's dedicated price (\$13,140 a month for 120,000 tokens/min, counted in tokens
# of any kind) is applied to floors at several percentiles.

# %%
# NBVAL_CHECK_OUTPUT
trace = demand_trace(mean_tpm=plan.monthly_tokens / MINUTES_PER_MONTH, seed=0)
usd_per_tpm = plan.monthly_commitment_usd / (plan.capacity_tokens_per_month
                                             / MINUTES_PER_MONTH)
prices = (plan.usd_per_1k_input, plan.usd_per_1k_output)
payg = blended_price(*prices, plan.output_fraction)
u_star = d.break_even_utilization
p_star = cheapest_floor_percentile(u_star)
print(f"break-even utilisation {u_star:.0%} -> cheapest floor at p{p_star:.0f} "
      f"(the plan says p{plan.floor_percentile:g})")
floors, rows = {}, []
for label, q, spill in (("no floor", 0, True), (f"p{p_star:.0f}, spill", p_star, True),
                        ("p50, spill", 50, True), ("peak", 100, True),
                        (f"p{p_star:.0f}, no spill", p_star, False)):
    floor = floor_at_percentile(trace, q) if q else 0.0
    r = floors[label] = spillover_cost(trace, floor, usd_per_tpm, payg, spill=spill)
    rows.append((label, r.floor_tpm, r.total_usd, r.availability))
print(table(rows, ["floor", "tokens/min", "$ a month", "availability"],
            ["", ",.0f", ",.0f", ".1%"]))
best = floors[f"p{p_star:.0f}, spill"]
others = ("no floor", "peak", "p50, spill")
assert best.total_usd < min(floors[k].total_usd for k in others)
assert best.availability == 1 and floors[f"p{p_star:.0f}, no spill"].availability < 0.9

# %% tags=["remove-cell"]
assert round(u_star, 2) == 0.57 and round(p_star) == plan.floor_percentile == 43
cheapest = cheapest_floor(trace, usd_per_tpm, payg).total_usd
assert abs(best.total_usd - cheapest) < 1e-3 * best.total_usd
assert floors["peak"].total_usd > 3 * best.total_usd
assert plan.monthly_tokens == 5.75e9 and plan.monthly_commitment_usd == 13_140
assert plan.capacity_tokens_per_month == 120_000 * MINUTES_PER_MONTH

# %%
qs = np.arange(0, 101, 5)
costs = [spillover_cost(trace, floor_at_percentile(trace, q), usd_per_tpm,
                        payg).total_usd for q in qs]
fig, ax = plots.new_axes("floor sized to percentile of demand",
                         "monthly cost with spill (USD)",
                         "dedicated floor plus pay-as-you-go spill")
ax.plot(qs, costs, marker="o")
ax.axvline(p_star, color="grey", ls="--", lw=0.8);

# %% tags=["remove-cell"]
glue("cap_u_star", f"{u_star:.0%}")
glue("cap_p_star", f"p{p_star:.0f}")

# %% [markdown]
# *Figure: the month's bill for a dedicated floor at each percentile of demand, overflow
# spilled to pay-as-you-go. Notice the shallow bowl: its bottom is at
# {glue:text}`cap_p_star` (dashed), the demand level exceeded {glue:text}`cap_u_star` of
# the time, and p50 costs little more because this capacity's break-even is near one
# half; a floor at the peak costs more than three times as much. Without spill the floor
# would be cheap and turn requests away; with spill a busy minute raises the bill instead.*
#
# Nearness to p50 is a property of this price, not a rule. The same arithmetic with Azure's
# gpt-4o PTU list prices, whose break-even is {glue:text}`cap_ptu_month` (monthly) and
# {glue:text}`cap_ptu_year` (yearly) at any mix, puts the cheapest floor at
# {glue:text}`cap_ptu_p_month` and {glue:text}`cap_ptu_p_year`.

# %%
# NBVAL_CHECK_OUTPUT
ptu_be = {t: ptu_break_even_utilization(plan.output_fraction, t)
          for t in ("monthly", "yearly")}
for t, u in ptu_be.items():
    print(f"gpt-4o PTU, {t}: break-even {u:.0%} -> "
          f"cheapest floor at p{cheapest_floor_percentile(u):.0f}")
assert all(cheapest_floor_percentile(u) < 50 for u in ptu_be.values())

# %% tags=["remove-cell"]
assert {t: round(cheapest_floor_percentile(u)) for t, u in ptu_be.items()} == \
    {"monthly": 5, "yearly": 19}
glue("cap_ptu_month", f"{ptu_be['monthly']:.0%}")
glue("cap_ptu_year", f"{ptu_be['yearly']:.0%}")
glue("cap_ptu_p_month", f"p{cheapest_floor_percentile(ptu_be['monthly']):.0f}")
glue("cap_ptu_p_year", f"p{cheapest_floor_percentile(ptu_be['yearly']):.0f}")

# %% [markdown]
# ## Never a break-even without the mix
#
# The {term}`blended price` of a workload is $c_\text{in}(1-f) + c_\text{out} f$ with $f$ the output
# fraction. A fixed commitment breaks even when it replaces as many PAYG dollars as it
# costs. The plan's commitment counts its capacity in tokens of any kind, so its
# break-even utilisation scales with one over the blended price:

# %%
# NBVAL_CHECK_OUTPUT
commitment = (plan.monthly_commitment_usd, plan.capacity_tokens_per_month)
be = {f: break_even_utilization(*commitment, *prices, f) for f in (0.5, 0.25, 0.1)}
for f, u in be.items():
    price = blended_price(*prices, f) * 1000
    print(f"output {f:4.0%}: blended ${price:.2f} per 1M tokens "
          f"-> break-even at {u:.0%} utilisation")
assert be[0.5] < be[0.25] < be[0.1]                       # the mix moves the break-even
ptu_at = [ptu_break_even_utilization(f, "monthly") for f in be]
assert all(abs(u - ptu_be["monthly"]) < 1e-12 for u in ptu_at)    # a PTU's does not

# %% tags=["remove-cell"]
assert (round(be[0.5], 2), round(be[0.25], 2), round(be[0.1], 2)) == (0.40, 0.57, 0.77)
glue("cap_be50", f"{be[0.5]:.0%}")
glue("cap_be10", f"{be[0.1]:.0%}")

# %% [markdown]
# The same contract breaks even at {glue:text}`cap_be50` with half the tokens output and at
# {glue:text}`cap_be10` with a tenth. A break-even quoted without its mix is not a number.
# A PTU whose capacity weighs an output token at the price ratio behaves the other way: its
# break-even, {glue:text}`cap_ptu_month` reserved monthly, is the same at every mix, and
# the mix moves how many PTUs the load needs instead. So ask how the capacity counts tokens
# before quoting either figure (the economics chapter derives both from one formula).
#
# ## When self-hosting pays
#
# Self-hosting is a fixed monthly bill, so its unit cost falls as the volume grows. The
# plan's assumptions, all stated: the same node rented at \$2.50 per H100-hour (730 hours a
# month), throughput from the roofline at the plan's batch and context with a quarter of
# the tokens output, load kept at or below 60% of capacity for headroom, and a quarter of an
# engineer (\$180,000 a year, loaded) on inference operations. Pay-as-you-go at gpt-4o list
# prices for the same mix, the closed model such a team would otherwise call (a different
# model with a different tokenizer), and, like for like, the same open weights hosted by a
# provider:

# %%
# NBVAL_CHECK_OUTPUT
print(f"PAYG at {plan.output_fraction:.0%} output: ${payg * 1000:.3f} per 1M tokens")
print(f"self-hosted at {plan.monthly_tokens / 1e9:.2f} B tokens/month: "
      f"${d.self_hosted_usd_per_1k * 1000:.2f} per 1M")
print(f"crossover: {d.crossover_tokens_per_month / 1e9:.2f} B tokens a month")
two_eng = derive(dataclasses.replace(plan, engineering_fte=2))
two_eng = two_eng.crossover_tokens_per_month
print(f"crossover with two engineers: {two_eng / 1e9:.2f} B tokens a month")
hosted = LLAMA_3_70B_HOSTED
hosted_plan = dataclasses.replace(plan, usd_per_1k_input=hosted.usd_per_1k_input,
                                  usd_per_1k_output=hosted.usd_per_1k_output)
hosted_cross = derive(hosted_plan).crossover_tokens_per_month
print(f"like for like, {hosted.model} at ${hosted.usd_per_1k_input * 1000:.2f} per 1M "
      f"(read {hosted.source.read_on}): crossover {hosted_cross / 1e9:.2f} B tokens "
      "a month")
assert d.crossover_tokens_per_month < two_eng < hosted_cross

# %% tags=["remove-cell"]
assert round(d.crossover_tokens_per_month / 1e9, 2) == 4.19
assert round(two_eng / 1e9, 2) == 10.19 and round(hosted_cross / 1e9, 2) == 20.39
glue("cap_crossover", f"{d.crossover_tokens_per_month / 1e9:.1f} B")
glue("cap_crossover2", f"{two_eng / 1e9:.1f} B")
glue("cap_crossover_hosted", f"{hosted_cross / 1e9:.1f} B")

# %% [markdown]
# On these numbers self-hosting crosses gpt-4o's price at about {glue:text}`cap_crossover`
# tokens a month. Each assumption moves it: two engineers instead of a quarter push it to
# {glue:text}`cap_crossover2`, and the same model hosted by a provider, the like-for-like
# price, to {glue:text}`cap_crossover_hosted`. The gpt-4o figure holds only if the open
# model does the work as well; that is a quality question, not an arithmetic one.
#
# ## When cost is not the question
#
# Some data may not leave the organisation's own hardware: patient records, classified
# material, data under a residency rule. Then a hosted API is not an option at any price,
# self-hosting is the only admissible deployment, and the crossover stops being a decision.
# The arithmetic does not go away; it changes role. With the bill fixed, the unit cost is
# set by how full the node is kept, so utilisation becomes an obligation: batch hard,
# admit safely, share the node between tiers only with priorities, and size the fleet to
# the load rather than the peak.

# %%
volumes = np.geomspace(0.5e9, 20e9, 30)
unit = [plan_tco(plan, v).unit_cost_usd_per_1k * 1000 for v in volumes]
fig, ax = plots.new_axes("tokens per month", "USD per 1M tokens",
                         "self-hosted unit cost vs volume", logx=True, logy=True)
ax.plot(volumes, unit, label="self-hosted, every line")
ax.axhline(payg * 1000, color="grey", ls="--", label="pay-as-you-go")
ax.axvline(d.crossover_tokens_per_month, color="grey", lw=0.8)
plots.legend(fig)

# %% [markdown]
# *Figure: the self-hosted unit cost against monthly volume (log-log), with pay-as-you-go
# dashed. Notice the falling staircase: each extra replica is a step. Left of the crossover
# (thin line) self-hosting costs more; with restricted data you pay it anyway, and every
# idle hour is a cost you are obliged to cut.*
#
# ## The six war stories, audited
#
# Each of the book's war stories is a plan that differs from the one above in the way the
# team got it wrong. `servelib.audit.audit(plan)` recomputes every figure and returns one
# finding per mistake: a stable code, the wrong and the right value, and why.

# %%
# NBVAL_CHECK_OUTPUT
for story in war_stories():
    print(f"== {story.title}: {story.plan.description}")
    print("\n".join(finding_lines(story.plan)[1:3]))
    assert sorted(f.code for f in audit(story.plan)) == sorted(story.expected)

# %% [markdown]
# The same audit runs from the command line on a plan file, and exits with status 1 when it
# finds a mistake (2 when the plan itself is invalid, naming the field):
#
# ```bash
# python -m servelib plans/story-break-even-moved.toml
# ```
#
# ## Self-test: find the mistakes first
#
# Three plans follow, each a variation of the sound one. Read each and write down the
# mistakes you see *before* running the audit cell after it (on the web page, its
# answers wait behind a toggle).
#
# **Plan A.** The same node, but the team counted 64 KV heads and claimed 22 conversations;
# the engine admits on the prompt length.
#
# **Plan B.** The same node, with TP=8 for a target of 30 conversations and a dedicated
# floor sized to the p95 of demand (the break-even is still 57%).
#
# **Plan C.** The same node with no working reserve (claiming 203 conversations),
# requests that can never fit left in the queue, and chat and batch on one endpoint.

# %%
quiz = {
    "A": dataclasses.replace(plan, claimed_concurrency=22, admission="prompt"),
    "B": dataclasses.replace(plan, target_concurrency=30, floor_percentile=95),
    "C": dataclasses.replace(plan, reserve_fraction=0.0, claimed_concurrency=203,
                             oversize_requests="queue", shared_tiers=True),
}
# Your codes, before you run the next cell:
my_answers = {"A": [...], "B": [...], "C": [...]}

# %% tags=["hide-output"]
# NBVAL_CHECK_OUTPUT
for name, p in quiz.items():
    print(f"Plan {name}: {', '.join(f.code for f in audit(p))}")
assert [len(audit(p)) for p in quiz.values()] == [2, 2, 3]

# %% [markdown]
# ## Summary: what good sounds like
#
# | claim | value |
# |---|---|
# | KV per token, 70B GQA in fp16 | {glue:text}`cap_kv_token` |
# | KV per 8k conversation | {glue:text}`cap_kv_seq` |
# | conversations on 8 x 80 GiB after weights and a 10% reserve | {glue:text}`cap_conc` |
# | batch-1 decode intensity against the ridge | {glue:text}`cap_ai1` vs {glue:text}`cap_ridge` FLOP/byte |
# | break-even of the commitment (capacity counted in tokens) at 50% / 10% output | {glue:text}`cap_be50` / {glue:text}`cap_be10` |
# | break-even of a gpt-4o PTU reserved monthly, at any mix | {glue:text}`cap_ptu_month` |
# | cheapest floor, the $(1 - u^*)$ quantile: the plan's capacity / PTUs monthly / yearly | {glue:text}`cap_p_star` / {glue:text}`cap_ptu_p_month` / {glue:text}`cap_ptu_p_year` |
# | self-hosting crossover on the stated assumptions, against gpt-4o / the same model hosted | {glue:text}`cap_crossover` / {glue:text}`cap_crossover_hosted` tokens a month |
#
# In a single breath: how many conversations a node holds is settled by memory, so work it
# out from the cache per token and what the weights leave; a batch-1 endpoint is slow
# because it reads every weight for one token, and the cure is batching rather than a
# bigger fleet; dedicated capacity covers demand up to the level exceeded a break-even
# share of the time, which is the median only when that share is one half, and
# pay-as-you-go takes the rest, so a spike costs money instead of failed requests; a
# break-even figure travels with the output mix it assumes and the way the capacity counts
# tokens, or not at all (counted in tokens it moves from 40% to 77% between a 50% and a
# 10% output mix; weighed at the price ratio, as a PTU is, it stays put and the PTU count
# moves); and self-hosting pays only when the GPUs stay busy enough to cover the people
# who run them, measured against the same model hosted elsewhere, except with restricted
# data, where it is the one admissible deployment and keeping it busy is a duty, not a
# choice.
#
# ## Exercises
#
# Each exercise states every constant it needs; the plan is the chapter's: 70e9 parameters
# in fp16 with Llama-3-70B's shape (80 layers, 8 KV heads of `head_dim` 128), 8 x H100 SXM
# of 80 GiB, TP=8, a 10% reserve; gpt-4o prices of \$2.50 and \$10 per million input and
# output tokens at a 25% output mix; \$13,140 a month for 120,000 tokens/min of any kind;
# \$2.50 per GPU-hour over 730 hours a month; \$180,000 per engineer-year. `check` says
# whether your answer is right. Solutions are behind the toggles: each works the numbers by
# hand, then confirms them with `servelib`.
#
# **cap-1.** How many conversations of 16,384 tokens does the node hold at once?

# %% tags=["hide-input"]
### BEGIN SOLUTION
budget = (8 * 80 * 2**30 - 2 * 70e9) * 0.9       # the node, less fp16 weights, less 10%
conversation = 2 * 80 * 8 * 128 * 2 * 16_384     # K and V, every layer, fp16
by_hand = int(budget // conversation)
answer = derive(dataclasses.replace(plan, context_len=16_384)).concurrency
print(f"{by_hand} conversations by hand, {answer} from servelib")
### END SOLUTION
check("cap-1", answer)

# %% [markdown]
# **cap-2.** Back at 8,192 tokens, the engine stores the KV cache in fp8 (1 byte per
# element; weights stay fp16). How many conversations fit?

# %% tags=["hide-input"]
### BEGIN SOLUTION
budget = (8 * 80 * 2**30 - 2 * 70e9) * 0.9
conversation = 2 * 80 * 8 * 128 * 1 * 8192        # one byte per element now
by_hand = int(budget // conversation)
answer = derive(dataclasses.replace(plan, kv_bytes_per_elem=1)).concurrency
print(f"{by_hand} conversations by hand, {answer} from servelib")
### END SOLUTION
check("cap-2", answer)

# %% [markdown]
# **cap-3.** The workload's output fraction becomes 30%. What is the commitment's
# break-even utilisation (a fraction), its capacity counted in tokens as in the plan?

# %% tags=["hide-input"]
### BEGIN SOLUTION
blended = 2.50 * (1 - 0.30) + 10.00 * 0.30       # dollars per 1M tokens of this mix
capacity_tokens = 120_000 * 60 * 730             # a month at full use, any kind
by_hand = 13_140 / (capacity_tokens / 1e6 * blended)   # the commitment over their value
answer = break_even_utilization(plan.monthly_commitment_usd,
                                plan.capacity_tokens_per_month, plan.usd_per_1k_input,
                                plan.usd_per_1k_output, 0.30)
print(f"{by_hand:.4f} by hand, {answer:.4f} from servelib")
### END SOLUTION
check("cap-3", answer)

# %% [markdown]
# **cap-4.** The node only needs to hold 100 conversations of 8,192 tokens at once. What is
# the smallest TP degree (dividing 8) whose replicas together hold them?

# %% tags=["hide-input"]
### BEGIN SOLUTION
conversation = 2 * 80 * 8 * 128 * 2 * 8192
for tp in (1, 2, 4, 8):
    room = (80 * 2**30 - 2 * 70e9 / tp) * 0.9            # per device, after its weights
    held = (8 // tp) * max(0, int(room // (conversation / tp)))   # every replica
    print(f"TP={tp}: {8 // tp} replica(s), {held} conversations")
    if held >= 100:
        break
answer = right_tp_degree(dataclasses.replace(plan, target_concurrency=100))
print(f"TP={tp} by hand, TP={answer} from servelib")
### END SOLUTION
check("cap-4", answer)

# %% [markdown]
# **cap-5.** Inference operations take one full engineer instead of a quarter. Where does
# self-hosting cross over pay-as-you-go now, in billions of tokens a month?

# %% tags=["hide-input"]
### BEGIN SOLUTION
monthly = 8 * 2.50 * 730 + 1 * 180_000 / 12       # the node's GPU-hours, the engineer
blended = 2.50 * 0.75 + 10.00 * 0.25              # pay-as-you-go, per 1M tokens
by_hand = monthly / blended / 1e3                 # millions of tokens / 1000 = billions
one_engineer = derive(dataclasses.replace(plan, engineering_fte=1))
answer = one_engineer.crossover_tokens_per_month / 1e9
print(f"{by_hand:.2f} B tokens a month by hand (one node carries them), "
      f"{answer:.2f} B from servelib")
### END SOLUTION
check("cap-5", answer)

# %% [markdown]
# **cap-6.** A plan claims 203 conversations (with the 10% reserve in its inputs), admits
# on the prompt length, runs static batches of chat replies of any length, and shares one
# endpoint between chat and overnight batch. How many distinct mistakes does it contain?

# %% tags=["hide-input"]
### BEGIN SOLUTION
mistakes = ["203 is the count without the reserve: 183 fit with it",
            "admitting on the prompt length lets answers outgrow the cache",
            "static batches wait for their longest reply",
            "overnight batch shares the endpoint that chat needs at once"]
mistaken = dataclasses.replace(plan, claimed_concurrency=203, admission="prompt",
                               batching="static", shared_tiers=True)
answer = len(audit(mistaken))
print(f"{len(mistakes)} mistakes by hand, {answer} found by the audit")
### END SOLUTION
check("cap-6", answer)

# %% [markdown]
# **cap-7.** Back at a 25% output mix: at which percentile of demand does the cheapest
# dedicated floor of the plan's capacity sit, overflow spilled to pay-as-you-go?

# %% tags=["hide-input"]
### BEGIN SOLUTION
blended = 2.50 * 0.75 + 10.00 * 0.25
u_star = 13_140 / (120_000 * 60 * 730 / 1e6 * blended)   # the break-even utilisation
by_hand = 100 * (1 - u_star)                  # the demand exceeded u* of the time
answer = cheapest_floor_percentile(derive(plan).break_even_utilization)
print(f"p{by_hand:.1f} by hand, p{answer:.1f} from servelib")
### END SOLUTION
check("cap-7", answer)
