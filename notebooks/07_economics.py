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
# for: the **mix** of input and output tokens. The mix sets the price of an average token
# and how many tokens a reservation carries; whether it then moves the break-even or the
# number of units to buy depends on how the seller counts capacity, a second question
# teams forget. This chapter derives the break-even of a commitment once for both cases,
# sizes a dedicated floor on a realistic demand trace, and prices a self-hosted deployment
# from the serving model of the earlier chapters rather than from a guess, against the
# same model hosted by a provider as well as against the closed model it would replace.
#
# **You will be able to**
# 1. compute the {term}`blended price` of a workload and the break-even volume and utilisation of a commitment, and say when the output mix moves the break-even and when it moves the capacity to buy instead;
# 2. explain why the tokens a PTU carries depend on the mix, price hourly, monthly and yearly reservations against PAYG, and account for cached-input and batch discounts;
# 3. size a dedicated floor on a demand trace, with overflow {term}`spilled <Spillover>` to PAYG or refused, and derive the cheapest floor: the $(1 - u^*)$ quantile of demand;
# 4. derive a self-hosted unit cost from tokens per GPU-second, with the idle capacity and the engineering line itemised, and find where it crosses PAYG for the same model and for a different one;
# 5. catch four beginner mistakes: a break-even quoted without its mix, a fixed tokens-per-PTU figure, a floor bought for the peak (or at p50 by rule), and a self-hosting case that counts GPU-hours alone.

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

# %% tags=["hide-input"]
import math

import numpy as np

from servelib import plots
from servelib.book import glue, table
from servelib.economics import (AZURE_PTU, GPT_4O, GPT_4O_MINI, MINUTES_PER_MONTH,
                                blended_price, break_even_tokens,
                                break_even_utilization, capacity_units_per_token,
                                cheapest_floor, cheapest_floor_percentile,
                                floor_at_percentile, floor_break_even_utilization,
                                payg_cost_usd, ptu_break_even_utilization,
                                ptu_monthly_cost_usd, ptu_tokens_per_minute,
                                ptu_usd_per_tpm_month, ptus_needed, replica_throughput,
                                spillover_cost)
from servelib.economics import scenarios as sc
from servelib.economics.prices import (GPT_4O_INPUT_TPM_PER_PTU,
                                       GPT_4O_PTU_MIN_REGIONAL, PTU_OUTPUT_TOKEN_WEIGHT)
from servelib.grading import check
from servelib.models import get_model
from servelib.units import GiB
from servelib.widgets.economics import (break_even_calculator, break_even_figure,
                                        floor_calculator, floor_figure)

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
print(f"gpt-4o list: ${C_IN * 1000:.2f} in, ${C_OUT * 1000:.2f} out per 1M tokens "
      f"(ratio {GPT_4O.output_to_input_ratio:g})")
rows = [(f, blended_price(C_IN, C_OUT, f) * 1000) for f in (0.0, 0.1, 0.25, 0.5)]
print(table(rows, ["output fraction", "blended $ per 1M tokens"], [".0%", ".2f"]))
b10, b50 = (blended_price(C_IN, C_OUT, f) * 1000 for f in (0.1, 0.5))

# %% tags=["remove-cell"]
assert (round(b10, 2), round(b50, 2)) == (3.25, 6.25)
glue("ec_blend10", f"${b10:.2f}")
glue("ec_blend50", f"${b50:.2f}")

# %% [markdown]
# {glue:text}`ec_blend10` per million at a 10% output mix, {glue:text}`ec_blend50` at 50%:
# almost a factor of two for the same model and the same list prices.
#
# ## Break-even: volume, then utilisation
#
# A commitment costs $C$ a month whatever is used. Paying per token for the same traffic
# costs $b(f) \cdot V / 1000$ for $V$ tokens. The two are equal at the **break-even volume**
#
# $$
# V^* = \frac{1000\, C}{b(f)} \ \text{tokens a month},
# $$
#
# which always moves with the mix, because the blended price does. The
# {term}`break-even utilisation <Break-even utilisation>` is that volume as a share of the
# capacity, and here a second question enters: *how does the seller count capacity?* Say
# the commitment sustains $K$ tokens of capacity a month and one output token uses $w$ of
# them (an input token one). An average token of the mix uses $(1 - f) + w f$, so
#
# $$
# u^* = \frac{V^* \,[(1 - f) + w f]}{K}
#     = \frac{1000\, C}{K\, c_\text{in}} \cdot \frac{(1 - f) + w f}{(1 - f) + r f},
# \qquad r = \frac{c_\text{out}}{c_\text{in}} .
# $$
#
# Two cases cover what is sold:
#
# * **Capacity counted in tokens of any kind** ($w = 1$): a contract for so many tokens a
#   minute, or a sizing sheet that treats a PTU as a fixed tokens-per-minute figure. Then
#   $u^* \propto 1/b(f)$: **the mix moves the break-even**, and a falling output fraction
#   raises it, by $b(0.5)/b(0.1) = 6.25/3.25 = 1.92$ from a 50% to a 10% mix.
# * **Capacity in input-equivalent tokens with output weighed at the price ratio**
#   ($w = r$): an Azure PTU of gpt-4.1 or later {cite}`azure_ptu`. The two factors cancel,
#   $u^* = 1000\,C / (K c_\text{in})$ depends on prices alone, and **the mix moves the capacity
#   instead**: $K / [(1 - f) + w f]$ tokens, so the number of units a load needs.
#
# With $1 < w < r$ the break-even still moves, less than with $w = 1$; with $w > r$ it moves
# the other way (the weight sweep below shows both).
#
# The scenario: a dedicated commitment of \$13,140 a month for 120,000 tokens a minute of
# any kind (2,000 tokens/s, 5.26 billion tokens in a 730-hour month), which is \$2.50 per
# million tokens of capacity, priced against gpt-4o list prices. This is the first case:

# %%
# NBVAL_CHECK_OUTPUT
com = sc.COMMITMENT
print(f"commitment ${com.monthly_usd:,.0f}/month, capacity "
      f"{com.capacity_tokens_per_minute:,.0f} tokens/min "
      f"= {com.capacity_tokens_per_month / 1e9:.3f} B tokens/month")
w = GPT_4O.output_to_input_ratio
u, rows = {}, []
for f in (sc.MIX_BEFORE, sc.MIX_AFTER):
    blended = blended_price(C_IN, C_OUT, f)
    u[f] = break_even_utilization(com.monthly_usd, com.capacity_tokens_per_month,
                                  C_IN, C_OUT, f)
    rows.append((f, break_even_tokens(com.monthly_usd, blended) / 1e9, u[f],
                 com.break_even_utilization(f, output_weight=w)))
print(table(rows, ["output", "break-even, B tokens", "u*, capacity in tokens",
                   f"u*, output weighed {w:g}"], [".0%", ".2f", ".0%", ".0%"]))
# Counted in tokens, u* goes as 1 / b(f): the shift multiplies it by b(0.5) / b(0.1).
assert abs(u[0.1] / u[0.5] - 6.25 / 3.25) < 1e-12
# Output weighed at the price ratio: the mix cancels out of u*.
assert all(abs(com.break_even_utilization(f, output_weight=w) - 1) < 1e-12
           for f in (0.1, 0.5))

# %% tags=["remove-cell"]
assert (round(u[0.5] * 100), round(u[0.1] * 100)) == (40, 77)
assert round(u[0.1] / u[0.5], 2) == 1.92
assert (com.monthly_usd, com.capacity_tokens_per_minute) == (13_140, 120_000)
assert round(com.capacity_tokens_per_month / 1e9, 2) == 5.26
usd_per_1m = com.monthly_usd / com.capacity_tokens_per_month * 1e6
assert round(usd_per_1m, 2) == 2.50        # dollars per 1M tokens of capacity
glue("ec_be50", f"{u[0.5]:.0%}")
glue("ec_be10", f"{u[0.1]:.0%}")

