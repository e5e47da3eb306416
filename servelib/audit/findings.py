"""What the audit reports: one stable code per beginner mistake, and a finding per mistake found.

The codes follow the syllabus's list of beginner mistakes in order, then three plans that
cannot work as written (a concurrency target, latency targets or a token budget that the
hardware or the engine cannot meet), plus ``claimed-number-wrong`` for a claimed number
that is wrong for a reason not on the list.
Codes are stable: tests, plans and readers refer to them by name.
"""
from __future__ import annotations

from dataclasses import dataclass

#: code -> (the mistake, one sentence on why it is a mistake).
CODES = {
    "concurrency-from-flops": (
        "Sizing concurrency from FLOPs",
        "Each live conversation holds its KV cache in memory, and memory runs out long before "
        "the arithmetic does, so concurrency is a memory question."),
    "attention-heads-for-kv": (
        "Attention heads used instead of KV heads",
        "Only the KV heads store keys and values, so counting every attention head inflates a "
        "GQA model's cache by the group size and shrinks its concurrency by as much."),
    "no-working-reserve": (
        "No working-space reserve",
        "Activations, temporary buffers and allocator fragmentation need memory too, so a plan "
        "that gives every byte after the weights to the KV cache runs out of memory under load."),
    "weights-exceed-device": (
        "Weights larger than a device",
        "Each device must hold its share of the weights before any cache, so the model needs a "
        "tensor-parallel degree at which that share fits."),
    "batch1-benchmark": (
        "Batch-1 decode benchmarked, hardware blamed",
        "Decode at batch 1 reads every weight to produce one token, about 1 FLOP per byte "
        "against a ridge point of hundreds, so the fix is batching, not more GPUs."),
    "static-batching-uneven-outputs": (
        "Static batching with variable output lengths",
        "A static batch runs until its longest member finishes, so short requests wait and "
        "their slots idle; continuous batching retires and admits at every step."),
    "admit-on-prompt-length": (
        "Admission on prompt length",
        "Sequences grow as they decode, so admitting on the prompt alone over-commits memory "
        "and the out-of-memory kills the whole in-flight batch; admit on prompt plus maximum output."),
    "queue-never-fits": (
        "A request that can never fit is queued",
        "A request whose final length exceeds the whole KV budget can never be admitted, so "
        "queueing it blocks the queue forever; reject it on arrival with a reason."),
    "ptu-break-even-without-mix": (
        "PTU break-even quoted without the workload's mix",
        "Where a commitment's capacity is counted in tokens of any kind (or weighs output other "
        "than at the price ratio), its break-even utilisation goes as one over the blended price, "
        "which moves with the output fraction, so the figure is only true at the mix it was "
        "computed for; where output weighs exactly the price ratio the mix cancels and moves the "
        "number of PTUs needed instead."),
    "tokens-per-ptu-constant": (
        "Tokens per PTU treated as a datasheet constant",
        "Output tokens count several times an input token toward a PTU's throughput, so the "
        "tokens a commitment can serve depend on the mix."),
    "floor-sized-to-peak": (
        "Dedicated capacity sized toward the peak, above its break-even quantile",
        "A token/min of floor pays for itself only in the minutes when demand exceeds it, so the "
        "cheapest floor is the demand level exceeded a break-even share u* of the time (the "
        "1 - u* quantile, p50 only when u* is 50%), and a floor sized to the peak, or to p50 by "
        "rule when u* is far from 50%, idles below its break-even; spill the rest to "
        "pay-as-you-go, degrading in cost rather than availability."),
    "self-hosting-gpu-hours-only": (
        "Self-hosting case with only GPU hours",
        "Idle capacity and the engineers who run inference are paid whether or not tokens "
        "flow, so a case that counts GPU hours only understates the unit cost."),
    "max-tp-degree": (
        "TP degree maximised",
        "Every extra device in a tensor-parallel group adds communication and holds a smaller "
        "share of the work, so use the smallest degree that fits the model and the demand."),
    "shared-interactive-batch": (
        "Interactive and batch tiers on one deployment",
        "A batch size that suits overnight throughput gives chat users slow tokens and one that "
        "suits chat wastes the batch tier's hardware, so one tier is always wrong."),
    "quantization-speedup-from-bytes": (
        "Quantized weights counted as a proportional speed-up",
        "Weight-only quantization shrinks the weights but not the KV reads nor the arithmetic, "
        "its group scales add bytes and its kernels stream more slowly, so int4 weights never "
        "decode four times as fast as 16-bit ones."),
    "speculative-at-large-batch": (
        "Speculative decoding at a batch where it slows decoding",
        "A speculative round is cheap only while reading the weights dominates each step, so "
        "at large batches, where the verification pass turns compute-bound and the draft's own "
        "KV reads grow with every sequence, a round costs more than the tokens it yields."),
    "one-pool-tight-slos": (
        "One pool for prefill and decode under a tight token-latency target",
        "A step that carries a prompt lasts as long as the prompt's arithmetic and every sequence "
        "decoding beside it waits that long for its next token, so a pool that puts whole prompts "
        "into decode steps misses a TPOT target below that step; chunk prompts to fit the target "
        "or run prefill and decode on separate pools, whichever carries the load on fewer GPUs."),
    "target-concurrency-unmet": (
        "Target concurrency beyond what the GPUs can hold",
        "Every live conversation needs its KV cache in the memory the weights and reserve leave "
        "free, so when no tensor-parallel degree of these GPUs holds the target the plan needs "
        "more GPUs or shorter contexts, not a different split."),
    "slo-below-roofline": (
        "Latency target below the deployment's own step times",
        "A first token cannot come sooner than one prompt's prefill on an idle replica, nor the "
        "next token sooner than one decode step at the running batch, and queueing only adds to "
        "both, so a target below those times is missed by every request."),
    "token-budget-below-batch": (
        "Chunked-prefill token budget smaller than the batch",
        "Every running sequence uses one token of a step's budget to decode, so a budget below "
        "the batch limit cannot run a full batch nor admit a prompt, and the engine refuses it."),
    "claimed-number-wrong": (
        "A claimed number does not follow from the plan",
        "The plan states a figure that servelib recomputes differently from the plan's own "
        "inputs, for a reason not on the list of known mistakes."),
}


@dataclass(frozen=True)
class Finding:
    """One mistake found in a plan.

    ``code``: a key of :data:`CODES`. ``field``: the plan field (``table.key``) at fault.
    ``wrong`` and ``right``: the value the plan states or implies and the value servelib
    derives (numbers or policy names; ``None`` where the mistake has no single value).
    ``unit``: of ``wrong`` and ``right``. ``detail``: the numbers behind the finding in words.
    """

    code: str
    field: str
    wrong: object = None
    right: object = None
    unit: str = ""
    detail: str = ""

    def __post_init__(self):
        if self.code not in CODES:
            raise ValueError(f"code must be one of {', '.join(CODES)}; got {self.code!r}")

    @property
    def mistake(self) -> str:
        """The mistake, as the syllabus names it."""
        return CODES[self.code][0]

    @property
    def why(self) -> str:
        """One sentence on why it is a mistake."""
        return CODES[self.code][1]
