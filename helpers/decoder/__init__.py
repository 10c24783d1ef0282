"""Layer 5: a whole model, a small Llama-style decoder built from the attention block and the GeGLU MLP (notebook 08).

``config`` (sizes and presets), ``model`` (RMSNorm, the block, the decoder, caches, scopes per
part), ``layers`` (swap in the course's kernels, recompute the MLP, compile by region),
``generate`` (prefill, decode step by step, CUDA graphs, tokens per second), ``training`` (a
training step, AdamW, its memory), ``breakdown`` (time by model part and GPU idle time from a
trace), ``configurations`` (the named ways to run it, and how each is measured), ``workloads``
(what the notebook, the benchmark and the recording script run),
``bench``/``results`` (the benchmark of every configuration and the tables it gives the notebook).
"""
