"""Exercises of the chapter "A serving engine you can read" (notebooks/06_engine.ipynb).

Every reference is computed by servelib (the simulator, its step-time model, or the run
metrics both the simulator and the engine report); its inputs are keyword arguments whose
defaults are the numbers the chapter states."""
from ..sim import Request, StepTimeModel, simulate
from .registry import exercise


@exercise("eng-1", rtol=0, unit="blocks",
          vary={"block_size": (8, 16, 32), "prompt_len": (100, 200, 333, 500),
                "generated": (30, 47, 64, 100)},
          text="**eng-1.** A paged cache uses {block_size}-token blocks. A sequence with a "
               "{prompt_len}-token prompt has generated {generated} tokens. How many blocks does it hold?")
def _blocks_held(block_size=16, prompt_len=100, generated=30):
    """Blocks a sequence holds after generating ``generated`` tokens of a ``prompt_len`` prompt."""
    r = simulate([Request(0, prompt_len, generated)], max_batch=1, block_size=block_size, admission="prompt",
                 step_time_s=1.0)
    return r.kv_peak_tokens // block_size


@exercise("eng-2", rtol=0.01, unit="requests",
          vary={"rate_per_s": (4.0, 8.0, 12.0, 20.0, 30.0), "mean_latency_s": (0.8, 1.5, 2.5, 4.0)},
          text="**eng-2.** A replica receives {rate_per_s:g} requests per second and each spends "
               "{mean_latency_s:g} s in it on average. How many requests are in the replica on average?")
def _littles_law(rate_per_s=12.0, mean_latency_s=2.5):
    """Mean number of requests inside a replica (Little's law, L = lambda x W)."""
    return rate_per_s * mean_latency_s


@exercise("eng-3", rtol=0.01, unit="ms",
          vary={"decode": (16, 32, 48, 64), "max_context": (500, 800, 1200), "chunk": (128, 256, 512)},
          text="**eng-3.** A fitted step-time model charges 2 ms per step, 0.1 ms per token, 1 µs per "
               "key read by decode attention and 0.5 ms per prefill chunk (nothing else). A step holds "
               "{decode} decoding sequences, the longest at {max_context:,} tokens of context, and one "
               "{chunk}-token prefill chunk. How long does it take (ms)?")
def _fitted_step_time(decode=32, max_context=500, chunk=256, fixed_ms=2.0, per_token_ms=0.1, per_key_us=1.0,
                      per_chunk_ms=0.5):
    """A step's time from the step-time model: ``decode`` rows at longest context ``max_context``
    and one ``chunk``-token prefill chunk (no logits or prefill-pair cost)."""
    model = StepTimeModel(fixed_ms / 1e3, per_token_ms / 1e3, 0.0, per_key_us / 1e6, per_chunk_ms / 1e3, 0.0)
    return model.of_shape(decode=decode, max_context=max_context, chunks=[(0, chunk)]) * 1e3


def _eng4_text(outputs, step_ms, ttft_slo_ms, tpot_slo_ms):
    *first, last = outputs
    return (f"**eng-4.** Four requests (16-token prompts, outputs of {', '.join(map(str, first))} and {last} "
            f"tokens) arrive at t = 0 on two slots with continuous batching, {step_ms} ms per step. What is "
            f"the goodput (requests per second of makespan) under a TTFT objective of {ttft_slo_ms} ms and a "
            f"TPOT objective of {tpot_slo_ms} ms?")


# Step lengths and objectives are chosen so that no TTFT lands on its objective, except the
# book's own 100 ms at 50 ms steps, which two steps reach exactly in floating point too.
@exercise("eng-4", rtol=0.005, unit="requests/s",
          vary={"outputs": ((4, 1, 1, 2), (5, 1, 2, 2), (3, 1, 1, 3), (6, 2, 1, 2), (4, 2, 1, 1), (2, 1, 4, 1)),
                "step_ms": (30, 40, 50), "ttft_slo_ms": (100, 110, 130, 170), "tpot_slo_ms": (45, 60)},
          text=_eng4_text)
def _goodput(outputs=(4, 1, 1, 2), step_ms=50, ttft_slo_ms=100, tpot_slo_ms=60):
    """Goodput of four requests (16-token prompts) on two slots at ``step_ms`` per step."""
    r = simulate([Request(0, 16, o) for o in outputs], max_batch=2, step_time_s=step_ms / 1e3)
    return r.goodput_rps(ttft_slo_ms / 1e3, tpot_slo_ms / 1e3)


@exercise("eng-5", rtol=0, unit="blocks",
          vary={"n_requests": (4, 8, 12), "system_len": (256, 512, 1000, 1500), "own_len": (60, 100),
                "block_size": (16, 32)},
          text="**eng-5.** A replica runs {n_requests} requests that share a {system_len:,}-token system prompt; each adds "
               "{own_len} tokens of its own and generates 50. Only full blocks of a prefix are shared. With "
               "{block_size}-token blocks, how many blocks does sharing the prefix save when all "
               "{n_requests} have finished generating?")
def _prefix_blocks_saved(n_requests=8, system_len=512, own_len=100, block_size=16, output_len=50):
    """Blocks saved at peak when ``n_requests`` share a ``system_len``-token system prompt."""
    kw = dict(max_batch=n_requests, block_size=block_size, admission="prompt", step_time_s=1.0)
    shared = [Request(0, system_len + own_len, output_len, prefix_id="system", prefix_len=system_len)
              for _ in range(n_requests)]
    private = [Request(0, system_len + own_len, output_len) for _ in range(n_requests)]
    return (simulate(private, **kw).kv_peak_tokens - simulate(shared, **kw).kv_peak_tokens) // block_size


@exercise("eng-6", rtol=0.01, unit="ms",
          vary={"fixed_ms": (2.0, 4.0, 6.0), "per_token_ms": (0.05, 0.08, 0.12), "chunk": (128, 256, 512)},
          text="**eng-6.** A step costs {fixed_ms:g} ms plus {per_token_ms:g} ms per token. A 2,048-token "
               "prompt is prefilled in chunks of {chunk} tokens beside no other work. How long is the "
               "longest step (ms)?")
def _chunked_worst_step(fixed_ms=4.0, per_token_ms=0.08, chunk=256, prompt_len=2048):
    """Longest step (= worst gap between two tokens) while a ``prompt_len`` prompt is prefilled in
    ``chunk``-token chunks, with a fixed cost and a cost per token and nothing else."""
    model = StepTimeModel(fixed_ms / 1e3, per_token_ms / 1e3, 0.0, 0.0, 0.0, 0.0)
    return model.of_shape(chunks=[(0, min(chunk, prompt_len))]) * 1e3
