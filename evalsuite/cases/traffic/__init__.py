"""Traffic as case sets: logged chat-completions requests read (Batch API, request/response pairs,
`messages` datasets), their scenario and expectations inferred, duplicates collapsed, a stratified sample
scrubbed of personal data and secrets and written as draft cases (docs/traffic.md)."""

from .api import TrafficReport, TrafficSettings, from_traffic
from .readers import read_traffic
from .records import ReadResult, SetAside, Skipped, TrafficRequest

__all__ = ["ReadResult", "SetAside", "Skipped", "TrafficReport", "TrafficRequest", "TrafficSettings", "from_traffic", "read_traffic"]
