"""Real measurements on the machine at hand, with PyTorch.

This is the only part of servelib that imports torch. Sizes shrink on a CPU so that each
measurement finishes in seconds on a 2-core machine.
"""
from .device import DeviceInfo, pick_device
from .kvcache import KVAllocation, allocate_kv_cache

__all__ = ["DeviceInfo", "pick_device", "KVAllocation", "allocate_kv_cache"]
