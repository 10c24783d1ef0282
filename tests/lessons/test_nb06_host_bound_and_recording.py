"""Lesson 06 on an H100 (review of lessons 04/06/08): a variant whose host issues a call no faster than its kernels
run is host-bound back to back even when it lands near its kernel time, and the recorded run's training sentence
does not call its fastest step "here"."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers import nb06

COLS = ["variant", "kernel_us", "graphed_us", "e2e_nosync_us", "e2e_sync_us", "host_overhead_us", "enqueue_us"]
H100_TIMES = pd.DataFrame(
    [
        ("eager", 254.9, 256.9, 262.8, 287.2, 32.3, 169.8),
        ("compile", 220.6, 222.2, 225.2, 288.2, 67.6, 125.1),
        ("course-geglu", 221.6, 222.0, 227.4, 254.6, 33.0, 139.6),
        ("course-geglu-cat", 213.7, 212.3, 232.5, 258.2, 44.5, 227.7),
        ("course-fused", 176.4, 172.3, 174.6, 228.4, 52.1, 78.6),
    ],
    columns=COLS,
)
H200_TRAINING = pd.DataFrame(
    [
        ("eager", 704.7, 753.5, 319.3),
        ("compile", 1219.0, 1287.9, 218.6),
        ("liger", 1143.8, 1213.2, 218.6),
        ("course-geglu-cat", 1456.0, 1417.9, 269.0),
        ("course-fused-save", 798.1, 820.8, 190.3),
        ("course-fused-recompute", 937.0, 963.2, 168.3),
    ],
    columns=["variant", "step_us", "step_wall_us", "peak_mb"],
)


def test_issuing_slower_than_the_kernels_is_host_bound_even_near_the_kernel_time():
    text = nb06.hiding_sentence(H100_TIMES)
    hid = text.split("hid behind the GPU's for ", 1)[1].split(" (", 1)[0]
    assert hid == "eager, compile, course-geglu, course-fused"
    assert "course-geglu-cat (232 us against 214 us of kernels, 228 us to issue a call) came within 10%" in text
    assert "host-bound" in text


def test_the_hiding_sentence_names_the_issue_condition():
    text = nb06.hiding_sentence(H100_TIMES)
    assert "the host issuing a call faster than the GPU ran it" in text


def test_issuing_exactly_as_long_as_the_kernels_is_host_bound():
    one = H100_TIMES[H100_TIMES["variant"] == "course-fused"].assign(enqueue_us=176.4)
    text = nb06.hiding_sentence(one)
    assert "hid behind" not in text and "host-bound" in text


def test_the_recorded_training_sentence_says_in_the_recording():
    recorded = nb06.training_sentence(H200_TRAINING, live=False)
    assert "Fastest step in the recording: **eager** (705 us)" in recorded and "here" not in recorded
    assert "Fastest step here:" in nb06.training_sentence(H200_TRAINING, live=True)
    with pytest.raises(TypeError, match="live"):
        nb06.training_sentence(H200_TRAINING, live=None)
