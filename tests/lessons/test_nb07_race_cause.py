"""Lesson 07's race note names a cause only from kernel times (H100 run 17 review, row N2): wall times alone
leave it open, a shorter kernel points at the kernels and their tiles, equal kernels at the launchers."""

import pytest

from helpers.lessons import nb07

# cell 52 of the H100 run: wall rounds in ms, your kernel 239 us, the course's 295 us
ROUNDS = {
    "your kernel": [0.237, 0.238, 0.239, 0.239, 0.240, 0.240, 0.258],
    "nb07.flash_attention": [0.284, 0.287, 0.290, 0.295, 0.300, 0.308, 0.459],
}
ARGS = (ROUNDS, "your kernel", "nb07.flash_attention", "NVIDIA H100 80GB HBM3")


def test_wall_times_alone_name_no_cause():
    note = nb07.readings.kernel_race_note(*ARGS)
    assert note.startswith("On the clock, which includes each launcher's host work, your kernel")
    assert "by 1.23x on NVIDIA H100" in note and "tiles" not in note and "H200" not in note


def test_kernel_times_decide_between_the_kernels_and_the_launchers():
    shorter = nb07.readings.kernel_race_note(*ARGS, {"your kernel": 230.0, "nb07.flash_attention": 280.0})
    assert "In kernel time too (the course's 280 us against your 230 us in one profile of each: your kernel is 1.22x faster)" in shorter  # fmt: skip
    assert "tiles a sweep found fastest on an H200" in shorter
    # cell 57 had the course's wall time equal to its kernel time: equal kernels leave the launchers
    equal = nb07.readings.kernel_race_note(*ARGS, {"your kernel": 232.0, "nb07.flash_attention": 236.0})
    assert (
        "the two are about equal (the course's 236 us against your 232 us" in equal and "launchers' host work" in equal
    )
    assert "H200" not in equal


def test_kernel_times_are_checked():
    with pytest.raises(ValueError, match="no kernel time for 'nb07.flash_attention'"):
        nb07.readings.kernel_race_note(*ARGS, {"your kernel": 230.0})
    with pytest.raises(ValueError, match="positive finite"):
        nb07.readings.kernel_race_note(*ARGS, {"your kernel": 0.0, "nb07.flash_attention": 280.0})
