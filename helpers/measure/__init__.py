"""Layer 2: run things on this machine (torch): profile, time, ceilings and rooflines, compile costs.

``device`` (where things run, provenance), ``timing`` (the course's one way of timing),
``profile`` (``torch.profiler`` with the right settings), ``ceilings`` and ``roofline`` (what the
device can do and how close a kernel gets), ``kernel_floors`` (every kernel of a trace against its
floor), ``numerics`` (relative error), ``compile_costs`` (what ``torch.compile`` costs) and
``compile_counts`` (how many graphs it compiles, and why).
"""
