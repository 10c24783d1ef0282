"""Layer 4: the attention block (notebook 07; the decoder of notebook 08 reuses it).

``model`` (``CausalSelfAttention``: QKV projections, heads, RoPE, SDPA / hand-written / the
course's kernel, KV cache), ``costs`` (FLOPs, score-matrix bytes, the hand-written plan),
``backends`` (SDPA backends: force one, which run here and why not), ``flex`` (FlexAttention),
``workloads`` (what the notebook, the benchmark and the recording script run), ``sweep`` (cost
against sequence length, measured here), ``bench``/``results`` (the benchmark and its tables).
"""
