"""What :func:`helpers.mlp.hub.load_geglu_mlp` found: the layer, its source, and what every source did."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pandas as pd
import torch
from torch import nn

from ..measure.timing import readable_seconds
from .model import liger_style_layer

USED, SKIPPED, FAILED, NOT_TRIED = "used", "skipped", "failed", "not tried"


class KernelLoadError(ImportError):
    """No source could provide a working layer; ``attempts`` says what each one did."""

    def __init__(self, message: str, attempts: Sequence[Attempt]) -> None:
        super().__init__(message)
        self.attempts = tuple(attempts)


# attempts and the result


@dataclass(frozen=True)
class Attempt:
    """What one source did: ``status`` is used / skipped (not tried, and why) / failed (tried, and why)."""

    source: str
    status: str
    reason: str
    seconds: float = 0.0
    notes: tuple[str, ...] = ()


def _attempts_frame(attempts: Sequence[Attempt]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "order": i + 1,
                "source": a.source,
                "status": a.status,
                "reason": a.reason,
                "time": readable_seconds(a.seconds),
                "library notes": " | ".join(a.notes),
            }
            for i, a in enumerate(attempts)
        ],
        columns=["order", "source", "status", "reason", "time", "library notes"],
    )


@dataclass(frozen=True)
class KernelLoad:
    """A layer class found by :func:`load_geglu_mlp`, where it came from, and what every source did."""

    source: str
    layer_class: type
    origin: str
    attempts: tuple[Attempt, ...]
    module: ModuleType | None = None
    variant: str | None = None
    max_abs_error: float | None = None
    device: str = "cpu"

    def attempts_frame(self) -> pd.DataFrame:
        """One row per source in the order tried: status, reason, seconds, library warnings."""
        return _attempts_frame(self.attempts)

    def explain(self) -> str:
        """One line per source: which path was taken and why the others were not."""
        lines = [f"using {self.source}: {self.origin}"]
        for a in self.attempts:
            if a.status != USED:
                lines.append(f"{a.source} {a.status}: {a.reason}")
        return "\n".join(lines)

    def layer(
        self, config: Any, device: str | torch.device | None = None, dtype: torch.dtype | None = None
    ) -> nn.Module:
        """A new layer ``layer_class(config)`` on `device` (default: where it was checked) in `dtype`."""
        mod = self.layer_class(config)
        return mod.to(device=device or self.device, dtype=dtype)

    def from_mlp(self, mlp: nn.Module) -> nn.Module:
        """The layer with the weights of `mlp` (a bias-free ``SimpleGeGLUMLP``), on its device and dtype."""
        return liger_style_layer(self.layer_class, mlp)

    def __repr__(self) -> str:
        return f"<KernelLoad {self.layer_class.__name__} from {self.source}: {self.origin}>\n" + "\n".join(
            f"  {a.source:8s} {a.status:9s} {a.reason}" for a in self.attempts
        )

    def _repr_html_(self) -> str:
        head = (
            f'<div class="course-kernel-load"><b>{html.escape(self.layer_class.__name__)}</b> from '
            f"<b>{html.escape(self.source)}</b>: {html.escape(self.origin)}"
        )
        if self.max_abs_error is not None:
            head += f"<br>checked against SimpleGeGLUMLP on {html.escape(self.device)}: max |difference| {self.max_abs_error:.2e}"
        return head + self.attempts_frame().to_html(index=False, border=0) + "</div>"
