"""Layer 6: several ranks, a data-parallel training step of the course's decoder (notebook 09).

``options`` (what one run does, shared by the launcher and the script), ``worker`` (what every rank
of ``scripts/ddp_step.py`` does: DDP or FSDP2, timing, profiling, a straggler), ``launch`` (torchrun
from a notebook, with a timeout and progress), ``results`` (a run's folder read back, the 2-GPU
references), ``analysis`` (collectives, communication per step, ranks side by side, from the
traces alone; no torch), ``predict`` (what a larger DDP bucket does to the step time, from one
trace; no torch), ``bench`` (the 2-GPU reference run, ``benchmarks/ddp.py``).
"""
