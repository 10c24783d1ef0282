"""Layers of course-geglu: ``CourseGeGLUMLP(config)``, a drop-in for Liger's ``LigerGEGLUMLP(config)``."""

from helpers.course_layers import CourseGeGLUMLP

__all__ = ["CourseGeGLUMLP"]
