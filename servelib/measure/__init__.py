"""Real measurements on the machine at hand, with PyTorch.

This is the only part of servelib that imports torch. Sizes shrink on a CPU so that each
measurement finishes in seconds on a 2-core machine. What it offers:

- :func:`pick_device` and :class:`DeviceInfo`: CUDA, else MPS, else CPU, and the dtype;
- :func:`time_call`: warm-up, synchronisation, CUDA events, the median of repeats;
- :func:`copy_bandwidth_Bps`, :func:`matmul_flops`, :func:`measure_ceilings`: the roofline's two ceilings;
- :class:`ToyDecoder` and :func:`toy_spec`: a random-weight GQA decoder with a KV cache;
- :func:`time_prefill`, :func:`time_decode`, :func:`batching_sweep`: the phases, timed and predicted;
- :func:`measure_profile`, :func:`save_profile`, :func:`load_profile`, :func:`load_profiles`;
- :func:`measure_kv_cache`: the memory a real decode run's KV cache took, against the formula;
- :func:`time_allreduce`: an all-reduce across processes (gloo or NCCL) at decode's message sizes.
"""
from .allreduce import AllReduceTiming, time_allreduce
from .ceilings import Ceilings, copy_bandwidth_Bps, matmul_flops, measure_ceilings
from .device import DeviceInfo, pick_device
from .kvcache import KVMeasurement, kv_toy_spec, measure_kv_cache
from .phases import PhaseTiming, Sweep, SweepPoint, batching_sweep, is_out_of_memory, time_decode, time_prefill
from .profile import describe, load_profile, load_profiles, measure_profile, profile_label, save_profile
from .timer import Timing, time_call
from .toy import ToyDecoder, toy_spec

__all__ = ["DeviceInfo", "pick_device", "KVMeasurement", "kv_toy_spec", "measure_kv_cache",
           "AllReduceTiming", "time_allreduce", "Timing", "time_call",
           "Ceilings", "copy_bandwidth_Bps", "matmul_flops", "measure_ceilings", "ToyDecoder", "toy_spec",
           "PhaseTiming", "time_prefill", "time_decode", "Sweep", "SweepPoint", "batching_sweep",
           "is_out_of_memory", "measure_profile", "save_profile", "load_profile", "load_profiles",
           "profile_label", "describe"]
