"""The attention block (notebook 07; the decoder of notebook 08 reuses it): ``model``, ``costs``,
``backends`` (SDPA), ``flex`` (FlexAttention), ``workloads`` (what the notebook and the recording run).
The benchmark lives in ``benchmarks/attention``; lesson 07's own views in ``helpers.lessons.nb07``.
"""
