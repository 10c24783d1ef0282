"""The stored verdicts of `python -m benchmarks diagnose-planted` are what the diagnosis says today: a change to a
rule that moves a planted problem in or out of a top 3 fails here until the benchmark is run again."""

from __future__ import annotations

import json

import pytest

from benchmarks.diagnose_planted import judge, main
from tests.support import DATA

STORED = DATA.parents[1] / "benchmarks" / "results" / "h100_diagnose_planted.json"


def test_the_stored_verdicts_are_todays():
    stored, now = json.loads(STORED.read_text()), judge(DATA / "planted_h100")
    assert stored["recording"] == now["recording"] and stored["all_planted_in_top"] == now["all_planted_in_top"]
    for old, new in zip(stored["loops"], now["loops"], strict=True):
        assert [t["rule"] for t in old["top"]] == [t["rule"] for t in new["top"]], old["loop"]
        assert old["missed"] == new["missed"], old["loop"]


def test_one_folder_is_required():
    for args in ([], ["--record", "a", "--judge", "b"]):
        with pytest.raises(SystemExit):
            main(args)


def test_recording_without_a_gpu_says_so_and_writes_nothing(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        main(["--record", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
