"""The tables of one trace, and the notes on what could not be read cleanly: nothing is dropped or
changed without a note saying so, with an example.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .links import link_notes
from .stream import SourceText


@dataclass
class TraceTables:
    """The tables of one trace. ``events`` holds complete ("X") events only, sorted by start time;
    ``memory`` the allocations and frees of a trace recorded with ``profile_memory=True``."""

    events: pd.DataFrame
    process_names: dict[str, str] = field(default_factory=dict)
    thread_names: dict[tuple[str, str], str] = field(default_factory=dict)
    flow_count: int = 0
    unmatched_flows: int = 0
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    dropped_without_dur: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # what was left out: count
    fixed: dict[str, int] = field(default_factory=dict)  # what was kept but changed: count
    examples: dict[str, str] = field(default_factory=dict)  # one example per kind ("dur" for dropped_without_dur)
    source: SourceText | None = None  # the file the events were streamed from (to save a copy)
    # the '[memory]' instant events (helpers.trace.memory_events), None when the trace has none
    memory: pd.DataFrame | None = None

    def _eg(self, what: str) -> str:
        example = self.examples.get(what)
        return f" (e.g. {example})" if example else ""

    @property
    def notes(self) -> list[str]:
        """What was left out or could not be linked while reading, in words (empty when nothing was)."""
        out = []
        if self.dropped_without_dur:
            out.append(
                f"{self.dropped_without_dur:,} complete events had no 'dur' and were left out "
                f"(they cannot be placed on a timeline){self._eg('dur')}"
            )
        # One-ended flow arrows are common (launches at the window's edges) and change nothing here:
        # kernels are linked through 'correlation' and 'External id', not through flows. What
        # matters is a kernel that could not be linked at all (helpers.trace.links says why).
        out.extend(link_notes(self.events))
        for what, count in sorted(self.skipped.items()):
            out.append(f"{count:,} {what} skipped{self._eg(what)}")
        for what, count in sorted(self.fixed.items()):
            out.append(f"{count:,} {what}{self._eg(what)}")
        return out