# %% [markdown]
# The 40% and 77% hold because this capacity is a count of tokens of any kind. Counted the
# way a PTU counts it, the same \$2.50 per million (the price of an *input* token) would
# break even only at full use, at every mix.
#
# ```{admonition} War story: the break-even that moved
# :class: warning
# The numbers behind this commitment, whose capacity was a count of tokens, were worked
# out for a chat product whose tokens were half output, and they said {glue:text}`ec_be50`.
# Months later the same team shipped agents that pasted retrieved documents into their
# prompts and answered in a line or two. Only a tenth of the tokens were now output, which
# put the break-even at {glue:text}`ec_be10`: by then the contract could not be undone.
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
    verdict = "saves" if payg > com.monthly_usd else "loses"
    print(f"output {f:.0%}: PAYG ${payg:>7,.0f} vs commitment ${com.monthly_usd:,.0f} "
          f"-> {verdict} ${abs(payg - com.monthly_usd):,.0f}/month")
assert payg_cost_usd(volume, blended_price(C_IN, C_OUT, 0.1)) < com.monthly_usd
assert payg_cost_usd(volume, blended_price(C_IN, C_OUT, 0.5)) > com.monthly_usd

# %% tags=["remove-cell"]
glue("ec_story_volume", f"{volume / 1e9:.0f} billion")
glue("ec_story_load", f"{volume / com.capacity_tokens_per_month:.0%}")

# %% [markdown]
# ### The same shift on a PTU: the break-even stays, the utilisation falls
#
# Would real PTUs have spared the team? Take 50 gpt-4o PTUs reserved monthly
# (\$13,000) carrying {glue:text}`ec_ptu_story_volume` tokens a month. With output weighed
# at the price ratio the break-even does not move; the *utilisation* does, because the
# same tokens now use less of the capacity. Compare $u/u^*$ in both accountings: it is
# $u / u^* = b(f)\,V / (1000\, C)$, the PAYG value of the traffic over the commitment,
# whatever $w$ is. The mix changes the money the same way; $w$ only decides whether it
# shows in $u^*$ or in $u$.

# %%
# NBVAL_CHECK_OUTPUT
n_ptu, ptu_volume = 50, 2e9
# Input-equivalent tokens a month, at full use.
ptu_units = n_ptu * GPT_4O_INPUT_TPM_PER_PTU * MINUTES_PER_MONTH
ptu_usd = ptu_monthly_cost_usd(n_ptu, "monthly")
contract = "contract, capacity counted in tokens"
ptus = f"{n_ptu} PTUs, output weighed {PTU_OUTPUT_TOKEN_WEIGHT:g}"
ratios, rows = {}, []
for f in (sc.MIX_BEFORE, sc.MIX_AFTER):
    units = capacity_units_per_token(f, PTU_OUTPUT_TOKEN_WEIGHT)  # per token of the mix
    use_ptu = ptu_volume * units / ptu_units
    need = ptus_needed(ptu_volume / MINUTES_PER_MONTH, f, min_ptus=1, step=1)
    cases = {contract: (volume / com.capacity_tokens_per_month, u[f], "-"),
             ptus: (use_ptu, ptu_break_even_utilization(f, "monthly"), need)}
    for name, (use, be, to_buy) in cases.items():
        ratios[name, f] = use / be
        rows.append((name, f, use, be, use / be, to_buy))
print(table(rows, ["", "output", "u", "u*", "u/u*", "PTUs needed"],
            ["", ".0%", ".0%", ".0%", ".2f", ""]))
shrink = blended_price(C_IN, C_OUT, 0.1) / blended_price(C_IN, C_OUT, 0.5)
for name in (contract, ptus):      # the same factor either way: b(0.1) / b(0.5)
    assert abs(ratios[name, 0.1] / ratios[name, 0.5] - shrink) < 1e-12

# %% tags=["remove-cell"]
ptu_need = {f: ptus_needed(ptu_volume / MINUTES_PER_MONTH, f, min_ptus=1, step=1)
            for f in (0.5, 0.1)}
assert ptu_need == {0.5: 46, 0.1: 24} and ptu_usd == 13_000
payg_over_ptu = payg_cost_usd(ptu_volume, blended_price(C_IN, C_OUT, 0.5)) / ptu_usd
assert abs(ratios[ptus, 0.5] - payg_over_ptu) < 1e-12
glue("ec_ptu_story_volume", f"{ptu_volume / 1e9:.0f} billion")
glue("ec_shrink", f"{shrink:.2f}")
glue("ec_ptu_need50", f"{ptu_need[0.5]}")
glue("ec_ptu_need10", f"{ptu_need[0.1]}")

# %% [markdown]
# In both rows the shift multiplies $u/u^*$ by $b(0.1)/b(0.5) =$ {glue:text}`ec_shrink`. On
# the contract the break-even climbs past the utilisation; on the PTUs the utilisation
# falls away from the break-even, and the load that needed {glue:text}`ec_ptu_need50` PTUs
# now needs {glue:text}`ec_ptu_need10`: the mix moved the *number of PTUs to buy*. (Those
# PTUs never paid on cost alone, even at the old mix; the next section says why.)
#
# **Takeaway:** a break-even is a pair, a utilisation *and* the mix it was computed at,
# unless the capacity weighs output at the price ratio, in which case the mix belongs to
# the PTU count instead. Before signing, ask:
#
# 1. **How does the capacity count tokens?** Is an output token weighed, by how much, and
#    does that match the price ratio? Azure weighs output at the price ratio for gpt-4.1
#    and later, and says that older models, gpt-4o among them, use a different ratio that
#    only its capacity calculator gives. The 4 this chapter uses for gpt-4o is gpt-4.1's
#    rule standing in for that number: confirm it before relying on the flat break-even.
#    Do cached input tokens count?
# 2. **What is the mix now, and where is it going** (agents, retrieval, longer answers)?
#    Recompute the break-even if capacity is counted in tokens, the unit count if it is
#    weighed.
# 3. **What utilisation will the floor you intend reach on your demand trace**, against
#    the break-even of each term (hourly, monthly, yearly)?
# 4. **What is the smallest purchase**, and does it exceed the cheapest floor?
# 5. **Is the purpose cost, or guaranteed throughput and latency?** At list prices a PTU
#    barely pays for itself on cost.
#
# ### Calculator: break-even against the output mix
#
# Move the mix, the commitment, the prices or the weight of an output token. (The
# calculator runs in Jupyter or Colab; the book shows its figure below.)

# %% tags=["remove-output"]
break_even_calculator()

# %%
fig = break_even_figure(ptu_terms=("monthly", "yearly"))

# %% [markdown]
# *Figure: break-even utilisation of the \$13,140 commitment, its capacity counted in
# tokens, against the output fraction (solid), and of gpt-4o PTUs at Azure's regional list
# prices, output weighed at the price ratio (dashed, next section). Notice how steeply the
# solid line rises as output falls below 20%, where agents and retrieval push the mix,
# while the dashed lines stay flat.*
#
# ## Tokens per PTU is not a constant
#
# A PTU is sold as throughput, and its datasheet figure is in *input* tokens per minute:
# about 2,500 for gpt-4o {cite}`azure_ptu`. An output token counts as $w$ input tokens
# toward that throughput, so $n$ PTUs carry
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
terms = ("hourly", "monthly", "yearly")
rows = [(f, ptu_tokens_per_minute(1, f),
         *(ptu_break_even_utilization(f, t) for t in terms))
        for f in (0.0, 0.1, 0.25, 0.5)]
print("one gpt-4o PTU: tokens a minute, and its break-even utilisation by term")
print(table(rows, ["output", "tokens/min per PTU", *terms],
            [".0%", ",.0f", ".0%", ".0%", ".0%"]))
