"""Lesson 02 shows the decoder's long layout explanation as a list of sentences (a GPU review: one 900-character
block)."""

import pytest

import helpers


def test_02_long_explanations_read_as_a_list_of_sentences():
    from helpers.lessons import nb02

    text = helpers.decode_kernel("nvjet_sm90_tst_8x64_64x16_2x1_v_bz_bias_TNN")["explain"]
    bullets = nb02.as_bullets(text).splitlines()
    assert len(bullets) >= 5 and all(b.startswith("- ") for b in bullets)
    assert "".join(b[2:] for b in bullets).replace(" ", "") == text.replace(" ", "")  # nothing lost
    with pytest.raises(TypeError):
        nb02.as_bullets(None)
