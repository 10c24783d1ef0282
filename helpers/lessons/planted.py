"""Used by notebook 10: a small training loop with planted problems (``item``, ``copies``, ``pointwise``,
``optimizer``, ``fp32``), each fixable on its own: :func:`build_loop` removes those in `fixed`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

PROBLEMS = ("item", "copies", "pointwise", "optimizer", "fp32")
# The rule of helpers.diagnose that points at each planted problem.
RULE_OF = {
    "unfused_optimizer": "optimizer",
    "host_pointwise_chains": "pointwise",
    "unfused_elementwise": "pointwise",
    "host_sync": "item",
    "pageable_copies": "copies",
    "copies_on_path": "copies",
    "fp32_gemm": "fp32",
}
SIZES = {"cpu": dict(batch=64, width=64, layers=24), "cuda": dict(batch=256, width=1024, layers=24)}


def planted_problem(rule: str) -> str:
    """The planted problem a finding's rule points at (``"unfused_optimizer"`` -> ``"optimizer"``), else the rule."""
    return RULE_OF.get(str(rule), str(rule))


def tanh_gelu_by_hand(x: torch.Tensor) -> torch.Tensor:
    """GeLU (tanh form) written out: eight elementwise operators, each a pass over memory."""
    return x * 0.5 * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


class Net(torch.nn.Module):
    """`layers` small Linear layers, a GeLU after every other one: many small parameters."""

    def __init__(self, width: int, layers: int, fused_gelu: bool) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
        self.fused_gelu = fused_gelu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i % 2:  # a GeLU after every other layer
                x = F.gelu(x, approximate="tanh") if self.fused_gelu else tanh_gelu_by_hand(x)
        return x


@dataclass
class Loop:
    """One training step with some problems fixed: call ``loop.step()``; ``loop.losses`` keeps the losses."""

    step: Callable[[], None]
    fixed: frozenset
    device: torch.device
    model: Net
    losses: list = field(default_factory=list)

    def describe(self) -> str:
        left = [p for p in PROBLEMS if p not in self.fixed]
        return f"fixed: {', '.join(sorted(self.fixed)) or 'nothing'}; planted still: {', '.join(left)}"


def build_loop(fixed: Iterable[str] = (), device: str | torch.device | None = None, seed: int = 0) -> Loop:
    """The planted training loop on `device` with the `fixed` problems removed; same seed, weights and data always."""
    fixed = frozenset(fixed)
    unknown = fixed - set(PROBLEMS)
    if unknown:
        raise ValueError(f"unknown problems {sorted(unknown)}; the planted ones are {', '.join(PROBLEMS)}")
    dev = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    size = SIZES["cuda" if dev.type == "cuda" else "cpu"]
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = Net(size["width"], size["layers"], fused_gelu="pointwise" in fixed).to(dev)
    # the batch lives in host memory, as a data loader hands it over
    x_host = torch.randn(size["batch"], size["width"], generator=gen)
    y_host = torch.randn(size["batch"], size["width"], generator=gen)
    if "copies" in fixed and dev.type == "cuda":
        x_host, y_host = x_host.pin_memory(), y_host.pin_memory()
    if "optimizer" in fixed:
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False)
    bf16 = "fp32" in fixed and dev.type == "cuda"
    non_blocking = "copies" in fixed
    losses: list = []

    def step() -> None:
        x = x_host.to(dev, non_blocking=non_blocking)
        y = y_host.to(dev, non_blocking=non_blocking)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            loss = F.mse_loss(model(x).float(), y)
        loss.backward()
        opt.step()
        # .item() waits for the GPU to finish the step; keeping the tensor does not
        losses.append(loss.detach() if "item" in fixed else loss.item())

    return Loop(step, fixed, dev, model, losses)
