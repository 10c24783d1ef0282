"""Layer 4: the course's subject, the GeGLU MLP of the blog post: model, workloads, plans, variants,
fusion from traces, and the hand-tuned kernel loader.
"""
