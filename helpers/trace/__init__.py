"""Layer 1: read and model a trace (imports no torch).

``files`` reads and writes trace files; ``events`` turns their events into columns and ``links``
derives lanes, nesting and launches (``correlation`` matches launches to device work, process by
process); ``model`` holds :class:`Trace`; ``kernel_names`` reads what a kernel name says;
``aten_ops``, ``dtypes`` and ``categories`` are the tables every reader shares; ``queries``,
``compare`` and ``timeline`` answer questions about one or several traces; ``ranks`` joins the
traces of several ranks into one run, ``overlap`` splits a GPU's time into compute,
communication, overlap and idle (with its cause), ``flops`` gives achieved TFLOP/s from shapes.
"""
