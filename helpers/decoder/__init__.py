"""A whole model, a small Llama-style decoder built from the attention block and the GeGLU MLP."""