per_month = {t: ptu_monthly_cost_usd(1, t) for t in terms}
print("cost per PTU-month:", ", ".join(f"{t} ${v:,.0f}" for t, v in per_month.items()))
pure_vs_half = ptu_tokens_per_minute(1, 0.0) / ptu_tokens_per_minute(1, 0.5)
be_month, be_year = (ptu_break_even_utilization(0.1, t) for t in ("monthly", "yearly"))
# Output weighed at the price ratio: the same break-even at every mix.
assert all(abs(ptu_break_even_utilization(f, "monthly") - be_month) < 1e-12
           for f in (0.0, 0.25, 0.5))

# %% tags=["remove-cell"]
assert round(ptu_tokens_per_minute(1, 0.5)) == 1000 and pure_vs_half == 2.5
assert (round(be_month, 2), round(be_year, 2)) == (0.95, 0.81)
payg_value = GPT_4O_INPUT_TPM_PER_PTU * MINUTES_PER_MONTH * C_IN / 1000
assert abs(be_month - AZURE_PTU.usd_per_month / payg_value) < 1e-12
glue("ec_ptu_pure_vs_half", f"{pure_vs_half:g}")
glue("ec_ptu_be_month", f"{be_month:.0%}")
glue("ec_ptu_be_year", f"{be_year:.0%}")

# %% [markdown]
# Two lessons. First, one PTU carries {glue:text}`ec_ptu_pure_vs_half` times as many
# tokens of pure input as of a 50% output mix: the mix decides how many to buy. Second,
# with $w = r = 4$ this is the second case of the derivation above: the break-even is
# $u^* = 1000\,C/(K c_\text{in})$, \$260 over the PAYG value of 2,500 input tokens a minute for
# a month, {glue:text}`ec_ptu_be_month` on a monthly reservation and
# {glue:text}`ec_ptu_be_year` on a yearly one, at every mix. At regional list prices a
# gpt-4o PTU barely pays for itself on cost alone (hourly, never); teams buy them for
# guaranteed throughput and latency. The weight of 4 for gpt-4o is a stand-in (the first
# question above); where the weight differs from the price ratio, the mix moves the
# break-even again:

# %%
# NBVAL_CHECK_OUTPUT
rows = [(w, *(ptu_break_even_utilization(f, "yearly", output_weight=w)
              for f in (0.1, 0.5))) for w in (2, 4, 6)]
print("yearly break-even of a gpt-4o PTU, by the weight of an output token")
print(table(rows, ["output weight", "10% output", "50% output"], ["", ".0%", ".0%"]))

# %% [markdown]
# ### Discounts the workload can claim: cached input and the batch API
#
# Two list-price discounts change the PAYG side of every comparison {cite}`openai_pricing`.
# **Cached input**: an input token that repeats a prefix the provider has just processed
# (a system prompt, tool schemas, a document several requests retrieve) costs gpt-4o
# \$1.25 per million instead of \$2.50. The agents of the war story are the workload that
# gets it; assume {glue:text}`ec_cached_share` of their input tokens hit the cache. A PTU
# treats cached tokens even better: Azure deducts them from PTU utilisation entirely
# {cite}`azure_prompt_caching`. **The batch API**: requests that may wait up to a day cost
# half price, input and output. An overnight tier is the workload that gets it.

# %%
# NBVAL_CHECK_OUTPUT
h, f_agents, f_night = sc.AGENT_CACHED_INPUT_FRACTION, sc.MIX_AFTER, sc.MIX_TRACE
cached_com = break_even_utilization(
    com.monthly_usd, com.capacity_tokens_per_month, C_IN, C_OUT, f_agents,
    cached_input_fraction=h, usd_per_1k_cached_input=GPT_4O.usd_per_1k_cached_input)
agents = {"list": (GPT_4O.blended(f_agents), u[f_agents], be_month),
          f"{h:.0%} of input cached": (
              GPT_4O.blended(f_agents, cached_input_fraction=h), cached_com,
              ptu_break_even_utilization(f_agents, "monthly", cached_input_fraction=h))}
batch = GPT_4O.batch()
overnight = {
    "interactive": (GPT_4O.blended(f_night), com.break_even_utilization(f_night),
                    ptu_break_even_utilization(f_night, "monthly")),
    "batch API": (batch.blended(f_night), com.break_even_utilization(f_night, batch),
                  ptu_break_even_utilization(f_night, "monthly", token_price=batch))}
rows = [(f"agents ({f_agents:.0%} output), {name}", b * 1000, u_com, u_ptu)
        for name, (b, u_com, u_ptu) in agents.items()]
rows += [(f"overnight tier ({f_night:.0%} output), {name}", b * 1000, u_com, u_ptu)
         for name, (b, u_com, u_ptu) in overnight.items()]
print(table(rows, ["", "$ per 1M", "contract u*", "PTU u* (monthly)"],
            ["", ".2f", ".0%", ".0%"]))
cached_be = agents[f"{h:.0%} of input cached"]

# %% tags=["remove-cell"]
assert [round(x, 2) for x in (cached_be[0] * 1000, cached_be[1], cached_be[2])] == \
    [2.69, 0.93, 0.75]
assert [round(x, 2) for x in overnight["batch API"][1:]] == [1.14, 1.90]
glue("ec_cached_share", f"{h:.0%}")
glue("ec_cached_blend", f"${cached_be[0] * 1000:.2f}")
glue("ec_cached_be_com", f"{cached_be[1]:.0%}")
glue("ec_cached_be_ptu", f"{cached_be[2]:.0%}")
glue("ec_batch_be_com", f"{overnight['batch API'][1]:.0%}")
glue("ec_batch_be_ptu", f"{overnight['batch API'][2]:.0%}")

# %% [markdown]
# Caching cuts the agents' blended price to {glue:text}`ec_cached_blend` per million. That
# pushes the break-even of capacity counted in tokens further out, to
# {glue:text}`ec_cached_be_com`, but pulls the PTU's in, to {glue:text}`ec_cached_be_ptu`:
# PAYG still charges half for a cached token, the PTU nothing. The batch API halves the
# PAYG price of an overnight tier, which doubles every break-even:
# {glue:text}`ec_batch_be_com` and {glue:text}`ec_batch_be_ptu`, above 100%, so no
# reservation pays for traffic that can wait. Compare a commitment with the PAYG price the
# workload would really pay.

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
print(f"{demand.size:,} minutes; mean {demand.mean():,.0f}, p50 {p50:,.0f}, "
      f"p90 {p90:,.0f}, peak {peak:,.0f} tokens/min")
print(f"mean / peak = {demand.mean() / peak:.0%}")

# %% tags=["remove-cell"]
assert round(demand.mean()) == 60_000 and round(demand.mean() / peak, 2) == 0.22
glue("ec_mix_trace", f"{sc.MIX_TRACE:.0%}")

# %%
week = demand[: 7 * 1440]
fig, ax = plots.new_axes("day", "demand (1,000 tokens/min)",
                         "first week of the seeded trace")
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
# The middle term is the break-even utilisation of the dedicated capacity, the $u^*$ of
# the previous sections ($p$ is its price per token/min of the mix). So the cheapest floor
# is the demand level exceeded a fraction $u^*$ of the time. **It is the median only when
# $u^* = 50\%$**: the dearer the capacity against PAYG, the lower the floor, and when
# $u^* \ge 1$ no floor pays at all. Whatever its level, the excess spills to PAYG. Our
# \$2.50 per million tokens of capacity and a {glue:text}`ec_mix_trace` output mix give
# $u^* =$ {glue:text}`ec_u_trace`, so the optimum is {glue:text}`ec_best_pct`:

# %%
# NBVAL_CHECK_OUTPUT
blended = blended_price(C_IN, C_OUT, sc.MIX_TRACE)
unit = com.usd_per_tpm_month
best = cheapest_floor(demand, unit, blended)
best_pct = f"p{100 * np.mean(demand <= best.floor_tpm):.0f}"
options = {
    "no floor (all PAYG)": spillover_cost(demand, 0, unit, blended),
    "floor at p50, spill": spillover_cost(demand, p50, unit, blended, spill=True),
    "floor at p50, refuse": spillover_cost(demand, p50, unit, blended, spill=False),
    "floor at peak": spillover_cost(demand, peak, unit, blended),
    f"cheapest floor ({best_pct}), spill": best}
