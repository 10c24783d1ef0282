"""Several ranks: a data-parallel training step of the course's decoder under DDP or FSDP2 (notebook 09).

``options`` (what one run does: the launcher and ``scripts/ddp_step.py`` share it), ``workloads``
(the lesson's runs), ``launch`` (torchrun from a notebook, with a timeout and progress), ``runs``
(a run's folder read back), ``predict`` (what a larger DDP bucket does to the step time, from one
trace; no torch). Reading collectives from any trace is the engine's: :mod:`helpers.trace.collectives`.
"""
