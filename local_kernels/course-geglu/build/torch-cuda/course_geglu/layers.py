"""Layers of course-geglu: ``CourseGeGLUMLP(config)``, a drop-in for Liger's ``LigerGEGLUMLP(config)``."""

from helpers.fused.modules import CourseGeGLUMLP

__all__ = ["CourseGeGLUMLP"]
