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
# # Capacity economics: PAYG vs PTU vs self-hosting
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/llm-serving-book/serving-capacity-economics/blob/v0.1.0/notebooks/07_economics.ipynb)
#
# Three ways to pay for the same tokens: per token ({term}`PAYG`), per unit of reserved
# throughput ({term}`PTU`), or per GPU-hour and per engineer (self-hosting). Choosing
# between them is arithmetic, but the arithmetic has an input that teams forget to ask
# for: the **mix** of input and output tokens. The mix sets the price of an average token,
# how much a reservation carries, and so every break-even. This chapter derives the
# break-even of a commitment, sizes a dedicated floor on a realistic demand trace, and
# prices a self-hosted deployment from the serving model of the earlier chapters rather
# than from a guess.
#
# **You will be able to**
# 1. compute the {term}`blended price` of a workload and the break-even volume and utilisation of a commitment, and say why they move with the output mix;
# 2. explain why the tokens a PTU carries depend on the mix, and price hourly, monthly and yearly reservations against PAYG;
# 3. size a dedicated floor on a demand trace, with overflow {term}`spilled <Spillover>` to PAYG or refused, and find the cheapest floor;
# 4. derive a self-hosted unit cost from tokens per GPU-second, with the idle capacity and the engineering line itemised, and find where it crosses PAYG;
# 5. catch four beginner mistakes: a break-even quoted without its mix, a fixed tokens-per-PTU figure, a floor bought for the peak, and a self-hosting case that counts GPU-hours alone.

# %% tags=["hide-input"]
# Set-up. On Colab this installs servelib from the book's repository; elsewhere it is
# already installed (README). This chapter is arithmetic: no measurement needs a GPU.
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
print(f"running on {DEVICE}")

# %%
import numpy as np

from servelib import plots
from servelib.book import glue
from servelib.economics import (GPT_4O, GPT_4O_MINI, blended_price, break_even_tokens, break_even_utilization,
                                cheapest_floor, floor_at_percentile, payg_cost_usd, ptu_break_even_utilization,
                                ptu_monthly_cost_usd, ptu_tokens_per_minute, ptus_needed, replica_throughput,
                                spillover_cost)
from servelib.economics import scenarios as sc
from servelib.grading import check
from servelib.models import get_model
from servelib.widgets.economics import (break_even_calculator, break_even_figure, floor_calculator,
                                        floor_figure)

plots.apply_style()
C_IN, C_OUT = GPT_4O.usd_per_1k_input, GPT_4O.usd_per_1k_output     # USD per 1k tokens

# %% [markdown]
# ## The blended price of a mix
#
# A PAYG bill charges input tokens at $c_\text{in}$ and output tokens at $c_\text{out}$ per 1k. If a
# fraction $f$ of all tokens are output, an average token costs
#
# $$
# b(f) = c_\text{in}\,(1 - f) + c_\text{out}\, f .
# $$
#
# Output tokens cost more because each one is a decode step (previous chapters): gpt-4o
# lists \$2.50 per million input tokens and \$10 per million output tokens {cite}`openai_pricing`,
# a ratio of 4. So the same million tokens cost very different amounts depending on who
# writes them: a chat that answers at length, or an agent that pastes retrieved documents
# into its prompt and answers briefly.

# %%
# NBVAL_CHECK_OUTPUT
print(f"gpt-4o list: ${C_IN * 1000:.2f} in, ${C_OUT * 1000:.2f} out per 1M (ratio {GPT_4O.output_to_input_ratio:g})")
for f in (0.0, 0.1, 0.25, 0.5):
    print(f"output fraction {f:>4.0%}: blended ${blended_price(C_IN, C_OUT, f) * 1000:.2f} per 1M tokens")
b10, b50 = blended_price(C_IN, C_OUT, 0.1) * 1000, blended_price(C_IN, C_OUT, 0.5) * 1000
assert (round(b10, 2), round(b50, 2)) == (3.25, 6.25)

# %% tags=["remove-cell"]
glue("ec_blend10", f"${b10:.2f}")
glue("ec_blend50", f"${b50:.2f}")

