"""Used by the lessons' checkers and sentences: a text that starts a sentence gets a capital, unless it starts with
a name from the code (``lm_head``, ``dX``, ``q``), which is written as the code writes it."""

from __future__ import annotations

import re

# A first word is code when it holds what prose never does: an underscore, an operator, a digit, a bracket, a dot
# inside it, a backtick, or a capital after its first letter (dY).
_CODE = re.compile(r"[_=()\[\]`/0-9]|\.\w|^.[^\s]*[A-Z]")
# One-letter words that prose starts a sentence with; any other lone letter is a variable (q, k, v).
_PROSE_LETTERS = {"a", "i"}


def starts_with_code(text: str) -> bool:
    """Whether the first word of `text` is a name from the code rather than an English word."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    words = text.split(maxsplit=1)
    if not words:
        return False
    word = words[0].rstrip(",;:!?")
    word = word[:-1] if word.endswith(".") else word
    if len(word) == 1:
        return word.isalpha() and word.lower() not in _PROSE_LETTERS
    return bool(_CODE.search(word))


def sentence_start(text: str) -> str:
    """`text` with a capital first letter, as a sentence starts, except when it starts with a name from the code."""
    if starts_with_code(text):
        return text
    return text[:1].upper() + text[1:]