rows = [(name, r.floor_tpm, r.total_usd, r.availability,
         f"{r.floor_utilization:.0%}" if r.floor_tpm else "-")
        for name, r in options.items()]
print(table(rows, ["", "floor tokens/min", "$/month", "availability", "floor busy"],
            ["", ",.0f", ",.0f", ".1%", ""]))
u_trace = com.break_even_utilization(sc.MIX_TRACE)
print(f"break-even utilisation of the capacity at this mix: {u_trace:.0%} "
      f"-> cheapest floor at p{cheapest_floor_percentile(u_trace):.0f}")
sp, pk = options["floor at p50, spill"], options["floor at peak"]
nofloor, refuse = options["no floor (all PAYG)"], options["floor at p50, refuse"]
# Spilling serves every token; refusing turns the overflow into errors.
assert sp.availability == 1 and refuse.availability < 0.8
# The cheapest floor sits at the (1 - u*) quantile of demand.
below_best = 100 * np.mean(demand <= best.floor_tpm)       # its percentile
assert abs(below_best - cheapest_floor_percentile(u_trace)) < 0.5

# %% tags=["remove-cell"]
assert sp.total_usd < nofloor.total_usd
assert round(u_trace, 2) == 0.57 and best_pct == "p43"
assert abs(floor_break_even_utilization(unit, blended) - u_trace) < 1e-12
assert (round(sp.total_usd), round(pk.total_usd), round(nofloor.total_usd)) == \
    (8_946, 29_477, 11_498)
assert round(refuse.availability, 3) == 0.747
glue("ec_u_trace", f"{u_trace:.0%}")
glue("ec_best_pct", best_pct)
glue("ec_p50_cost", f"${sp.total_usd:,.0f}")
glue("ec_peak_cost", f"${pk.total_usd:,.0f}")
glue("ec_payg_cost", f"${nofloor.total_usd:,.0f}")
glue("ec_refuse_avail", f"{refuse.availability:.1%}")
glue("ec_refuse_lost", f"{1 - refuse.availability:.0%}")
glue("ec_best_cost", f"${best.total_usd:,.0f}")

# %% [markdown]
# The cheapest floor, {glue:text}`ec_best_pct` with spill, costs {glue:text}`ec_best_cost`
# a month at full availability; p50 costs a little more, {glue:text}`ec_p50_cost`, because
# the cost is flat near its minimum; all-PAYG costs {glue:text}`ec_payg_cost`, and a floor
# at the peak {glue:text}`ec_peak_cost`. Refusing the overflow instead of spilling it is
# cheaper still, but serves only {glue:text}`ec_refuse_avail` of the tokens:
# {glue:text}`ec_refuse_lost` of the demand meets throttling errors. With spill, a burst
# shows up on the invoice instead of in the error logs.
#
# p50 came close here only because this capacity's $u^*$ is near one half. Price the same
# trace with gpt-4o PTUs, whose break-even is {glue:text}`ec_ptu_be_month` reserved
# monthly and {glue:text}`ec_ptu_be_year` yearly at any mix, and the cheapest floor drops
# to the bottom of the demand curve:

# %%
# NBVAL_CHECK_OUTPUT
smallest = ptu_tokens_per_minute(GPT_4O_PTU_MIN_REGIONAL, sc.MIX_TRACE)   # tokens/min
ptu_rows, rows = {}, []
for term in ("monthly", "yearly"):
    unit_ptu = ptu_usd_per_tpm_month(sc.MIX_TRACE, term)
    cheap = cheapest_floor(demand, unit_ptu, blended)
    # Each floor's monthly cost over that of sending everything to PAYG, less one.
    vs_payg = {q: spillover_cost(demand, fl, unit_ptu, blended).total_usd
               / nofloor.total_usd - 1 for q, fl in (("p50", p50), ("min", smallest))}
    ptu_rows[term] = (floor_break_even_utilization(unit_ptu, blended),
                      100 * np.mean(demand <= cheap.floor_tpm),
                      1 - cheap.total_usd / nofloor.total_usd,
                      vs_payg["p50"], vs_payg["min"])
    u_ptu, pct, save, at_p50, at_min = ptu_rows[term]
    rows.append((term, u_ptu, f"p{pct:.0f}", save, at_p50, at_min))
print(table(rows, ["gpt-4o PTUs", "u*", "cheapest", "saves vs PAYG", "p50 vs PAYG",
                   f"{GPT_4O_PTU_MIN_REGIONAL} PTUs vs PAYG"],
            ["", ".0%", "", ".1%", "+.1%", "+.1%"]))
print(f"the smallest regional deployment carries {smallest:,.0f} tokens/min "
      f"at this mix, p{100 * np.mean(demand <= smallest):.0f} of demand")
# It costs more than no PTU at all, on either term.
assert all(r[4] > 0 for r in ptu_rows.values())

# %% tags=["remove-cell"]
pinned = {t: (round(r[1]), round(r[2], 3), round(r[3], 3)) for t, r in ptu_rows.items()}
assert pinned == {"monthly": (5, 0.014, 0.126), "yearly": (19, 0.075, -0.005)}
assert all(abs(r[0] - ptu_break_even_utilization(sc.MIX_TRACE, t)) < 1e-12
           for t, r in ptu_rows.items())
glue("ec_ptu_floor_month", f"p{ptu_rows['monthly'][1]:.0f}")
glue("ec_ptu_floor_year", f"p{ptu_rows['yearly'][1]:.0f}")
glue("ec_ptu_save_month", f"{ptu_rows['monthly'][2]:.1%}")
glue("ec_ptu_save_year", f"{ptu_rows['yearly'][2]:.1%}")
glue("ec_ptu_p50_month", f"{ptu_rows['monthly'][3]:.0%}")
glue("ec_ptu_min_month", f"{ptu_rows['monthly'][4]:.0%}")
glue("ec_ptu_min_year", f"{ptu_rows['yearly'][4]:.0%}")
glue("ec_ptu_min", f"{GPT_4O_PTU_MIN_REGIONAL}")

# %% [markdown]
# With PTU prices the cheapest floor sits at {glue:text}`ec_ptu_floor_month` (monthly) and
# {glue:text}`ec_ptu_floor_year` (yearly), and saves only {glue:text}`ec_ptu_save_month`
# and {glue:text}`ec_ptu_save_year` against sending everything to PAYG. A p50 floor of
# monthly PTUs *costs* {glue:text}`ec_ptu_p50_month` more than no floor at all. And the
# smallest regional deployment, {glue:text}`ec_ptu_min` PTUs, is already far above either
# floor: it costs {glue:text}`ec_ptu_min_month` (monthly) or {glue:text}`ec_ptu_min_year`
# (yearly) more than all-PAYG. On cost alone this team buys no PTU; a reason to buy one
# anyway is the throughput and latency it guarantees, which is a different question with
# a different price.
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
# {glue:text}`ec_u_trace`. What the year cost against PAYG, and against the cheapest floor
# with spill:

# %%
# NBVAL_CHECK_OUTPUT
sized = com.sized_for(peak)
util = demand.mean() / peak
over_payg = 12 * (pk.total_usd - nofloor.total_usd)
over_best = 12 * (pk.total_usd - best.total_usd)
print(f"peak-sized commitment: {sized.capacity_tokens_per_minute:,.0f} tokens/min "
      f"for ${sized.monthly_usd:,.0f}/month")
print(f"utilisation {util:.0%} against a break-even of "
      f"{sized.break_even_utilization(sc.MIX_TRACE):.0%}")
print(f"a year's overspend: ${over_payg:,.0f} vs PAYG, "
      f"${over_best:,.0f} vs the cheapest floor ({best_pct}) with spill")