# %% [markdown]
# {glue:text}`ec_blend10` per million at a 10% output mix, {glue:text}`ec_blend50` at 50%:
# almost a factor of two for the same model and the same list prices.
#
# ## Break-even: volume and utilisation
#
# A commitment costs $C$ a month whatever is used. Paying per token for the same traffic
# costs $b \cdot V / 1000$ for $V$ tokens. The two are equal at
#
# $$
# V^* = \frac{C}{b} \times 1000 \ \text{tokens a month},
# \qquad
# u^* = \frac{V^*}{\text{capacity}} = \frac{1000\,C}{b(f)\cdot \text{capacity}} .
# $$
#
# Below $u^*$ the commitment costs more than PAYG would have. The mix sits in the
# denominator: with capacity counted in tokens, $u^* \propto 1/b(f)$, and a falling output
# fraction *raises* the break-even. Going from 50% to 10% output multiplies it by
# $b(0.5)/b(0.1) = 6.25/3.25 = 1.92$ (the ratio is asserted in the next cell).
#
# The scenario: a dedicated commitment of \$13,140 a month for 120,000 tokens a minute
# (2,000 tokens/s, 5.26 billion tokens in a 730-hour month), which is \$2.50 per million
# tokens of capacity, priced against gpt-4o list prices. Its capacity is counted in
# tokens per minute whatever the mix, which is how a sizing sheet that treats a PTU as so
# many tokens a minute computes a PTU break-even; the next section shows what changes
# when the capacity itself depends on the mix.

# %%
# NBVAL_CHECK_OUTPUT
com = sc.COMMITMENT
print(f"commitment ${com.monthly_usd:,.0f}/month, capacity {com.capacity_tokens_per_minute:,.0f} tokens/min "
      f"= {com.capacity_tokens_per_month / 1e9:.3f} B tokens/month")
u = {}
for f in (sc.MIX_BEFORE, sc.MIX_AFTER):
    blended = blended_price(C_IN, C_OUT, f)
    u[f] = break_even_utilization(com.monthly_usd, com.capacity_tokens_per_month, C_IN, C_OUT, f)
    print(f"output {f:.0%}: break-even {break_even_tokens(com.monthly_usd, blended) / 1e9:.2f} B tokens "
          f"= {u[f]:.0%} utilisation")
assert (round(u[0.5] * 100), round(u[0.1] * 100)) == (40, 77)
assert abs(u[0.1] / u[0.5] - 6.25 / 3.25) < 1e-12 and round(u[0.1] / u[0.5], 2) == 1.92
assert (com.monthly_usd, com.capacity_tokens_per_minute) == (13_140, 120_000)
assert round(com.capacity_tokens_per_month / 1e9, 2) == 5.26
assert round(com.monthly_usd / com.capacity_tokens_per_month * 1e6, 2) == 2.50       # $ per 1M tokens of capacity

# %% tags=["remove-cell"]
glue("ec_be50", f"{u[0.5]:.0%}")
glue("ec_be10", f"{u[0.1]:.0%}")

# %% [markdown]
# ```{admonition} War story: the break-even that moved
# :class: warning
# The numbers behind this commitment were worked out for a chat product whose tokens were
# half output, and they said {glue:text}`ec_be50`. Months later the same team shipped
# agents that pasted retrieved documents into their prompts and answered in a line or two.
# Only a tenth of the tokens were now output, which put the break-even at
# {glue:text}`ec_be10`: by then the contract could not be undone.
# ```
#
# What it did to the bill, at a steady {glue:text}`ec_story_volume` tokens a month
# ({glue:text}`ec_story_load` of capacity): at the old mix the commitment saved money; at
# the new one the same tokens would have cost less on PAYG.

# %%
# NBVAL_CHECK_OUTPUT
volume = 3e9
for f in (sc.MIX_BEFORE, sc.MIX_AFTER):
    payg = payg_cost_usd(volume, blended_price(C_IN, C_OUT, f))
    print(f"output {f:.0%}: PAYG ${payg:>7,.0f} vs commitment ${com.monthly_usd:,.0f} -> "
          f"{'saves' if payg > com.monthly_usd else 'loses'} ${abs(payg - com.monthly_usd):,.0f}/month")
assert payg_cost_usd(volume, blended_price(C_IN, C_OUT, 0.1)) < com.monthly_usd
assert payg_cost_usd(volume, blended_price(C_IN, C_OUT, 0.5)) > com.monthly_usd

# %% tags=["remove-cell"]
glue("ec_story_volume", f"{volume / 1e9:.0f} billion")
glue("ec_story_load", f"{volume / com.capacity_tokens_per_month:.0%}")

# %% [markdown]
# **Takeaway:** a break-even without its mix is not a number. Quote it as
# "{glue:text}`ec_be50` at a 50% output mix", and recompute it when the workload changes shape.
#
# ### Calculator: break-even against the output mix
#
# Move the mix, the commitment or the prices. (The calculator runs in Jupyter or Colab;
# the book shows its figure below.)

# %% tags=["remove-output"]
break_even_calculator()

# %%
fig = break_even_figure(ptu_terms=("monthly", "yearly"))

