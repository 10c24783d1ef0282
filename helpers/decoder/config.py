"""The decoder's sizes, named as in ``transformers`` configs, and its presets (one config sizes the whole model)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..attention.model import AttentionConfig
from ..checks import positive_int, positive_number


@dataclass(frozen=True)
class DecoderConfig:
    """A Llama-style decoder: embeddings, ``num_hidden_layers`` blocks (RMSNorm, attention, RMSNorm, GeGLU MLP), a tied LM head."""

    vocab_size: int = 32000
    hidden_size: int = 2048
    intermediate_size: int = 8192
    num_hidden_layers: int = 16
    num_attention_heads: int = 16
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    max_position_embeddings: int = 4096
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    attention_bias: bool = False
    name: str = "custom"

    def __post_init__(self) -> None:
        for field in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers"):
            positive_int(field, getattr(self, field))
        positive_number("rms_norm_eps", self.rms_norm_eps)
        self.attention_config()  # the attention sizes are checked where they are owned

    def attention_config(self) -> AttentionConfig:
        """The attention block's sizes (checked by :class:`helpers.AttentionConfig`)."""
        return AttentionConfig.from_config(self)

    @property
    def kv_heads(self) -> int:
        return self.attention_config().kv_heads

    @property
    def dim_per_head(self) -> int:
        return self.attention_config().dim_per_head

    def layer_parameters(self) -> int:
        """Parameters of one block: four attention projections, three MLP projections, two norm weights."""
        h, heads, kv, d = self.hidden_size, self.num_attention_heads, self.kv_heads, self.dim_per_head
        attention = h * heads * d + 2 * h * kv * d + heads * d * h
        if self.attention_bias:
            attention += heads * d + 2 * kv * d + h
        return attention + 3 * h * self.intermediate_size + 2 * h

    def num_parameters(self) -> int:
        """All parameters: the (tied) embedding once, every block, the final norm."""
        return self.vocab_size * self.hidden_size + self.num_hidden_layers * self.layer_parameters() + self.hidden_size

    def weight_bytes(self, bytes_per_element: int = 2) -> int:
        """Bytes of weights one decode step must read: every parameter once (the LM head reads the whole tied embedding)."""
        return self.num_parameters() * positive_int("bytes_per_element", bytes_per_element)

    def with_(self, **changes: Any) -> DecoderConfig:
        """A copy with some sizes changed (e.g. ``config.with_(num_hidden_layers=2)``), renamed unless `name` is given."""
        if "name" not in changes:
            changes["name"] = f"{self.name}*"
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return (
            f"{self.name}: {self.num_hidden_layers} layers, hidden {self.hidden_size}, MLP {self.intermediate_size}, "
            f"{self.num_attention_heads} heads of {self.dim_per_head}, vocab {self.vocab_size}, "
            f"{self.num_parameters() / 1e6:,.1f}M parameters"
        )


DECODER_CONFIGS: dict[str, DecoderConfig] = {
    "tiny": DecoderConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=512,
        name="tiny",
    ),
    "small": DecoderConfig(
        vocab_size=4096,
        hidden_size=256,
        intermediate_size=1024,
        num_hidden_layers=4,
        num_attention_heads=4,
        max_position_embeddings=1024,
        name="small",
    ),
    "8x2048": DecoderConfig(num_hidden_layers=8, name="8x2048"),
    "1b": DecoderConfig(num_hidden_layers=16, name="1b"),
}
CONFIGS = DECODER_CONFIGS  # the name helpers.distributed imports


def get_config(config: str | DecoderConfig | Mapping[str, Any]) -> DecoderConfig:
    """A :class:`DecoderConfig` from a preset name (see :data:`DECODER_CONFIGS`), a config, or a dict of its fields."""
    if isinstance(config, DecoderConfig):
        return config
    if isinstance(config, str):
        if config not in DECODER_CONFIGS:
            raise ValueError(f"unknown decoder config {config!r}; presets: {', '.join(DECODER_CONFIGS)}")
        return DECODER_CONFIGS[config]
    if isinstance(config, Mapping):
        try:
            return DecoderConfig(**config)
        except TypeError as err:
            raise TypeError(f"not a DecoderConfig field: {err}") from None
    raise TypeError(f"config must be a preset name, a DecoderConfig or a dict, got {type(config).__name__}")
