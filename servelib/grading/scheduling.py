"""Exercises of the chapter "Scheduling: continuous batching, admission control and paged KV"
(notebooks/05_scheduling.ipynb). Every reference is a run of :func:`servelib.sim.simulate`."""
from ..sim import Request, simulate, workloads
from .registry import exercise

def _sch1_text(outputs, step_ms):
    static = simulate([Request(0, 16, o) for o in outputs], policy="static", max_batch=2,
                      step_time_s=step_ms / 1e3).makespan_s
    *first, last = outputs
    return (f"**sch-1.** Four requests arrive at t = 0 with 16-token prompts and outputs of "
            f"{', '.join(map(str, first))} and {last} tokens (in that order). Two slots, {step_ms} ms per step, "
            f"continuous batching. When does the last one finish (s)? (Static batching would take "
            f"{round(static, 6):g} s.)")


@exercise("sch-1", rtol=1e-3, unit="s",
          vary={"outputs": ((4, 1, 1, 2), (5, 1, 2, 2), (3, 1, 1, 3), (6, 2, 1, 2), (4, 2, 1, 1),
                            (5, 1, 1, 3), (2, 1, 4, 1), (6, 1, 2, 3)),
                "step_ms": (20, 25, 40, 50)},
          text=_sch1_text)
def _continuous_makespan_by_hand(outputs=(4, 1, 1, 2), step_ms=50):
    reqs = [Request(0, 16, o) for o in outputs]
    return simulate(reqs, max_batch=2, step_time_s=step_ms / 1e3).makespan_s


@exercise("sch-2", rtol=0.01, unit="x", vary={"seed": tuple(range(1, 21))},
          text="**sch-2.** Run the chapter's uneven-output workload with seed {seed} "
               "(`workloads.uneven_outputs(seed={seed})`: 184 requests at t = 0, 128-token prompts, exponential "
               "outputs with mean 256, `max_batch=40`, 25 ms per step). By what factor is static batching's "
               "wall-clock longer than continuous batching's?")
def _static_over_continuous(seed=3):
    kw = workloads.uneven_outputs(seed=seed)
    return simulate(policy="static", **kw).makespan_s / simulate(policy="continuous", **kw).makespan_s


@exercise("sch-3", rtol=0, unit="sequences",
          vary={"kv_tokens": tuple(range(16_384, 65_537, 4096)), "prompt_len": (256, 512, 768, 1024),
                "max_output_len": (1024, 1536, 2048)},
          text="**sch-3.** A replica has {kv_tokens:,} tokens of KV and admits on the final length. Requests "
               "have {prompt_len:,}-token prompts and `max_output_len` {max_output_len:,} (they actually "
               "generate 256). How many sequences can run at once?")
def _final_admission_concurrency(kv_tokens=32_768, prompt_len=512, max_output_len=1536):
    reqs = [Request(0, prompt_len, 256, max_output_len=max_output_len) for _ in range(64)]
    return int(simulate(reqs, max_batch=64, kv_capacity_tokens=kv_tokens, step_time_s=0.02).trace.batch.max())


def _sch4_text(prompt_len, cache_tokens):
    return (f"**sch-4.** Four requests ({prompt_len}-token prompts, 50-token outputs) are admitted at once on "
            f"prompt length into a {cache_tokens}-token cache; the prefill step stores the prompts and the first "
            f"tokens ({prompt_len + 1} each), and each later step adds one token per sequence. How many "
            f"generated tokens are thrown away when the cache overflows?")


@exercise("sch-4", rtol=0, unit="tokens",
          vary={"prompt_len": (100, 110, 120, 130), "cache_tokens": (540, 560, 580)}, text=_sch4_text)
def _oom_tokens_thrown_away(prompt_len=100, cache_tokens=560):
    reqs = [Request(0, prompt_len, 50) for _ in range(4)]
    return simulate(reqs, max_batch=4, kv_capacity_tokens=cache_tokens, admission="prompt",
                    step_time_s=0.02).oom_tokens_lost


@exercise("sch-5", rtol=0, unit="tokens",
          vary={"block_size": (8, 16, 32), "tokens": (777, 999, 1000, 1234, 1500, 2021, 3333, 4097)},
          text="**sch-5.** A paged cache uses {block_size}-token blocks. A sequence holds {tokens:,} tokens. "
               "How many token slots of its blocks are empty (internal fragmentation)?")
def _paged_internal_fragmentation(block_size=16, tokens=1000):
    r = simulate([Request(0, tokens - 1, 1)], max_batch=1, block_size=block_size, step_time_s=0.02)
    return r.kv_peak_tokens - r.kv_peak_used_tokens


@exercise("sch-6", rtol=1e-3, unit="s",
          vary={"prompt_len": tuple(range(500, 2001, 250)), "max_batched_tokens": (128, 256, 512),
                "step_ms": (10, 20, 25)},
          text="**sch-6.** One request is decoding (1-token prompt, 20 output tokens) when a {prompt_len:,}-token "
               "prompt arrives at the same instant (both at t = 0, the short one first). Two slots, "
               "`max_batched_tokens={max_batched_tokens}`, decode tokens first, {step_ms} ms per step. What is "
               "the long request's TTFT (s)?")
def _chunked_prefill_ttft(prompt_len=1000, max_batched_tokens=256, step_ms=20):
    reqs = [Request(0, 1, 20), Request(0, prompt_len, 5)]
    r = simulate(reqs, max_batch=2, max_batched_tokens=max_batched_tokens, step_time_s=step_ms / 1e3)
    return float(r.ttft_s[1])