# %% [markdown]
# *Figure: break-even utilisation of the \$13,140 commitment against the output fraction
# (solid), and of gpt-4o PTUs at Azure's regional list prices (dashed, next section). Notice how steeply the
# solid line rises as output falls below 20%: most of the movement lives where agents and
# retrieval push the mix.*
#
# ## Tokens per PTU is not a constant
#
# A PTU is sold as throughput, and its datasheet figure is in *input* tokens per minute:
# about 2,500 for gpt-4o {cite}`azure_ptu`. An output token counts as $w$ input tokens
# toward that throughput (for recent models $w$ equals the output:input price ratio, 4).
# So $n$ PTUs carry
#
# $$
# \text{tokens per minute} = \frac{n \cdot K}{(1 - f) + w f}
# $$
#
# tokens of a mix with output fraction $f$. What a PTU costs depends on the deployment
# type; the rates used here are Azure's list prices for a *regional* deployment: \$2 per
# PTU-hour with no reservation, \$260 per PTU-month reserved monthly, about \$221 reserved
# for a year {cite}`azure_openai_pricing`. Deployment types also differ in how many PTUs
# they sell at once: a *Global* gpt-4o deployment starts at 15 PTUs and grows in steps of 5,
# a regional one at 50 in steps of 50 {cite}`azure_ptu`. Prices below are always the regional
# ones; where a count of PTUs is sized, the text says which rule it uses.

# %%
# NBVAL_CHECK_OUTPUT
print(f"{'output':>7}{'tokens/min per PTU':>20}{'hourly':>9}{'monthly':>9}{'yearly':>9}   (break-even utilisation)")
for f in (0.0, 0.1, 0.25, 0.5):
    row = [ptu_break_even_utilization(f, t) for t in ("hourly", "monthly", "yearly")]
    print(f"{f:>7.0%}{ptu_tokens_per_minute(1, f):>20,.0f}" + "".join(f"{x:>9.0%}" for x in row))
per_month = {t: ptu_monthly_cost_usd(1, t) for t in ("hourly", "monthly", "yearly")}
print("cost per PTU-month: " + ", ".join(f"{t} ${v:,.0f}" for t, v in per_month.items()))
pure_vs_half = ptu_tokens_per_minute(1, 0.0) / ptu_tokens_per_minute(1, 0.5)
be_month, be_year = (ptu_break_even_utilization(0.1, t) for t in ("monthly", "yearly"))
assert round(ptu_tokens_per_minute(1, 0.5)) == 1000 and pure_vs_half == 2.5
assert (round(be_month, 2), round(be_year, 2)) == (0.95, 0.81)
assert all(abs(ptu_break_even_utilization(f, "monthly") - be_month) < 1e-12 for f in (0.0, 0.25, 0.5))

# %% tags=["remove-cell"]
glue("ec_ptu_pure_vs_half", f"{pure_vs_half:g}")
glue("ec_ptu_be_month", f"{be_month:.0%}")
glue("ec_ptu_be_year", f"{be_year:.0%}")

# %% [markdown]
# Two lessons. First, one PTU carries {glue:text}`ec_ptu_pure_vs_half` times as many
# tokens of pure input as of a 50% output mix: the mix decides how many to buy. Second,
# because the weight here equals the price ratio, a token's PAYG price and the capacity it
# uses scale together, and the break-even in PTU utilisation stops depending on the mix:
# {glue:text}`ec_ptu_be_month` on a monthly reservation and {glue:text}`ec_ptu_be_year` on
# a yearly one. At regional list prices a gpt-4o PTU barely pays for itself
# on cost alone (hourly, never); teams buy them for guaranteed throughput and latency.
# Where the weight differs from the price ratio, the mix moves the break-even again:

# %%
# NBVAL_CHECK_OUTPUT
for w in (2, 4, 6):
    lo, hi = (ptu_break_even_utilization(f, "yearly", output_weight=w) for f in (0.1, 0.5))
    print(f"output weight {w}: yearly break-even {lo:.0%} at 10% output, {hi:.0%} at 50%")

# %% [markdown]
# ## A floor and spillover, on a realistic trace
#
# Real demand is not flat. Below is a seeded month of traffic, tokens per minute: a daily
# cycle peaking mid-afternoon, quieter weekends, bursts on top (batch jobs, retries,
# agent loops) and noise. Its mix is {glue:text}`ec_mix_trace` output.

# %%
# NBVAL_CHECK_OUTPUT
demand = sc.trace()
p50, p90, peak = np.percentile(demand, 50), np.percentile(demand, 90), demand.max()
print(f"{demand.size:,} minutes; mean {demand.mean():,.0f}, p50 {p50:,.0f}, p90 {p90:,.0f}, "
      f"peak {peak:,.0f} tokens/min")
print(f"mean / peak = {demand.mean() / peak:.0%}")
assert round(demand.mean()) == 60_000 and round(demand.mean() / peak, 2) == 0.22

