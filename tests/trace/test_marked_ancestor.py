"""`marked_ancestor`: the one climb up the host's nesting that diagnose and the FLOP counter share."""

import numpy as np
import pytest

from helpers.trace.links import marked_ancestor


def _climb(parent: np.ndarray, mark: np.ndarray, outermost: bool) -> np.ndarray:
    """The same answer, one row at a time."""
    out = []
    for row in range(len(parent)):
        found, cur = -1, row
        while cur >= 0:
            if mark[cur]:
                found = cur
                if not outermost:
                    break
            cur = parent[cur]
        out.append(found)
    return np.array(out)


def test_nearest_and_outermost_on_a_small_tree():
    # 0 -> 1 -> 2 -> 3, and 4 on its own; 1 and 3 are marked
    parent = np.array([-1, 0, 1, 2, -1])
    mark = np.array([False, True, False, True, False])
    assert marked_ancestor(parent, mark).tolist() == [-1, 1, 1, 3, -1]
    assert marked_ancestor(parent, mark, outermost=True).tolist() == [-1, 1, 1, 1, -1]


@pytest.mark.parametrize("outermost", [False, True])
def test_matches_a_row_by_row_climb_on_random_forests(outermost):
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(1, 300))
        # a parent always comes before its child, as in the events table
        parent = np.array([-1 if i == 0 or rng.random() < 0.2 else int(rng.integers(0, i)) for i in range(n)])
        mark = rng.random(n) < 0.3
        assert np.array_equal(marked_ancestor(parent, mark, outermost), _climb(parent, mark, outermost))


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="one entry per event"):
        marked_ancestor(np.array([-1, 0]), np.array([True]))
