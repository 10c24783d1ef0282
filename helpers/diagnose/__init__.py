"""Diagnosis: from any trace to a ranked list of fixes with the evidence (imports no torch):
``diagnose(trace)`` ranks findings, ``critical_path(trace, step=1)`` gives what set a step's length;
``python -m helpers report TRACE`` writes both as one offline HTML page.
"""

from .critical_path import critical_path, path_summary
from .diagnose import diagnose
from .findings import Findings

__all__ = ["Findings", "critical_path", "diagnose", "path_summary"]
