"""Layer 2: run things on this machine (torch): profile, time, ceilings and rooflines, compile costs."""
