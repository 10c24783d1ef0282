"""Layer 1: read and model a trace (imports no torch).

``files`` reads and writes trace files; ``events`` turns their events into columns and ``links``
derives lanes, nesting and launches; ``model`` holds :class:`Trace`; ``kernel_names`` reads what
a kernel name says; ``aten_ops``, ``dtypes`` and ``categories`` are the tables every reader
shares; ``queries``, ``compare`` and ``timeline`` answer questions about one or several traces.
"""