# %% tags=["remove-cell"]
assert round(util, 2) == 0.22
assert round(sized.break_even_utilization(sc.MIX_TRACE), 2) == 0.57
assert round(over_payg, -3) == 216_000
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
# axis); p50 dashed, the cheapest floor marked. Notice that the spill curve is lowest at
# the $(1 - u^*)$ quantile and nearly flat around it, and
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
# A unit cost per token compares with a PAYG price only for the same tokens. Two PAYG lines
# stand beside the deployment: **the same open weights hosted by a provider**, like for
# like (same model, same tokenizer; the provider picks the serving precision)
# {cite}`fireworks_pricing`, and **gpt-4o**, the closed model the team would otherwise
# call. gpt-4o is a different model with a different tokenizer: the same text is a
# different number of tokens, and the comparison means something only if the open model
# does the job as well, which no cost arithmetic can tell.
#
# The deployment (every assumption is in `servelib.economics.scenarios.SELF_HOST`):

# %%
# NBVAL_CHECK_OUTPUT
sh = sc.SELF_HOST
thr = sh.throughput()
print(f"{sh.model} bf16, TP={sh.tp_degree} x {sh.gpu}, context {sh.context_len:,}, "
      f"output fraction {sh.output_fraction:.0%}")
print(f"batch {thr.batch} (requested {thr.batch_requested}, "
      f"KV cache allows {thr.max_batch})")
print(f"decode {thr.decode_tokens_per_s:,.0f} tokens/s, "
      f"prefill {thr.prefill_tokens_per_s:,.0f} tokens/s per replica")
print(f"mix: {thr.tokens_per_s:,.0f} tokens/s per replica "
      f"= {thr.tokens_per_gpu_s:,.0f} tokens per GPU-second")
print(f"GPUs at ${sh.usd_per_gpu_hour:.2f}/hour, >= {sh.min_replicas} replicas, "
      f"average load <= {sh.max_utilization:.0%}; "
      f"engineer ${sh.usd_per_engineer_year:,.0f}/year loaded")
print(f"PAYG, same model: {sh.hosted.model} at ${sh.hosted_usd_per_1k * 1000:.2f} "
      f"per 1M tokens ({sh.hosted.source.url}, read {sh.hosted.source.read_on})")
print(f"PAYG, closed model: gpt-4o at ${sh.payg_usd_per_1k * 1000:.3f} per 1M tokens "
      f"({sh.payg.source.url}, read {sh.payg.source.read_on})")

# %% tags=["remove-cell"]
assert thr.batch == 64 and round(thr.tokens_per_gpu_s, -1) == 2690
assert round(sh.hosted_usd_per_1k * 1000, 2) == 0.90
assert round(sh.payg_usd_per_1k * 1000, 3) == 4.375

# %% [markdown]
# These are roofline bounds: a real engine reaches some fraction of them. The crossovers
# below hardly depend on it, because at these volumes the deployment is far from full;
# that is itself the lesson of the next war story.
#
# ```{admonition} War story: the self-hosting case that won and then lost
# :class: warning
# On paper the deployment beat gpt-4o's PAYG price with room to spare, because the only
# cost the business case listed was GPU-hours. A year and a half in, keeping it running (upgrades,
# incidents, on-call rotas, capacity planning) had become the full-time job of two
# platform engineers. Priced with their salaries, each token cost about
# {glue:text}`ec_three_x` what the business case had promised.
# ```

# %%
# NBVAL_CHECK_OUTPUT
t = sh.tco(sc.STORY_TOKENS_PER_MONTH, n_engineers=sc.ENGINEERS_ACTUAL)
print(f"{sc.STORY_TOKENS_PER_MONTH / 1e9:.0f} B tokens/month on {t.n_gpus} GPUs "
      f"({t.n_replicas} replicas), utilisation {t.utilization:.1%}")
print(table([("GPU-hours", t.gpu_usd), ("  of which idle capacity", t.idle_usd),
             (f"engineering, {sc.ENGINEERS_ACTUAL} people", t.engineering_usd),
             ("total", t.total_usd)], ["a month", "USD"], ["", ",.0f"]))
print(table([("business case (GPU-hours only)", t.gpu_only_usd_per_1k * 1000),
             ("true (every line)", t.unit_cost_usd_per_1k * 1000),
             ("PAYG, gpt-4o", sh.payg_usd_per_1k * 1000),
             ("PAYG, same model hosted", sh.hosted_usd_per_1k * 1000)],
            ["unit cost", "$ per 1M tokens"], ["", ".2f"]))
ratio = t.unit_cost_usd_per_1k / t.gpu_only_usd_per_1k
eng_vs_gpu = t.engineering_usd / t.gpu_usd
print(f"true / business case = {ratio:.2f}x; "
      f"engineering / GPU-hours = {eng_vs_gpu:.1f}x")
# Against gpt-4o it won on GPU-hours and lost in full; like for like it never won.
assert t.gpu_only_usd_per_1k < sh.payg_usd_per_1k < t.unit_cost_usd_per_1k
assert sh.hosted_usd_per_1k < t.gpu_only_usd_per_1k

# %% tags=["remove-cell"]
assert round(ratio) == 3 and round(eng_vs_gpu, 1) == 2.1
glue("ec_three_x", f"{ratio:.1f}x")
glue("ec_gpu_only", f"${t.gpu_only_usd_per_1k * 1000:.2f}")
glue("ec_hosted_price", f"${sh.hosted_usd_per_1k * 1000:.2f}")
glue("ec_idle", f"{1 - t.utilization:.0%}")
glue("ec_eng_vs_gpu", f"{eng_vs_gpu:.1f}")

# %% [markdown]
# Against gpt-4o the GPU line won: {glue:text}`ec_idle` of the GPU-hours were idle and it
# still beat PAYG. The engineering line, {glue:text}`ec_eng_vs_gpu` times the GPU bill,
# turned the win into {glue:text}`ec_three_x` the unit cost. Like for like, there was no
# win to lose: the same model hosted costs {glue:text}`ec_hosted_price` per million
# tokens, below even the GPU-hours alone ({glue:text}`ec_gpu_only`) at this volume.
#
# ### Where self-hosting crosses PAYG
#
# PAYG grows linearly with volume; self-hosting is a staircase (a replica at a time) on
# top of the engineering line, so the two can cross more than once. The table gives the
# first volume at which self-hosting costs no more, and, against the same model hosted,
# also the volume above which it never costs more again. With the business case's quarter
# of an engineer, the deployment meets gpt-4o's price between 4 and 5 billion tokens a
# month, and the same model hosted only near {glue:text}`ec_cross_hosted`. An overnight
# tier that could use gpt-4o's batch API at half price needs twice the volume of the
# interactive one:

# %%
# NBVAL_CHECK_OUTPUT
staff = (0, sc.ENGINEERS_PLANNED, 1, sc.ENGINEERS_ACTUAL)
cross = {e: sh.crossover(n_engineers=e) for e in staff}
cross_batch = {e: sh.crossover(n_engineers=e, price=GPT_4O.batch()) for e in staff}
cross_hosted = {e: sh.crossover(n_engineers=e, price=sh.hosted) for e in staff}
hosted_for_good = {e: sh.lasting_crossover(n_engineers=e, price=sh.hosted)
                   for e in staff}
rows = [(e, cross[e] / 1e9, cross_batch[e] / 1e9, cross_hosted[e] / 1e9,
         hosted_for_good[e] / 1e9) for e in staff]
print("self-hosting costs no more than PAYG from (B tokens a month), against:")
print(table(rows, ["engineers", "gpt-4o", "gpt-4o batch", "same model hosted",
                   "hosted, for good from"], ["g", ".2f", ".2f", ".2f", ".2f"]))
# Against gpt-4o, list or batch price, it stays cheaper from its first crossover on.
for e in staff:
    for price in (None, GPT_4O.batch()):
        first = sh.crossover(e, price=price)
        assert abs(sh.lasting_crossover(e, price=price) / first - 1) < 1e-9

