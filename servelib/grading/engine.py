"""Exercises of the chapter "A serving engine you can read" (notebooks/06_engine.ipynb).

Every reference is computed by servelib (the simulator, its step-time model, or the run
metrics both the simulator and the engine report); its inputs are keyword arguments whose
defaults are the numbers the chapter states."""
from ..sim import Request, StepTimeModel, simulate
from .registry import exercise


@exercise("eng-1", rtol=0, unit="blocks")
def _blocks_held(prompt_len=100, generated=30, block_size=16):
    """Blocks a sequence holds after generating ``generated`` tokens of a ``prompt_len`` prompt."""
    r = simulate([Request(0, prompt_len, generated)], max_batch=1, block_size=block_size, admission="prompt",
                 step_time_s=1.0)
    return r.kv_peak_tokens // block_size


@exercise("eng-2", rtol=0.01, unit="requests")
def _littles_law(rate_per_s=12.0, mean_latency_s=2.5):
    """Mean number of requests inside a replica (Little's law, L = lambda x W)."""
    return rate_per_s * mean_latency_s


@exercise("eng-3", rtol=0.01, unit="ms")
def _fitted_step_time(fixed_ms=2.0, per_token_ms=0.1, per_key_us=1.0, per_chunk_ms=0.5, decode=32,
                      max_context=500, chunk=256):
    """A step's time from the step-time model: ``decode`` rows at longest context ``max_context``
    and one ``chunk``-token prefill chunk (no logits or prefill-pair cost)."""
    model = StepTimeModel(fixed_ms / 1e3, per_token_ms / 1e3, 0.0, per_key_us / 1e6, per_chunk_ms / 1e3, 0.0)
    return model.of_shape(decode=decode, max_context=max_context, chunks=[(0, chunk)]) * 1e3


@exercise("eng-4", rtol=1e-6, unit="requests/s")
def _goodput(outputs=(4, 1, 1, 2), step_s=0.05, ttft_slo_s=0.1, tpot_slo_s=0.06):
    """Goodput of four requests (16-token prompts) on two slots at ``step_s`` per step."""
    r = simulate([Request(0, 16, o) for o in outputs], max_batch=2, step_time_s=step_s)
    return r.goodput_rps(ttft_slo_s, tpot_slo_s)


@exercise("eng-5", rtol=0, unit="blocks")
def _prefix_blocks_saved(n_requests=8, system_len=512, own_len=100, output_len=50, block_size=16):
    """Blocks saved at peak when ``n_requests`` share a ``system_len``-token system prompt."""
    kw = dict(max_batch=n_requests, block_size=block_size, admission="prompt", step_time_s=1.0)
    shared = [Request(0, system_len + own_len, output_len, prefix_id="system", prefix_len=system_len)
              for _ in range(n_requests)]
    private = [Request(0, system_len + own_len, output_len) for _ in range(n_requests)]
    return (simulate(private, **kw).kv_peak_tokens - simulate(shared, **kw).kv_peak_tokens) // block_size


@exercise("eng-6", rtol=0.01, unit="ms")
def _chunked_worst_step(fixed_ms=4.0, per_token_ms=0.08, prompt_len=2048, chunk=256):
    """Longest step (= worst gap between two tokens) while a ``prompt_len`` prompt is prefilled in
    ``chunk``-token chunks, with a fixed cost and a cost per token and nothing else."""
    model = StepTimeModel(fixed_ms / 1e3, per_token_ms / 1e3, 0.0, 0.0, 0.0, 0.0)
    return model.of_shape(chunks=[(0, min(chunk, prompt_len))]) * 1e3