# %% tags=["remove-cell"]
glue("ec_mix_trace", f"{sc.MIX_TRACE:.0%}")

# %%
week = demand[: 7 * 1440]
fig, ax = plots.new_axes("day", "demand (1,000 tokens/min)", "first week of the seeded trace")
ax.plot(np.arange(week.size) / 1440, week / 1e3, lw=0.4)
for q, label in ((p50, "p50"), (peak, "peak")):
    ax.axhline(q / 1e3, color="black", lw=0.8, ls="--")
    plots.label(ax, label, (7, q / 1e3))

# %% [markdown]
# *Figure: one week of demand. Notice the weekend dip (days 5 and 6) and the bursts that
# reach several times the daily level for tens of minutes: capacity sized for them sits
# idle nearly all the time.*
#
# A dedicated floor of $F$ tokens/min costs $p$ per token/min per month; demand above it
# spills to PAYG at $b$ per token (or is refused). Raising the floor by one token/min
# costs $p$ and saves $b$ for every minute in which demand exceeds the floor. The cost is
# lowest where those balance:
#
# $$
# \begin{aligned}
# \Pr[\text{demand} > F^*] &= \frac{p}{b \cdot \text{minutes per month}} = u^* \\
# \Longrightarrow \quad F^* &= \text{the } (1 - u^*) \text{ quantile of demand}.
# \end{aligned}
# $$
#
# So the cheapest floor is the demand level exceeded a fraction $u^*$ of the time. With a
# break-even near one half that level is the median: **buy dedicated capacity for the
# typical minute (p50) and let the excess go to PAYG**. Our capacity price (\$2.50 per
# million tokens of capacity) and a {glue:text}`ec_mix_trace` output mix give
# $u^* =$ {glue:text}`ec_u_trace`, so the optimum is {glue:text}`ec_best_pct`, and p50 is
# close to it.

# %%
# NBVAL_CHECK_OUTPUT
blended = blended_price(C_IN, C_OUT, sc.MIX_TRACE)
unit = com.usd_per_tpm_month
options = {"no floor (all PAYG)": spillover_cost(demand, 0, unit, blended),
           "floor at p50, spill": spillover_cost(demand, p50, unit, blended, spill=True),
           "floor at p50, refuse": spillover_cost(demand, p50, unit, blended, spill=False),
           "floor at peak": spillover_cost(demand, peak, unit, blended)}
best = cheapest_floor(demand, unit, blended)
best_pct = f"p{100 * np.mean(demand <= best.floor_tpm):.0f}"
options[f"cheapest floor ({best_pct}), spill"] = best
print(f"{'':<28}{'floor tokens/min':>17}{'$/month':>10}{'availability':>14}{'floor busy':>12}")
for name, r in options.items():
    print(f"{name:<28}{r.floor_tpm:>17,.0f}{r.total_usd:>10,.0f}{r.availability:>14.1%}"
          f"{(f'{r.floor_utilization:.0%}' if r.floor_tpm else '-'):>12}")
u_trace = com.break_even_utilization(sc.MIX_TRACE)
print(f"break-even utilisation of the capacity at this mix: {u_trace:.0%}")
assert options["floor at p50, spill"].total_usd < options["no floor (all PAYG)"].total_usd
assert options["floor at p50, spill"].availability == 1 and options["floor at p50, refuse"].availability < 0.8
assert round(u_trace, 2) == 0.57 and best_pct == "p43"
sp, pk, nofloor = options["floor at p50, spill"], options["floor at peak"], options["no floor (all PAYG)"]
refuse = options["floor at p50, refuse"]
assert (round(sp.total_usd), round(pk.total_usd), round(nofloor.total_usd)) == (8_946, 29_477, 11_498)
assert round(refuse.availability, 3) == 0.747

# %% tags=["remove-cell"]
glue("ec_u_trace", f"{u_trace:.0%}")
glue("ec_best_pct", best_pct)
glue("ec_p50_cost", f"${sp.total_usd:,.0f}")
glue("ec_peak_cost", f"${pk.total_usd:,.0f}")
glue("ec_payg_cost", f"${nofloor.total_usd:,.0f}")
glue("ec_refuse_avail", f"{refuse.availability:.1%}")
glue("ec_refuse_lost", f"{1 - refuse.availability:.0%}")