# %% tags=["remove-cell"]
assert 4e9 <= cross[sc.ENGINEERS_PLANNED] <= 5e9     # 4-5 B with the planned staff
assert round(cross[sc.ENGINEERS_PLANNED] / 1e9, 2) == 4.19
assert round(cross[sc.ENGINEERS_ACTUAL] / 1e9, 2) == 10.19
assert round(cross_hosted[sc.ENGINEERS_PLANNED] / 1e9, 2) == 20.39
assert hosted_for_good[sc.ENGINEERS_PLANNED] == cross_hosted[sc.ENGINEERS_PLANNED]
assert [round(x[1] / 1e9, 2) for x in (cross_hosted, hosted_for_good)] == [32.89, 41.0]
assert [round(x[2] / 1e9, 2) for x in (cross_hosted, hosted_for_good)] == [65.78, 73.89]
assert all(abs(cross_batch[e] - 2 * cross[e]) < 1e-3 * cross[e] for e in cross)
# One replica: what it costs and carries (at the 60% ceiling).
empty = sh.tco(0, n_engineers=0)
replica_usd = empty.gpu_usd / empty.n_replicas
replica_tokens = empty.capacity_tokens / empty.n_replicas * sh.max_utilization
step_edge = sh.tco(cross_hosted[1], n_engineers=1).n_replicas * replica_tokens
assert cross_hosted[1] < step_edge < hosted_for_good[1]
assert round(step_edge / 1e9, 1) == 33.9
glue("ec_replica_usd", f"${replica_usd:,.0f}")
glue("ec_replica_tokens", f"{replica_tokens / 1e9:.1f} B")
glue("ec_replica_in_hosted", f"{replica_usd / sh.hosted_usd_per_1k * 1000 / 1e9:.1f} B")
glue("ec_replica_in_gpt4o", f"{replica_usd / sh.payg_usd_per_1k * 1000 / 1e9:.1f} B")
glue("ec_hosted1_first", f"{cross_hosted[1] / 1e9:.1f} B")
glue("ec_hosted1_edge", f"{step_edge / 1e9:.1f} B")
glue("ec_hosted1_good", f"{hosted_for_good[1] / 1e9:.1f} B")
glue("ec_hosted2_first", f"{cross_hosted[2] / 1e9:.1f} B")
glue("ec_hosted2_good", f"{hosted_for_good[2] / 1e9:.1f} B")
glue("ec_cross", f"{cross[sc.ENGINEERS_PLANNED] / 1e9:.1f} B")
glue("ec_cross2", f"{cross[sc.ENGINEERS_ACTUAL] / 1e9:.1f} B")
glue("ec_cross_hosted", f"{cross_hosted[sc.ENGINEERS_PLANNED] / 1e9:.1f} B")

# %% [markdown]
# Against gpt-4o, at either price, the first crossing is the last: once self-hosting
# wins it keeps winning. Against the same model hosted it need not. A replica costs
# {glue:text}`ec_replica_usd` a month and carries up to {glue:text}`ec_replica_tokens`
# tokens at the 60% ceiling; at the hosted price those dollars buy
# {glue:text}`ec_replica_in_hosted` tokens (at gpt-4o's, only
# {glue:text}`ec_replica_in_gpt4o`). A break-even that falls within that many tokens of
# the end of its step is lost again when the next replica is added. With one engineer,
# self-hosting first costs no more at {glue:text}`ec_hosted1_first`; at
# {glue:text}`ec_hosted1_edge` a third replica is due, the bill jumps by
# {glue:text}`ec_replica_usd`, and it costs more than the hosted price again up to
# {glue:text}`ec_hosted1_good`. Only above that does it stay cheaper
# (`SelfHostScenario.lasting_crossover`): each step adds {glue:text}`ec_replica_tokens`
# of capacity for the price of {glue:text}`ec_replica_in_hosted`, so every later
# break-even falls further inside its step. With two engineers the same happens between {glue:text}`ec_hosted2_first` and
# {glue:text}`ec_hosted2_good`. A crossover on a staircase is two figures: where
# self-hosting first breaks even, and where it breaks even for good.

# %%
vols = np.linspace(0.2e9, 60e9, 600)
fig, ax = plots.new_axes("monthly volume (billion tokens)", r"monthly cost (\$1,000)",
                         "self-hosted Llama-3-70B vs PAYG, 25% output")
for name, per_1k in (("gpt-4o", sh.payg_usd_per_1k),
                     ("Llama-3-70B hosted", sh.hosted_usd_per_1k)):
    ax.plot(vols / 1e9, [payg_cost_usd(v, per_1k) / 1e3 for v in vols],
            label=f"PAYG ({name})")
for e in (sc.ENGINEERS_PLANNED, 1, sc.ENGINEERS_ACTUAL):
    ax.plot(vols / 1e9, [sh.tco(v, n_engineers=e).total_usd / 1e3 for v in vols],
            label=f"self-hosted, {e:g} engineer{'s' if e != 1 else ''}")
ax.set_ylim(0, 80)      # close enough to see the hosted line cross the staircase twice
plots.legend(fig)

# %% [markdown]
# *Figure: monthly cost against volume (gpt-4o's PAYG line leaves the top of the plot
# well after its crossings). Notice the staircase (a new 4-GPU replica each time average
# load would pass 60%) and that the engineering line shifts the whole staircase up: against gpt-4o the crossover moves from {glue:text}`ec_cross` to {glue:text}`ec_cross2`
# tokens a month; against the same model hosted the lower PAYG line pushes it to
# {glue:text}`ec_cross_hosted` with a quarter of an engineer. With one engineer the
# staircase dips under the hosted line at {glue:text}`ec_hosted1_first`, steps back over
# it at {glue:text}`ec_hosted1_edge` and stays under only past
# {glue:text}`ec_hosted1_good`. Beyond the last crossing every extra token is cheap, so
# the case for self-hosting stands or falls on how busy the GPUs will be.*
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
runs = {b: sh.tco(restricted, n_engineers=sc.ENGINEERS_ACTUAL, batch=b)
        for b in (1, 64)}
rows = [(b, sh.throughput(b).tokens_per_gpu_s, r.n_gpus, r.total_usd,
         r.unit_cost_usd_per_1k * 1000) for b, r in runs.items()]
print(table(rows, ["batch", "tokens/GPU-s", "GPUs", "$/month", "$ per 1M tokens"],
            ["", ",.0f", "", ",.0f", ".2f"]))
one, batched = runs[1], runs[64]
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
# price of a 50% mix; on capacity counted in tokens, an agent workload at 10% output has a
# very different break-even. (On a PTU weighed at the price ratio the same slip shows up
# in the PTU count instead: the next mistake.)

# %%
# NBVAL_CHECK_OUTPUT
naive = (C_IN + C_OUT) / 2             # "the price of a token": a 50% mix in disguise
wrong = break_even_tokens(com.monthly_usd, naive) / com.capacity_tokens_per_month
right = com.break_even_utilization(0.1)
print(f"wrong (mean of list prices): break-even {wrong:.0%}")
print(f"right (10% output):          break-even {right:.0%}")

# %% tags=["remove-cell"]
assert round(wrong, 2) == 0.40 and round(right, 2) == 0.77

# %% [markdown]
# **A fixed tokens-per-PTU figure.** Sizing 80,000 tokens/min at a 25% output mix with the
# datasheet's 2,500 tokens/min per PTU, as if every token were an input token, buys too
# few (both counts use the Global deployment rule: at least 15 PTUs, in steps of 5): at this mix they carry well under the load, and the rest is throttled.

# %%
# NBVAL_CHECK_OUTPUT
load, mix = 80_000, 0.25
wrong_n = ptus_needed(load, 0.0)                 # every token treated as an input token
right_n = ptus_needed(load, mix)
for label, n in (("wrong", wrong_n), ("right", right_n)):
    print(f"{label}: {n} PTUs carry {ptu_tokens_per_minute(n, mix):,.0f} tokens/min "
          "at this mix")
