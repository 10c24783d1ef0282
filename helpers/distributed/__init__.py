"""Several ranks: a data-parallel training step of the course's decoder under DDP or FSDP2 (notebook 09)."""
