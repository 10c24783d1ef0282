"""Layer 5: what a notebook shows and checks: display helpers, storage pictures, exercises, open exercises."""
