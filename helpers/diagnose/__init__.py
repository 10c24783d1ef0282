"""Diagnosis: from any trace to a ranked list of fixes, with the evidence (imports no torch)."""

from .critical_path import critical_path, path_summary

__all__ = ["critical_path", "path_summary"]
