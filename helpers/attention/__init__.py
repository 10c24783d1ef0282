"""The attention block of notebook 07, reused by the decoder of notebook 08.

Its benchmark lives in ``benchmarks/attention``; lesson 07's own views in ``helpers.lessons.nb07``.
"""
