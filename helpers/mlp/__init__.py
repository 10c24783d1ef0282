"""Layer 4: the course's subject, the GeGLU MLP of the blog post.

``model`` (the module, its shapes, references), ``workloads`` (what the notebooks and the
recording script profile), ``plans`` (kernels, bytes and floors of each way to run it),
``variants`` (the seven implementations), ``fusion`` (the GeGLU pass read from traces),
``hub``/``hub_cache`` (the hand-tuned kernel, online or offline), ``bench``/``results`` (the
variants benchmark and the tables it gives notebook 06).
"""
