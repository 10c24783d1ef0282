"""Diagnosis: from any trace to a ranked list of fixes, with the evidence (imports no torch).

    import helpers
    from helpers.diagnose import diagnose, critical_path
    trace = helpers.load_trace("traces/h200_mlp_eager.json.gz")     # or helpers.profile(...)
    findings = diagnose(trace)            # ranked: finding, evidence, saving_upper_bound_us, lesson, fix
    path = critical_path(trace, step=1)   # the pieces of time that set the step's length

Modules: :mod:`.critical_path` (the path of a step), :mod:`.findings` (the context every rule reads
and the :class:`Findings` table), :mod:`.rules_host`, :mod:`.rules_gpu`, :mod:`.rules_ranks` (one
small function per rule), :mod:`.diagnose` (runs them and ranks), :mod:`.report` (one offline HTML
page: ``python -m helpers report TRACE``).
"""

from .critical_path import critical_path, path_summary
from .diagnose import diagnose
from .findings import Findings

__all__ = ["Findings", "critical_path", "diagnose", "path_summary"]
