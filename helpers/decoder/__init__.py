"""A whole model, a small Llama-style decoder built from the attention block and the GeGLU MLP.

``config`` (sizes, presets), ``model`` (norm, block, decoder, caches, scopes per part), ``layers``
(the course's kernels, recomputation, compiled blocks), ``generate`` (prefill, decode, CUDA graphs),
``training`` (a training step), ``breakdown`` (time by model part from a trace), ``workloads``.
"""