# %% [markdown]
# The floor at p50 with spill costs {glue:text}`ec_p50_cost` a month at full availability;
# all-PAYG costs {glue:text}`ec_payg_cost`, and a floor at the peak
# {glue:text}`ec_peak_cost`. Refusing the overflow instead of spilling it is cheaper still,
# but serves only {glue:text}`ec_refuse_avail` of the tokens: {glue:text}`ec_refuse_lost`
# of the demand meets throttling errors. With spill, a burst shows up on the invoice
# instead of in the error logs.
#
# ```{admonition} War story: the commitment sized to peak
# :class: warning
# The capacity was reserved for a full year, in the amount the busiest minute needed. Over
# that year it averaged {glue:text}`ec_peak_util` busy, while paying for itself would have
# taken {glue:text}`ec_u_trace`. That second figure appeared in no document before the
# signature, and neither did the workload's split between input and output tokens, which
# it depends on.
# ```
#
# On our trace, capacity sized to the peak is busy on average mean/peak of the time,
# {glue:text}`ec_peak_util`, and its break-even at the {glue:text}`ec_mix_trace` mix is
# {glue:text}`ec_u_trace`. What the year cost against PAYG, and against a p50 floor with
# spill:

# %%
# NBVAL_CHECK_OUTPUT
sized = com.sized_for(peak)
util = demand.mean() / peak
over_payg = 12 * (pk.total_usd - nofloor.total_usd)
over_p50 = 12 * (pk.total_usd - sp.total_usd)
print(f"peak-sized commitment: {sized.capacity_tokens_per_minute:,.0f} tokens/min for ${sized.monthly_usd:,.0f}/month")
print(f"utilisation {util:.0%} against a break-even of {sized.break_even_utilization(sc.MIX_TRACE):.0%}")
print(f"a year's overspend: ${over_payg:,.0f} vs PAYG, ${over_p50:,.0f} vs a p50 floor with spill")
assert round(util, 2) == 0.22 and round(sized.break_even_utilization(sc.MIX_TRACE), 2) == 0.57
assert round(over_payg, -3) == 216_000

# %% tags=["remove-cell"]
glue("ec_overspend", f"${over_payg:,.0f}")
glue("ec_peak_util", f"{util:.0%}")

# %% [markdown]
# ### Calculator: the floor's percentile against cost and availability

# %% tags=["remove-output"]
floor_calculator()

# %%
fig = floor_figure(50)

# %% [markdown]
# *Figure: monthly cost of a floor at each percentile of the trace's demand, with overflow
# spilled (blue) or refused (orange), and the availability when refused (red, right
# axis). Notice that the spill curve is flat and lowest around the median and
# climbs steeply near the peak, while availability without spill only reaches 100% there.*
#
# ## Self-hosting: a cost per token derived from the serving model
#
# A self-hosted deployment costs the same every month whatever it serves, so its unit cost
# is
#
# $$
# \text{unit cost} = \frac{\text{fixed monthly cost}}{\text{monthly tokens}} \times 1000
# \quad \text{USD per 1k tokens},
# $$
#
# and the fixed cost has two lines: GPU-hours and people. How many GPUs a volume needs
# follows from tokens per GPU-second, which the earlier chapters let us *derive*: decode
# throughput from the roofline model at a stated batch and context, with the batch capped
# at the concurrency the KV cache allows, and prefill throughput for the input tokens.
# The replica time-shares the two, so a token of a mix takes
# $f / \text{decode rate} + (1 - f) / \text{prefill rate}$ seconds.
#
# The deployment (every assumption is in `servelib.economics.scenarios.SELF_HOST`):

# %%
# NBVAL_CHECK_OUTPUT
sh = sc.SELF_HOST
thr = sh.throughput()
print(f"{sh.model} bf16, TP={sh.tp_degree} x {sh.gpu}, context {sh.context_len:,}, output fraction {sh.output_fraction:.0%}")
print(f"batch {thr.batch} (requested {thr.batch_requested}, KV cache allows {thr.max_batch})")
print(f"decode {thr.decode_tokens_per_s:,.0f} tokens/s, prefill {thr.prefill_tokens_per_s:,.0f} tokens/s per replica")
print(f"mix: {thr.tokens_per_s:,.0f} tokens/s per replica = {thr.tokens_per_gpu_s:,.0f} tokens per GPU-second")
print(f"GPUs at ${sh.usd_per_gpu_hour:.2f}/hour, >= {sh.min_replicas} replicas, average load <= {sh.max_utilization:.0%}; "
      f"engineer ${sh.usd_per_engineer_year:,.0f}/year loaded")
print(f"PAYG alternative: gpt-4o at ${sh.payg_usd_per_1k * 1000:.3f} per 1M tokens")
assert thr.batch == 64 and round(thr.tokens_per_gpu_s, -1) == 2690

# %% [markdown]
# These are roofline bounds: a real engine reaches some fraction of them. The crossovers
# below hardly depend on it, because at these volumes the deployment is far from full;
# that is itself the lesson of the next war story.
#
# ```{admonition} War story: the self-hosting case that won and then lost
# :class: warning
# On paper the deployment beat PAYG with room to spare, because the only cost the
# business case listed was GPU-hours. A year and a half in, keeping it running (upgrades,
# incidents, on-call rotas, capacity planning) had become the full-time job of two
# platform engineers. Priced with their salaries, each token cost about
# {glue:text}`ec_three_x` what the business case had promised.
# ```

