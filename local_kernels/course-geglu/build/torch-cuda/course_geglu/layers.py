"""Layers of course-geglu: ``CourseGeGLUMLP(config)``, a drop-in for Liger's ``LigerGEGLUMLP(config)``."""

from helpers.kernels.modules import CourseGeGLUMLP

__all__ = ["CourseGeGLUMLP"]