assert ptu_tokens_per_minute(wrong_n, mix) < load <= ptu_tokens_per_minute(right_n, mix)

# %% [markdown]
# **A floor bought for the peak, or at p50 by rule.** All serve every token; the peak
# floor pays for the busiest minute's capacity in every minute of the month, and p50 is
# right only when the break-even is one half. The right floor is the $(1 - u^*)$ quantile.

# %%
# NBVAL_CHECK_OUTPUT
print(f"wrong (floor at peak):          ${pk.total_usd:,.0f}/month, "
      f"availability {pk.availability:.0%}")
print(f"wrong for PTUs (p50, monthly):  {ptu_rows['monthly'][3]:+.0%} "
      "against no floor at all")
print(f"right (cheapest, {best_pct} = 1 - u*): ${best.total_usd:,.0f}/month, spill, "
      f"availability {best.availability:.0%}")
assert best.total_usd < pk.total_usd / 3 and best.availability == pk.availability == 1

# %% [markdown]
# **A self-hosting case that counts GPU-hours alone.** Leave out the people and the
# crossover comes out at less than a third of the one with the team that runs it.

# %%
# NBVAL_CHECK_OUTPUT
print(f"wrong (GPU-hours only):   crossover {cross[0] / 1e9:.1f} B tokens/month")
print(f"right (with {sc.ENGINEERS_ACTUAL} engineers): "
      f"crossover {cross[sc.ENGINEERS_ACTUAL] / 1e9:.1f} B tokens/month")
assert cross[sc.ENGINEERS_ACTUAL] > 3 * cross[0]

# %% [markdown]
# ## Summary: the numbers to carry
#
# | what | value |
# |---|---|
# | gpt-4o blended, 10% / 50% output | {glue:text}`ec_blend10` / {glue:text}`ec_blend50` per 1M tokens |
# | break-even of the \$13,140 commitment (capacity counted in tokens), 50% / 10% output | {glue:text}`ec_be50` / {glue:text}`ec_be10` |
# | break-even of a gpt-4o PTU (output weighed at the price ratio), monthly / yearly, any mix | {glue:text}`ec_ptu_be_month` / {glue:text}`ec_ptu_be_year` |
# | agents with half their input cached: break-even of the commitment / of a monthly PTU | {glue:text}`ec_cached_be_com` / {glue:text}`ec_cached_be_ptu` |
# | overnight tier on the batch API: break-even of the commitment / of a monthly PTU | {glue:text}`ec_batch_be_com` / {glue:text}`ec_batch_be_ptu` |
# | peak-sized commitment, a year against PAYG | {glue:text}`ec_overspend` overspent |
# | cheapest floor, the $(1 - u^*)$ quantile: \$2.50 capacity / PTUs monthly / PTUs yearly | {glue:text}`ec_best_pct` / {glue:text}`ec_ptu_floor_month` / {glue:text}`ec_ptu_floor_year` |
# | cheapest floor with spill / p50 / at peak / none (\$2.50 capacity) | {glue:text}`ec_best_cost` / {glue:text}`ec_p50_cost` / {glue:text}`ec_peak_cost` / {glue:text}`ec_payg_cost` a month |
# | self-hosting, true vs GPU-hours-only unit cost | {glue:text}`ec_three_x` |
# | self-hosting crosses gpt-4o PAYG | {glue:text}`ec_cross` tokens a month (a quarter engineer), {glue:text}`ec_cross2` (two) |
# | self-hosting crosses the same model hosted | {glue:text}`ec_cross_hosted` tokens a month (a quarter engineer); one engineer: first at {glue:text}`ec_hosted1_first`, for good above {glue:text}`ec_hosted1_good` |
#
# A break-even is a pair, a utilisation *and* the output mix it was computed at, whenever
# capacity is counted in tokens; where capacity weighs output at the price ratio, the mix
# moves the number of units to buy instead, so ask how capacity is counted before you
# sign. Buy dedicated capacity up to the demand level exceeded a break-even share of the
# time, which is p50 only when that share is one half, and send the excess to PAYG, so
# that bursts cost money rather than errors. Compare with the PAYG price the workload
# would really pay: cached input and the batch API change it. Self-hosting pays only if
# the GPUs stay busy, the salaries of the people who run it usually settle the question,
# and a fair price to beat is the same model hosted by someone else.
#
# ## Exercises
#
# Each exercise states every constant it needs. Prices are list prices: gpt-4o \$2.50 /
# \$10 and gpt-4o-mini \$0.15 / \$0.60 per 1M input / output tokens, gpt-4o cached input
# \$1.25 per 1M; Llama-3-70B hosted \$0.90 per 1M tokens, input or output; a regional
# gpt-4o PTU costs \$260 a month (monthly reservation) or \$221 (yearly); a month has 730
# hours.
#
# **ec-1.** What is the blended price of gpt-4o-mini, in dollars per million tokens, for a
# workload whose tokens are 20% output?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# b(f) = c_in (1 - f) + c_out f, with the prices in dollars per 1M tokens.
answer = 0.15 * (1 - 0.2) + 0.60 * 0.2
exact = blended_price(GPT_4O_MINI.usd_per_1k_input, GPT_4O_MINI.usd_per_1k_output, 0.2)
print(f"${answer:.3f} per 1M tokens (servelib: ${exact * 1000:.3f})")
### END SOLUTION
check("ec-1", answer)

# %% [markdown]
# **ec-2.** A team reserves 50 gpt-4o PTUs monthly in a regional deployment. At a 30% output mix, how many tokens a
# month must it send before the reservation costs no more than PAYG?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# The reservation costs 50 x $260 a month whatever is sent; PAYG charges the blended
# price of each token. Equal when the tokens times that price reach the reservation.
per_token = (2.50 * (1 - 0.3) + 10 * 0.3) / 1e6        # USD per token at 30% output
answer = 50 * 260 / per_token
exact = break_even_tokens(ptu_monthly_cost_usd(50, "monthly"),
                          blended_price(C_IN, C_OUT, 0.3))
print(f"{answer / 1e9:.3f} billion tokens a month "
      f"(servelib: {exact / 1e9:.3f} billion)")
### END SOLUTION
check("ec-2", answer)

# %% [markdown]
# **ec-3.** A gpt-4o PTU sustains 2,500 input tokens a minute and an output token counts as
# 4 input tokens. The deployment is Global: it starts at 15 PTUs and grows in steps of 5.
# How many PTUs carry 80,000 tokens a minute at a 20% output mix? (Only the sizing rule
# matters here; no price is involved.)

# %% tags=["hide-input"]
### BEGIN SOLUTION
# An output token takes 4 input tokens of a PTU's capacity, so one PTU carries
# 2,500 / (0.8 + 4 x 0.2) tokens a minute of this mix; then the deployment's rule.
per_ptu = 2500 / (0.8 + 4 * 0.2)                       # tokens/min
load_in_ptus = 80_000 / per_ptu
answer = max(15, 5 * math.ceil(load_in_ptus / 5))
exact = ptus_needed(80_000, 0.2, min_ptus=15, step=5)
print(f"{load_in_ptus:.1f} PTUs of load -> {answer} PTUs (servelib: {exact})")
### END SOLUTION
check("ec-3", answer)

# %% [markdown]
# **ec-4.** With the same tokens per PTU, what is the break-even utilisation (a fraction)
# of a gpt-4o PTU reserved for a year at the regional rate against gpt-4o PAYG at a 20%
# output mix?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# u* = what a PTU costs a month over the PAYG value of all it carries at full use.
tokens = 2500 / (0.8 + 4 * 0.2) * 730 * 60             # a PTU's month of this mix
payg_value = tokens * (2.50 * 0.8 + 10 * 0.2) / 1e6    # USD
answer = 221 / payg_value
exact = ptu_break_even_utilization(0.2, "yearly")
print(f"u* = {answer:.4f} (servelib: {exact:.4f})")
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
# The floor costs $0.1095 per token/min a month; every token above it goes to PAYG at
# the blended price. The trace holds one value a minute for 30 days: its spill, scaled
# to a 730-hour month.
floor = np.percentile(demand, 50)                                  # tokens/min
spilled = np.maximum(demand - floor, 0).sum() * 730 * 60 / demand.size
answer = floor * 0.1095 + spilled * (2.50 * 0.75 + 10 * 0.25) / 1e6
exact = spillover_cost(demand, floor_at_percentile(demand, 50), com.usd_per_tpm_month,
                       blended_price(C_IN, C_OUT, 0.25)).total_usd