# %%
# NBVAL_CHECK_OUTPUT
t = sh.tco(sc.STORY_TOKENS_PER_MONTH, n_engineers=sc.ENGINEERS_ACTUAL)
print(f"{sc.STORY_TOKENS_PER_MONTH / 1e9:.0f} B tokens/month on {t.n_gpus} GPUs ({t.n_replicas} replicas), "
      f"utilisation {t.utilization:.1%}")
print(f"  GPU-hours             ${t.gpu_usd:>8,.0f}   (of which idle capacity ${t.idle_usd:,.0f})")
print(f"  engineering, {sc.ENGINEERS_ACTUAL} people  ${t.engineering_usd:>8,.0f}")
print(f"  total                 ${t.total_usd:>8,.0f}")
print(f"unit cost: business case ${t.gpu_only_usd_per_1k * 1000:.2f}, true ${t.unit_cost_usd_per_1k * 1000:.2f}, "
      f"PAYG ${sh.payg_usd_per_1k * 1000:.2f} per 1M tokens")
ratio = t.unit_cost_usd_per_1k / t.gpu_only_usd_per_1k
print(f"true / business case = {ratio:.2f}x")
eng_vs_gpu = t.engineering_usd / t.gpu_usd
print(f"engineering / GPU-hours = {eng_vs_gpu:.1f}x")
assert t.gpu_only_usd_per_1k < sh.payg_usd_per_1k < t.unit_cost_usd_per_1k and round(ratio) == 3
assert round(eng_vs_gpu, 1) == 2.1

# %% tags=["remove-cell"]
glue("ec_three_x", f"{ratio:.1f}x")
glue("ec_idle", f"{1 - t.utilization:.0%}")
glue("ec_eng_vs_gpu", f"{eng_vs_gpu:.1f}")

# %% [markdown]
# The GPU line won: {glue:text}`ec_idle` of the GPU-hours were idle and it still beat PAYG.
# The engineering line, {glue:text}`ec_eng_vs_gpu` times the GPU bill, turned the win into
# {glue:text}`ec_three_x` the unit cost.
#
# ### Where self-hosting crosses PAYG
#
# PAYG grows linearly with volume; self-hosting is a staircase (a replica at a time) on
# top of the engineering line. With the business case's quarter of an engineer, the two
# meet between 4 and 5 billion tokens a month:

# %%
# NBVAL_CHECK_OUTPUT
cross = {e: sh.crossover(n_engineers=e) for e in (0, sc.ENGINEERS_PLANNED, 1, sc.ENGINEERS_ACTUAL)}
for e, v in cross.items():
    print(f"{e:>5g} engineers on inference: self-hosting wins above {v / 1e9:5.2f} B tokens/month")
assert 4e9 <= cross[sc.ENGINEERS_PLANNED] <= 5e9   # 4-5 B with the planned staff
assert round(cross[sc.ENGINEERS_PLANNED] / 1e9, 2) == 4.19 and round(cross[sc.ENGINEERS_ACTUAL] / 1e9, 2) == 10.19

# %% tags=["remove-cell"]
glue("ec_cross", f"{cross[sc.ENGINEERS_PLANNED] / 1e9:.1f} B")
glue("ec_cross2", f"{cross[sc.ENGINEERS_ACTUAL] / 1e9:.1f} B")

# %%
vols = np.linspace(0.2e9, 60e9, 300)
fig, ax = plots.new_axes("monthly volume (billion tokens)", r"monthly cost (\$1,000)",
                         "self-hosted Llama-3-70B vs gpt-4o PAYG, 25% output")
ax.plot(vols / 1e9, [payg_cost_usd(v, sh.payg_usd_per_1k) / 1e3 for v in vols], label="PAYG (gpt-4o)")
for e in (sc.ENGINEERS_PLANNED, sc.ENGINEERS_ACTUAL):
    ax.plot(vols / 1e9, [sh.tco(v, n_engineers=e).total_usd / 1e3 for v in vols], label=f"self-hosted, {e:g} engineers")
plots.legend(fig)

# %% [markdown]
# *Figure: monthly cost against volume. Notice the staircase (a new 4-GPU replica each time
# average load would pass 60%) and that the engineering line shifts the whole staircase
# up: the crossover moves from {glue:text}`ec_cross` to {glue:text}`ec_cross2` tokens a
# month. Beyond the crossover every extra token is cheap, so the case for self-hosting
# stands or falls on how busy the GPUs will be.*
#
# ### Restricted data: when the arithmetic becomes an obligation
#
# Some data may not leave the organisation's own hardware. Then there is no PAYG to compare
# with and no cost decision to make: self-hosting is the only admissible option. The
# utilisation arithmetic does not go away; it becomes the job. The same 20 billion tokens a
# month served one request at a time, or with the continuous batching of the earlier
# chapters:

