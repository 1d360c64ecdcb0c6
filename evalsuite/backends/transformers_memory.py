"""The transformers backend's serving memory: the weights' size, and the peak working set of generation.

CUDA: the allocator's peak since loading (weights + KV cache + activations). CPU: the weights'
size plus how far the process's peak RSS rose above its RSS right after loading (Linux VmHWM,
reset then). Process RSS itself is not comparable between variants run in one process (the
interpreter, libraries and the allocator's leftovers from earlier variants are in it: a baseline
measured after three quantized variants read 35% higher). Without /proc, the process peak RSS.
"""

from __future__ import annotations

import gc

from ..models import ondemand


class ServingMemory:
    """The CPU side of a backend's serving memory, measured from the end of its load."""

    def __init__(self) -> None:
        self.model_mb: float | None = None  #: the loaded weights' size, in MB
        self._rss_reset = False
        self._rss_after_load: float | None = None
        self._rss_batch_start: float | None = None
        self._seen_peak_mb = 0.0  #: the serving peak before the last batch reset the process's peak
        self.cuda_seen_mb = 0.0  #: CUDA: the allocator's peak before the last batch reset it

    def loaded(self, model_mb: float) -> None:
        """Start measuring: the peak counts serving memory (weights + generation), not the load-time
        transients (bnb quantizes fp32 weights while loading) nor what earlier variants freed."""
        self.model_mb = model_mb
        gc.collect()
        malloc_trim()
        self._rss_reset = _reset_rss_peak()
        self._rss_after_load = _proc_status_mb("VmRSS")

    def cpu_peak_mb(self) -> float:
        """The weights plus the rise of the peak RSS since loading (the process peak without /proc)."""
        if self._rss_reset and self._rss_after_load is not None:
            since_load = (self.model_mb or 0.0) + max(0.0, _rss_peak_mb() - self._rss_after_load)
            return max(self._seen_peak_mb, since_load, self.batch_peak_mb() or 0.0)
        return _rss_peak_mb()

    def batch_start(self) -> None:
        """Measure one batch's peak from here (the serving peak so far is kept): freed heap is
        returned first, so a batch's rise is its own, not hidden in an earlier batch's leftovers."""
        if not self._rss_reset:
            return
        self._seen_peak_mb = self.cpu_peak_mb()
        malloc_trim()
        self._rss_reset = _reset_rss_peak()
        self._rss_batch_start = _proc_status_mb("VmRSS")

    def batch_peak_mb(self) -> float | None:
        """The weights plus how far the peak RSS rose during the batch (None without /proc)."""
        if not self._rss_reset or self._rss_batch_start is None:
            return None
        return (self.model_mb or 0.0) + max(0.0, _rss_peak_mb() - self._rss_batch_start)


def weights_mb(*modules: object) -> float:
    """MB of the weights and buffers of the given models (None entries skipped)."""

    def size(m: object) -> float:  # torchao and HQQ tensors: their stored size (get_memory_footprint sees their logical dtype)
        return ondemand.weights_mb(m) * 2**20 if ondemand.stored_differently(m) else m.get_memory_footprint()  # type: ignore[attr-defined]

    return sum(size(m) for m in modules if m is not None) / 2**20


def malloc_trim() -> None:
    """Return freed heap to the OS (glibc), so the next variant's peak RSS is its own."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_rss_peak() -> bool:
    """Reset the process's peak RSS (Linux VmHWM), so a backend reports its own peak."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _proc_status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _rss_peak_mb() -> float:
    peak = _proc_status_mb("VmHWM")
    if peak is not None:
        return peak
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
