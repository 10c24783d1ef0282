"""Lesson 07's sentences over a GPU shared with other lessons, fed the numbers of an H100 run (review run 15): a
disturbed wall-time table, RoPE's strided kernels against the memory roof, spreads shown in us."""

import pandas as pd
import pytest

from helpers.lessons import nb07_readings as r

# 07 cell 52 on the shared H100 (us per call, 7 rounds); section 3 timed SDPA flash at 330 us, its kernel 265 us
H100_ROUNDS = {
    "your kernel": [605.0, 610.0, 612.0, 608.0, 650.0, 611.0, 609.0],
    "nb07.flash_attention": [556.0, 560.0, 558.0, 561.0, 570.0, 559.0, 550.0],
    "SDPA flash": [690.0, 692.0, 689.0, 695.0, 700.0, 691.0, 690.0],
}


def test_rounds_far_above_the_same_call_and_its_kernel_are_disturbed():
    assert r.wall_rounds_disturbed(H100_ROUNDS["SDPA flash"], 330.0, 265.0)
    assert not r.wall_rounds_disturbed([340.0, 335.0, 338.0], 330.0, 265.0)  # a launch's worth above: fine
    assert not r.wall_rounds_disturbed([690.0, 691.0, 692.0], 600.0, 265.0)  # close to the earlier timing
    assert not r.wall_rounds_disturbed([690.0, 691.0, 692.0], None, None)  # nothing to check against
    assert r.wall_rounds_disturbed([690.0, 691.0, 692.0], None, 265.0)
    with pytest.raises(ValueError):
        r.wall_rounds_disturbed([], 330.0, 265.0)
    with pytest.raises(ValueError):
        r.wall_rounds_disturbed([690.0], -1.0, None)
    with pytest.raises(ValueError):
        r.wall_rounds_disturbed([690.0], 330.0, None, factor=1.0)


def test_a_disturbed_table_says_so_and_never_blames_the_launch():
    race = "Your kernel, one fixed 64 x 64 tile, beat the course's"
    text = r.wall_table_sentence(H100_ROUNDS, "SDPA flash", 330.0, 265.0, race=race)
    assert text.startswith("**These rounds were disturbed.**")
    assert "691 us a call here, against 330 us when section 3 timed the same call and 265 us in its kernel" in text
    assert "(other work, or its clocks) slowed these rounds" in text and "at most the order can be read" in text
    assert "host's launch" not in text and race not in text  # no verdict over the kernels from disturbed rounds
    assert "middle half 557 to 560" in text  # in us: two decimals of ms would collapse the spread to 0.56 to 0.56


def test_undisturbed_rounds_are_ranked_with_the_race_note():
    calm = {n: [v / 2.1 for v in rounds] for n, rounds in H100_ROUNDS.items()}
    text = r.wall_table_sentence(calm, "SDPA flash", 330.0, 265.0, race="NOTE")
    assert "these rounds agree with section 3's timing and with its kernel time within 1.5x" in text
    assert text.endswith("NOTE")
    assert "disturbed" not in text
    no_check = r.wall_table_sentence(calm, "SDPA flash", None, None)
    assert "No earlier timing of `SDPA flash`" in no_check
    with pytest.raises(ValueError):
        r.wall_table_sentence(calm, "cudnn", 330.0, 265.0)


def test_ranking_sentence_in_us_keeps_the_spread_visible():
    text = r.ranking_sentence(H100_ROUNDS, unit="us", decimals=0)
    assert text.startswith(
        "Fastest by the median of its rounds: `nb07.flash_attention`, 559 us (middle half 557 to 560)"
    )
    with pytest.raises(ValueError):
        r.ranking_sentence(H100_ROUNDS, decimals=-1)


# 07 cell 12 on the H100: RoPE's kernels as helpers.kernel_table shows them (full names shortened)
STRIDED = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<...>>"
H100_ROPE = pd.DataFrame(
    {
        "short_name": [
            "elementwise_kernel<mul>",
            "elementwise_kernel<neg>",
            "CatArrayBatchedCopy<cat>",
            "elementwise_kernel<add>",
            "vectorized_elementwise_kernel<mul>",
        ],  # fmt: skip
        "name": [
            STRIDED,
            STRIDED,
            "void at::native::CatArrayBatchedCopy<...>",
            STRIDED,
            "void at::native::vectorized_elementwise_kernel<4, ...>",
        ],  # fmt: skip
        "duration_us": [55.30, 22.75, 70.50, 58.72, 0.0],
        "launched_by": ["aten::mul", "aten::neg", "aten::cat", "aten::add", "aten::mul"],
        "input_shapes": [
            "[[4, 16, 2048, 128], [2048, 128]]",
            "[[4, 16, 2048, 64]]",
            "[[[4, 16, 2048, 64], [4, 16, 2048, 64]], []]",
            "[[4, 16, 2048, 128], [4, 16, 2048, 128], []]",
            "",
        ],
    }
)


def test_memory_roof_shares_of_ropes_kernels():
    shares = r.memory_roof_shares(H100_ROPE, 3.27e12, 2)
    mul, neg, cat, add, unknown = shares.itertuples()
    assert mul.strided and neg.strided and add.strided and not cat.strided and not unknown.strided
    # q * cos reads q (33.5 MB) and cos, writes 33.5 MB: about 1.2 TB/s, a third of the 3.27 TB/s roof
    assert mul.mb_moved == pytest.approx(67.6, abs=0.1) and mul.tb_per_s == pytest.approx(1.22, abs=0.01)
    assert mul.pct_of_memory_roof == pytest.approx(37.4, abs=0.2)
    assert neg.mb_moved == pytest.approx(33.55, abs=0.01)  # half of q read, half written
    assert cat.mb_moved == pytest.approx(67.1, abs=0.1) and add.mb_moved == pytest.approx(100.7, abs=0.1)
    assert pd.isna(unknown.pct_of_memory_roof)  # no shapes recorded: no rate claimed
    with pytest.raises(ValueError):
        r.memory_roof_shares(H100_ROPE.drop(columns="input_shapes"), 3.27e12, 2)
    with pytest.raises(ValueError):
        r.memory_roof_shares(H100_ROPE, 0, 2)


def test_small_kernels_sentence_names_the_strided_kernels_and_this_runs_share():
    shares = r.memory_roof_shares(H100_ROPE.iloc[:4], 3.27e12, 2)
    text = r.small_kernels_sentence(shares, 0.50, "3.27 TB/s, H100 (measured here)", live=True)
    assert "3 of the 4 are ATen's generic strided `elementwise_kernel`, not its `vectorized_elementwise_kernel`" in text
    assert "q and k are transposed views" in text and "not simply memory bound" in text
    assert "In this profiled call they took 50% of the block's kernel time: this run's share" in text
    assert "recorded call" in r.small_kernels_sentence(shares, 0.5, "x", live=False)
    with pytest.raises(ValueError):
        r.small_kernels_sentence(shares, 1.5, "x", live=True)


def test_rope_share_sentence_says_whose_share_it_is():
    text = r.rope_share_sentence(0.5, "NVIDIA H100 80GB HBM3", live=True, best_pct_of_roof=52.0)
    assert text == (
        "Here, on NVIDIA H100 80GB HBM3, in this run's profile, RoPE's small kernels (ATen's strided elementwise "
        "kernels, at most 52% of the memory roof) took 50% of the block's kernel time: a share of one run, on a GPU "
        "other work may share."
    )
    assert "memory roof" not in r.rope_share_sentence(0.5, "NVIDIA H200", live=False, best_pct_of_roof=float("nan"))