# %%
# NBVAL_CHECK_OUTPUT
restricted = 20e9
for b in (1, 64):
    r = sh.tco(restricted, n_engineers=sc.ENGINEERS_ACTUAL, batch=b)
    print(f"batch {b:>2}: {sh.throughput(b).tokens_per_gpu_s:>6,.0f} tokens/GPU-s -> {r.n_gpus:>3} GPUs, "
          f"${r.total_usd:>9,.0f}/month, ${r.unit_cost_usd_per_1k * 1000:.2f} per 1M tokens")
one, batched = (sh.tco(restricted, n_engineers=sc.ENGINEERS_ACTUAL, batch=b) for b in (1, 64))
assert one.n_gpus > 10 * batched.n_gpus

# %% tags=["remove-cell"]
glue("ec_batch_gpus", f"{one.n_gpus / batched.n_gpus:.0f}x")
glue("ec_batch_cost", f"{one.total_usd / batched.total_usd:.1f}x")

# %% [markdown]
# Same model, same kind of GPU, same people: the batch size (a serving-stack setting)
# decides {glue:text}`ec_batch_gpus` the GPUs and {glue:text}`ec_batch_cost` the bill. When self-hosting is an obligation, keeping the
# deployment busy is the obligation.
#
# ## Beginner mistakes, wrong and right
#
# **A break-even quoted without its mix.** Averaging the two list prices, or quoting a
# colleague's figure, silently assumes a mix. The average of \$2.50 and \$10 is the blended
# price of a 50% mix; an agent workload at 10% output has a very different break-even.

# %%
# NBVAL_CHECK_OUTPUT
naive = (C_IN + C_OUT) / 2                    # "the price of a token": a 50% mix in disguise
wrong = break_even_tokens(com.monthly_usd, naive) / com.capacity_tokens_per_month
right = com.break_even_utilization(0.1)
print(f"wrong (mean of list prices): break-even {wrong:.0%}   right (10% output): {right:.0%}")
assert round(wrong, 2) == 0.40 and round(right, 2) == 0.77

# %% [markdown]
# **A fixed tokens-per-PTU figure.** Sizing 80,000 tokens/min at a 25% output mix with the
# datasheet's 2,500 tokens/min per PTU, as if every token were an input token, buys too
# few (both counts use the Global deployment rule: at least 15 PTUs, in steps of 5): at this mix they carry well under the load, and the rest is throttled.

# %%
# NBVAL_CHECK_OUTPUT
load, f = 80_000, 0.25
wrong_n = ptus_needed(load, 0.0)                                  # every token treated as input
right_n = ptus_needed(load, f)
print(f"wrong: {wrong_n} PTUs carry {ptu_tokens_per_minute(wrong_n, f):,.0f} tokens/min at this mix")
print(f"right: {right_n} PTUs carry {ptu_tokens_per_minute(right_n, f):,.0f} tokens/min")
assert ptu_tokens_per_minute(wrong_n, f) < load <= ptu_tokens_per_minute(right_n, f)

# %% [markdown]
# **A floor bought for the peak.** Both serve every token; one pays for the busiest
# minute's capacity in every minute of the month.

# %%
# NBVAL_CHECK_OUTPUT
print(f"wrong (floor at peak)    : ${pk.total_usd:,.0f}/month, availability {pk.availability:.0%}")
print(f"right (floor at p50+spill): ${sp.total_usd:,.0f}/month, availability {sp.availability:.0%}")
assert sp.total_usd < pk.total_usd / 3 and sp.availability == pk.availability == 1

# %% [markdown]
# **A self-hosting case that counts GPU-hours alone.** Leave out the people and the
# crossover comes out at less than a third of the one with the team that runs it.

# %%
# NBVAL_CHECK_OUTPUT
print(f"wrong (GPU-hours only)      : crossover {cross[0] / 1e9:.1f} B tokens/month")
print(f"right (with {sc.ENGINEERS_ACTUAL} engineers)      : crossover {cross[sc.ENGINEERS_ACTUAL] / 1e9:.1f} B tokens/month")
assert cross[sc.ENGINEERS_ACTUAL] > 3 * cross[0]

