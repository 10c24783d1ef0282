"""Generation (prefill, then one token at a time) and its timing. :class:`Generator` keeps every step's
shapes and addresses fixed and never syncs the host, so a step can be captured in a CUDA graph."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from ..checks import bounded_int, positive_int
from ..measure.ceilings import Ceilings
from ..measure.timing import time_end_to_end, time_per_call
from .model import Decoder


def _run_eager() -> contextlib.AbstractContextManager:
    """Compiled functions run their original Python (``torch.compiler.set_stance("force_eager")``, torch >= 2.6)."""
    set_stance = getattr(torch.compiler, "set_stance", None)
    return set_stance("force_eager") if set_stance is not None else contextlib.nullcontext()


GRAPH_WARMUP_STEPS = 3  # decode steps run on a side stream before capture (compiles, autotunes, allocates)


class Generator:
    """Greedy generation with a static KV cache (``graph=True``: decode steps replayed from a CUDA graph):
    ``prefill(prompts)`` returns the first new token, each ``step()`` the next in the same buffer."""

    def __init__(
        self,
        model: Decoder,
        batch: int,
        max_len: int,
        graph: bool = False,
        prefill_logits: str = "all",
        compiled_prefill: bool = True,
    ) -> None:
        if not isinstance(model, Decoder):
            raise TypeError(f"model must be a helpers Decoder (build_model), got {type(model).__name__}")
        self.model = model
        self.batch, self.max_len = positive_int("batch", batch), positive_int("max_len", max_len)
        weight = model.embed_tokens.weight
        self.device = weight.device
        if graph and self.device.type != "cuda":
            raise ValueError(
                "graph=True needs the model on a CUDA GPU: CUDA graphs replay GPU launches. On a CPU "
                "there is nothing to capture; compare eager and torch.compile instead"
            )
        self.use_graph = bool(graph)
        if prefill_logits not in ("all", "last"):
            raise ValueError(f"prefill_logits must be 'all' or 'last', got {prefill_logits!r}")
        self.prefill_logits = prefill_logits
        self.compiled_prefill = bool(compiled_prefill)
        self.cache = model.new_cache(batch, max_len)
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=self.device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.length = 0

    def _decode(self) -> None:
        logits = self.model(self.token, self.cache)  # writes the cache at its position, advances it
        self.token.copy_(logits[:, -1].argmax(-1, keepdim=True))

    @torch.no_grad()
    def prefill(self, prompts: torch.Tensor) -> torch.Tensor:
        """Run the prompts ``[batch, prompt_len]`` (filling the cache from position 0); the first new token."""
        if not isinstance(prompts, torch.Tensor) or prompts.dim() != 2 or prompts.shape[0] != self.batch:
            shape = tuple(prompts.shape) if isinstance(prompts, torch.Tensor) else type(prompts).__name__
            raise ValueError(f"prompts must be [batch={self.batch}, prompt_len] token ids, got {shape}")
        if prompts.shape[1] >= self.max_len:
            raise ValueError(f"a prompt of {prompts.shape[1]} tokens leaves no room in a cache of {self.max_len}")
        with contextlib.nullcontext() if self.compiled_prefill else _run_eager():
            logits = self.model(prompts.to(self.device), self.cache, last_only=self.prefill_logits == "last")
        self.token.copy_(logits[:, -1].argmax(-1, keepdim=True))
        self.length = prompts.shape[1]
        return self.token

    def capture(self) -> None:
        """Capture one decode step in a CUDA graph (after warm-up steps on a side stream; the state is restored)."""
        if not self.use_graph:
            raise ValueError("this Generator was built with graph=False")
        if self.length == 0:
            raise ValueError("prefill first: the captured step continues a filled cache")
        if self.length + GRAPH_WARMUP_STEPS > self.max_len:
            raise ValueError(f"capture needs {GRAPH_WARMUP_STEPS} free positions for its warm-up steps")
        position, token = self.cache.position.clone(), self.token.clone()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(GRAPH_WARMUP_STEPS):
                self._decode()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.cache.position.copy_(position)  # the warm-up's keys sit beyond the position: never read
        self.token.copy_(token)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), torch.no_grad():
            self._decode()
        self.graph = graph

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        """One decode step: the next token ``[batch, 1]`` (the generator's buffer; clone it to keep it)."""
        if self.length == 0:
            raise ValueError("call prefill(prompts) before step()")
        if self.length >= self.max_len:
            raise ValueError(f"the cache is full ({self.max_len} positions): build a Generator with a larger max_len")
        if self.use_graph:
            if self.graph is None:
                self.capture()
            self.graph.replay()
        else:
            self._decode()
        self.length += 1
        return self.token

    @torch.no_grad()
    def generate(self, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
        """Prefill, then decode: the `new_tokens` generated tokens ``[batch, new_tokens]``."""
        new_tokens = bounded_int("new_tokens", new_tokens, 1, self.max_len)
        out = [self.prefill(prompts).clone()]
        for _ in range(new_tokens - 1):
            out.append(self.step().clone())
        return torch.cat(out, dim=1)


def decode_timing(gen: Generator, prompts: torch.Tensor, steps: int = 50) -> dict[str, Any]:
    """Time decode steps after a prefill: back to back (the real loop), synchronised each, and the host's time
    to issue one; needs ``2 * steps + 2`` free positions."""
    steps = bounded_int("steps", steps, 1, 10_000)
    needed = prompts.shape[1] + 2 * steps + 2 + (GRAPH_WARMUP_STEPS if gen.use_graph else 0)
    if needed > gen.max_len:
        raise ValueError(
            f"decode_timing needs max_len >= {needed} (prompt + 2 x steps + 2), the generator has {gen.max_len}"
        )
    gen.prefill(prompts)
    if gen.use_graph:
        gen.capture()
    # the token buffer is passed only so the timing knows which device to synchronise
    timing = time_end_to_end(lambda _token: gen.step(), gen.token, iters=steps)
    step_us = timing.get("nosync_events_us", timing["nosync_us"])
    return {
        "batch": gen.batch,
        "prompt_len": int(prompts.shape[1]),
        "steps": steps,
        "step_us": step_us,
        "step_sync_us": timing["sync_us"],
        "host_us": timing.get("enqueue_us"),
        "tokens_per_s": gen.batch * 1e6 / step_us,
    }


def prefill_timing(gen: Generator, prompts: torch.Tensor, repeats: int = 10) -> dict[str, Any]:
    """Median time of one prefill of `prompts` (synchronised), and prompt tokens per second."""
    prompts = prompts.to(gen.device)  # the timing synchronises the inputs' device
    seconds = time_per_call(gen.prefill, prompts, repeats=repeats, warmup=2)
    tokens = prompts.shape[0] * prompts.shape[1]
    return {
        "batch": int(prompts.shape[0]),
        "prompt_len": int(prompts.shape[1]),
        "prefill_us": seconds * 1e6,
        "tokens_per_s": tokens / seconds,
    }


def weight_read_floor_us(model: Decoder | int, ceilings: Ceilings) -> float:
    """The batch-1 decode step's floor (us): every weight read once at the memory roof (KV cache left out)."""
    if not isinstance(ceilings, Ceilings):
        raise TypeError(f"ceilings must be a helpers.Ceilings (measure_ceilings()), got {ceilings!r}")
    if isinstance(model, Decoder):
        nbytes = model.config.weight_bytes(model.embed_tokens.weight.element_size())
    else:
        nbytes = positive_int("weight bytes", model)
    return nbytes / ceilings.bandwidth_bytes_per_s * 1e6
