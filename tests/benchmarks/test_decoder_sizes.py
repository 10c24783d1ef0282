"""The decoder benchmark's sizes on GPUs of every size (benchmarks/decoder/configurations.py)."""

from __future__ import annotations

import pytest

import helpers
from benchmarks.decoder.configurations import (
    TRAIN_BYTES_PER_1024_TOKENS,
    TRAIN_STATE_BYTES_PER_PARAMETER,
    gpu_sizes,
)
from helpers.decoder.workloads import GPU_SIZES


def test_gpu_sizes_fit_the_training_batch_to_the_gpu_memory():
    """A run on an L4 or a 40 GB A100 must not try the H200's 16 x 1024-token training step."""
    gib = 2**30
    assert gpu_sizes(141 * gib) == GPU_SIZES and gpu_sizes(80 * gib) == GPU_SIZES  # H200, H100/A100 80 GB
    batches = {gb: gpu_sizes(gb * gib).train_batch for gb in (48, 40, 24, 16, 8)}
    assert batches == {48: 8, 40: 8, 24: 4, 16: 2, 8: 1}
    assert gpu_sizes(24 * gib).prefill_batch == GPU_SIZES.prefill_batch  # only the training batch changes
    # the estimate is the recorded peak: eager training of the 1b preset at 16 x 1024 on the H200
    recorded = helpers.load_results("h200_decoder").value("configurations", "train_peak_gb", configuration="eager")
    params = helpers.DECODER_CONFIGS["1b"].num_parameters()
    estimate = TRAIN_STATE_BYTES_PER_PARAMETER * params + GPU_SIZES.train_batch * TRAIN_BYTES_PER_1024_TOKENS
    assert estimate / 1e9 == pytest.approx(recorded, rel=0.05)
    with pytest.raises(ValueError, match="total_memory_bytes"):
        gpu_sizes(0)