print(f"${answer:,.0f} a month (servelib: ${exact:,.0f})")
### END SOLUTION
check("ec-5", answer)

# %% [markdown]
# **ec-6.** The self-hosted deployment of this chapter (Llama-3-70B, 4 x H100 per replica
# at \$2.50 per GPU-hour, batch 64, 4,096-token contexts, at least 2 replicas, average
# load at most 60%, 25% output mix, an engineer at \$180,000 a year) is run by one full-time
# engineer. Above what monthly volume, in tokens, does it cost no more than gpt-4o PAYG?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# A replica's tokens per GPU-second come from the roofline (this chapter's deployment);
# at most 60% of its capacity is used. k replicas (at least 2) cost k x 4 GPUs x 730 h x
# $2.50 plus the engineer; PAYG costs the blended price per token. Walk up the steps to
# the first whose cost PAYG reaches before the step is full.
replica_tokens = sh.throughput().tokens_per_gpu_s * 4 * 730 * 3600 * 0.6
replica_usd = 4 * 730 * 2.50
engineer_usd = 180_000 / 12
per_token = (2.50 * 0.75 + 10 * 0.25) / 1e6            # gpt-4o at 25% output
k = 2
while (k * replica_usd + engineer_usd) / per_token > k * replica_tokens:
    k += 1
answer = (k * replica_usd + engineer_usd) / per_token
# The next replica costs what PAYG charges for replica_usd / per_token tokens: that fits
# in what is left of the step, so past it self-hosting stays cheaper (later steps too).
assert answer + replica_usd / per_token <= k * replica_tokens
exact = sh.lasting_crossover(n_engineers=1)
print(f"{k} replicas: {answer / 1e9:.2f} B tokens a month "
      f"(servelib: {exact / 1e9:.2f} B)")
### END SOLUTION
check("ec-6", answer)

# %% [markdown]
# **ec-7.** Llama-3-8B in bf16 on one L4 (24 GiB, 300 GB/s, 121 TFLOP/s), 2,048-token
# contexts with a 10% memory reserve, a requested batch of 48, a 20% output mix. Using the
# roofline model for decode and prefill and capping the batch at what the KV cache allows,
# how many tokens per GPU-second does it serve?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# Llama-3-8B: 8.03 billion parameters, 128 KiB of KV per token (the KV-cache chapter).
weights, kv_seq = 2 * 8.03e9, 2048 * 128 * 1024        # bytes
fits = math.floor((24 * GiB - weights) * 0.9 / kv_seq)  # sequences the KV cache holds
batch_run = min(48, fits)
# Each phase: the larger of its compute time and its memory time.
decode_s = max(batch_run * 2 * 8.03e9 / 121e12, (weights + batch_run * kv_seq) / 300e9)
prefill_s = max(2 * 8.03e9 * 2048 / 121e12, (weights + kv_seq) / 300e9)
decode, prefill = batch_run / decode_s, 2048 / prefill_s     # tokens/s of each phase
answer = 1 / (0.2 / decode + 0.8 / prefill)             # one GPU, time-shared
exact = replica_throughput(get_model("llama-3-8b"), "l4", batch=48, context_len=2048,
                           output_fraction=0.2).tokens_per_gpu_s
print(f"batch {batch_run}: {answer:,.0f} tokens per GPU-second "
      f"(servelib: {exact:,.0f})")
### END SOLUTION
check("ec-7", answer)

# %% [markdown]
# **ec-8.** A gpt-4o PTU sustains 2,500 input tokens a minute, an output token counts as 4
# of them, and a yearly reservation costs \$221 a PTU-month. Traffic is 25% output, and
# overflow spills to gpt-4o PAYG. At which percentile of demand does the cheapest floor of
# such PTUs sit?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# The cheapest floor is the (1 - u*) quantile of demand. With output weighed at the
# price ratio, u* is the same at every mix: the PTU-month over the PAYG value of a PTU.
tokens = 2500 / (0.75 + 4 * 0.25) * 730 * 60
u_star = 221 / (tokens * (2.50 * 0.75 + 10 * 0.25) / 1e6)
answer = 100 * (1 - u_star)
exact = cheapest_floor_percentile(ptu_break_even_utilization(0.25, "yearly"))
print(f"u* = {u_star:.3f}: the floor sits at p{answer:.1f} (servelib: p{exact:.1f})")
### END SOLUTION
check("ec-8", answer)

# %% [markdown]
# **ec-9.** The self-hosted deployment of this chapter (Llama-3-70B, 4 x H100 per replica at
# \$2.50 per GPU-hour, batch 64, 4,096-token contexts, at least 2 replicas, average load at
# most 60%, 25% output mix, an engineer at \$180,000 a year), run by one full-time engineer,
# is compared like for like: with Llama-3-70B hosted by a provider at \$0.90 per 1M tokens.
# What is the smallest monthly volume, in tokens, at which self-hosting costs no more? (Each
# replica added is a step up in cost, so just past that volume it may cost more again.)

# %% tags=["hide-input"]
### BEGIN SOLUTION
# The staircase of ec-6 against the hosted price: the first step whose cost PAYG
# reaches before the step is full.
replica_tokens = sh.throughput().tokens_per_gpu_s * 4 * 730 * 3600 * 0.6
replica_usd, engineer_usd = 4 * 730 * 2.50, 180_000 / 12
per_token = 0.90 / 1e6
k = 2
while (k * replica_usd + engineer_usd) / per_token > k * replica_tokens:
    k += 1
answer = (k * replica_usd + engineer_usd) / per_token
exact = sh.crossover(n_engineers=1, price=sh.hosted)
print(f"{k} replicas: {answer / 1e9:.2f} B tokens a month "
      f"(servelib: {exact / 1e9:.2f} B)")
# Here the next replica costs the hosted price of more tokens than the step has left.
back_at = k * replica_tokens
for_good = sh.lasting_crossover(n_engineers=1, price=sh.hosted)
print(f"dearer again from {back_at / 1e9:.1f} B (replica {k + 1}) "
      f"up to {for_good / 1e9:.1f} B")
### END SOLUTION
check("ec-9", answer)

# %% [markdown]
# **ec-10.** The agents' traffic is 10% output, and half of their input tokens are read
# from the prompt cache: PAYG bills them at gpt-4o's cached price, and a PTU does not count
# them at all (output tokens count as 4 input tokens, 2,500 input tokens a minute per PTU).
# What is the break-even utilisation (a fraction) of a PTU reserved monthly?

# %% tags=["hide-input"]
### BEGIN SOLUTION
# Per token of the mix: 10% output, 90% input of which half is cached. PAYG bills $2.50,
# $1.25 (cached) and $10 per 1M; the PTU counts input once, output 4 times, cached
# input not at all.
out, cached = 0.1, 0.5
payg_per_token = ((1 - out) * (1 - cached) * 2.50 + (1 - out) * cached * 1.25
                  + out * 10) / 1e6
units_per_token = (1 - out) * (1 - cached) + 4 * out
tokens = 2500 / units_per_token * 730 * 60              # a PTU's month at full use
answer = 260 / (tokens * payg_per_token)
exact = ptu_break_even_utilization(0.1, "monthly", cached_input_fraction=0.5)
print(f"u* = {answer:.4f} (servelib: {exact:.4f})")
### END SOLUTION
check("ec-10", answer)