# %% [markdown]
# ## Summary: the numbers to carry
#
# | what | value |
# |---|---|
# | gpt-4o blended, 10% / 50% output | {glue:text}`ec_blend10` / {glue:text}`ec_blend50` per 1M tokens |
# | break-even of the \$13,140 commitment, 50% / 10% output | {glue:text}`ec_be50` / {glue:text}`ec_be10` |
# | peak-sized commitment, a year against PAYG | {glue:text}`ec_overspend` overspent |
# | floor at p50 with spill / at peak / none | {glue:text}`ec_p50_cost` / {glue:text}`ec_peak_cost` / {glue:text}`ec_payg_cost` a month |
# | self-hosting, true vs GPU-hours-only unit cost | {glue:text}`ec_three_x` |
# | self-hosting crosses PAYG | {glue:text}`ec_cross` tokens a month (a quarter engineer), {glue:text}`ec_cross2` (two) |
#
# A break-even is a pair: a utilisation *and* the output mix it was computed at. Buy
# dedicated capacity for the typical minute and send the excess to PAYG, so that bursts
# cost money rather than errors. Self-hosting pays only if the GPUs stay busy, and the
# salaries of the people who run it usually settle the question.
#
# ## Exercises
#
# Each exercise states every constant it needs. Prices are list prices: gpt-4o \$2.50 /
# \$10 and gpt-4o-mini \$0.15 / \$0.60 per 1M input / output tokens; a regional gpt-4o PTU
# costs \$260 a month (monthly reservation) or \$221 (yearly); a month has 730 hours.
#
# **ec-1.** What is the blended price of gpt-4o-mini, in dollars per million tokens, for a
# workload whose tokens are 20% output?

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = blended_price(GPT_4O_MINI.usd_per_1k_input, GPT_4O_MINI.usd_per_1k_output, 0.2) * 1000
### END SOLUTION
check("ec-1", answer)

# %% [markdown]
# **ec-2.** A team reserves 50 gpt-4o PTUs monthly in a regional deployment. At a 30% output mix, how many tokens a
# month must it send before the reservation costs no more than PAYG?

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = break_even_tokens(ptu_monthly_cost_usd(50, "monthly"), blended_price(C_IN, C_OUT, 0.3))
### END SOLUTION
check("ec-2", answer)

# %% [markdown]
# **ec-3.** A gpt-4o PTU sustains 2,500 input tokens a minute and an output token counts as
# 4 input tokens. The deployment is Global: it starts at 15 PTUs and grows in steps of 5.
# How many PTUs carry 80,000 tokens a minute at a 20% output mix? (Only the sizing rule
# matters here; no price is involved.)

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = ptus_needed(80_000, 0.2, min_ptus=15, step=5)
### END SOLUTION
check("ec-3", answer)

# %% [markdown]
# **ec-4.** With the same tokens per PTU, what is the break-even utilisation (a fraction)
# of a gpt-4o PTU reserved for a year at the regional rate against gpt-4o PAYG at a 20%
# output mix?

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = ptu_break_even_utilization(0.2, "yearly")
### END SOLUTION
check("ec-4", answer)

# %% [markdown]
# **ec-5.** On the chapter's trace (`servelib.economics.scenarios.trace()`: 30 days,
# 60,000 tokens/min on average, seed 7), dedicated capacity costs \$2.50 per million tokens
# it can carry a month (\$0.1095 per token/min per month) and overflow spills to gpt-4o
# PAYG at a 25% output mix. What does a floor at the median of demand cost a month, in
# dollars, floor and spill together?

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = spillover_cost(demand, floor_at_percentile(demand, 50), com.usd_per_tpm_month,
                        blended_price(C_IN, C_OUT, 0.25)).total_usd
### END SOLUTION
check("ec-5", answer)

# %% [markdown]
# **ec-6.** The self-hosted deployment of this chapter (Llama-3-70B, 4 x H100 per replica
# at \$2.50 per GPU-hour, batch 64, 4,096-token contexts, at least 2 replicas, average
# load at most 60%, 25% output mix, an engineer at \$180,000 a year) is run by one full-time
# engineer. Above what monthly volume, in tokens, does it cost no more than gpt-4o PAYG?

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = sh.crossover(n_engineers=1)
### END SOLUTION
check("ec-6", answer)

# %% [markdown]
# **ec-7.** Llama-3-8B in bf16 on one L4 (24 GiB, 300 GB/s, 121 TFLOP/s), 2,048-token
# contexts with a 10% memory reserve, a requested batch of 48, a 20% output mix. Using the
# roofline model for decode and prefill and capping the batch at what the KV cache allows,
# how many tokens per GPU-second does it serve?

# %% tags=["hide-input"]
### BEGIN SOLUTION
answer = replica_throughput(get_model("llama-3-8b"), "l4", batch=48, context_len=2048,
                            output_fraction=0.2).tokens_per_gpu_s
### END SOLUTION
check("ec-7", answer)
