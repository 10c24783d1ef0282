"""One ceiling set per machine for a session: the first measurement is kept in the local traces folder and later
lessons (other processes) read it; a stale set, another device or torch, or an unreadable file is measured again."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import torch

from helpers.measure import ceilings as ceilings_mod
from helpers.measure import ceilings_cache
from helpers.measure.ceilings import Ceilings, ceilings_from_dict, measure_ceilings


def _fake(rate: float, recorded: str | None = None) -> Ceilings:
    return Ceilings(
        device=ceilings_mod._device_name(torch.device("cpu")),
        device_type="cpu",
        copy_bytes_per_s=1e10,
        matmul_flop_per_s=rate,
        matmul_dtype="float32",
        matmul_shape=(8, 8, 8),
        copy_bytes=64,
        method="fake",
        torch_version=torch.__version__,
        source="measured",
        recorded=recorded or dt.datetime.now().isoformat(timespec="seconds"),
    )


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """measure_ceilings writing to a temporary folder, its CPU measurement replaced by a counter."""
    monkeypatch.setenv(ceilings_cache.CACHE_ENV, str(tmp_path / ceilings_cache.CACHE_FILE_NAME))
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "03_geglu_mlp_eager.ipynb"))
    monkeypatch.setattr(ceilings_mod, "_CACHE", {})
    calls = []

    def measure() -> Ceilings:
        calls.append(1)
        return _fake(1e11 * len(calls))

    monkeypatch.setattr(ceilings_mod, "_measure_cpu", measure)
    return calls, tmp_path / ceilings_cache.CACHE_FILE_NAME


def _new_process(monkeypatch) -> None:
    monkeypatch.setattr(ceilings_mod, "_CACHE", {})  # what a lesson in another kernel starts with
    monkeypatch.setenv("JPY_SESSION_NAME", "/x/notebooks/07_attention.ipynb")


def test_a_second_lesson_reads_the_first_ones_set(counted, monkeypatch):
    calls, path = counted
    first = measure_ceilings("cpu")
    assert path.is_file() and len(calls) == 1
    _new_process(monkeypatch)
    second = measure_ceilings("cpu")
    assert len(calls) == 1 and second == first
    assert second.measured_by == "lesson 03" and "measured by lesson 03 at " in second.label


def test_refresh_measures_again_and_replaces_the_file(counted, monkeypatch):
    calls, path = counted
    first = measure_ceilings("cpu")
    again = measure_ceilings("cpu", refresh=True)
    assert len(calls) == 2 and again.matmul_flop_per_s != first.matmul_flop_per_s
    _new_process(monkeypatch)
    assert measure_ceilings("cpu").matmul_flop_per_s == again.matmul_flop_per_s
    with pytest.raises(TypeError, match="refresh"):
        measure_ceilings("cpu", refresh="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        {"recorded": (dt.datetime.now() - dt.timedelta(hours=5)).isoformat(timespec="seconds")},  # stale
        {"recorded": (dt.datetime.now() + dt.timedelta(hours=1)).isoformat(timespec="seconds")},  # clock moved
        {"torch_version": "0.0.1"},
    ],
)
def test_a_stale_or_other_torch_set_is_measured_again(counted, monkeypatch, change):
    calls, path = counted
    measure_ceilings("cpu")
    data = json.loads(path.read_text())
    for entry in data.values():
        entry["ceilings"].update(change)
    path.write_text(json.dumps(data))
    _new_process(monkeypatch)
    measure_ceilings("cpu")
    assert len(calls) == 2


def test_another_device_has_its_own_entry(counted, monkeypatch):
    calls, path = counted
    other = {**_fake(5e14).as_dict(), "device": "NVIDIA H100 80GB HBM3", "device_type": "cuda"}
    ceilings_cache.write_entry(path, "NVIDIA H100 80GB HBM3", other)
    measure_ceilings("cpu")
    assert len(calls) == 1
    data = json.loads(path.read_text())
    assert set(data) == {"NVIDIA H100 80GB HBM3", ceilings_mod._device_name(torch.device("cpu"))}
    stored, note = ceilings_cache.read_entry(path, "NVIDIA H100 80GB HBM3", torch.__version__, dt.datetime.now())
    assert note == "" and ceilings_from_dict(stored).matmul_flop_per_s == 5e14


def _corrupt_texts(name: str) -> list[str]:
    now = dt.datetime.now().isoformat(timespec="seconds")
    unknown_key = {"recorded": now, "torch_version": torch.__version__, "oops": 1}
    return [
        "{not json",
        "[1, 2]",
        json.dumps({name: 3}),
        json.dumps({name: {"ceilings": {"recorded": "yesterday"}}}),
        json.dumps({name: {"ceilings": unknown_key}}),  # fresh, yet not a Ceilings
    ]


@pytest.mark.parametrize("which", range(5))
def test_a_corrupt_file_is_measured_again_with_a_note(counted, which):
    calls, path = counted
    name = ceilings_mod._device_name(torch.device("cpu"))
    path.write_text(_corrupt_texts(name)[which])
    with pytest.warns(UserWarning, match="unreadable"):
        c = measure_ceilings("cpu")
    assert len(calls) == 1 and c.method == "fake"
    assert json.loads(path.read_text())[name]["ceilings"]["method"] == "fake"  # the file is whole again


def test_an_unwritable_folder_costs_a_note_not_a_crash(counted, monkeypatch, tmp_path):
    calls, _ = counted
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(ceilings_cache.CACHE_ENV, str(blocker / "sub" / ceilings_cache.CACHE_FILE_NAME))
    with pytest.warns(UserWarning) as notes:
        measure_ceilings("cpu")
    assert any("could not write" in str(n.message) for n in notes)
    assert len(calls) == 1


def test_who_measures_names_the_lesson(monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/me/course/notebooks/08_whole_model.ipynb")
    assert ceilings_cache.who_measures() == "lesson 08"
    monkeypatch.delenv("JPY_SESSION_NAME")
    monkeypatch.setattr("sys.argv", ["/repo/benchmarks/ceilings.py", "--out", "x"])
    assert ceilings_cache.who_measures() == "ceilings.py"
    monkeypatch.setattr("sys.argv", ["/usr/lib/ipykernel_launcher.py", "-f", "k.json"])
    assert ceilings_cache.who_measures() is None


def test_read_entry_rejects_bad_arguments(tmp_path):
    with pytest.raises(TypeError):
        ceilings_cache.read_entry(tmp_path / "c.json", "", "2.13", dt.datetime.now())
    with pytest.raises(ValueError):
        ceilings_cache.read_entry(tmp_path / "c.json", "cpu", "2.13", dt.datetime.now(), max_age_s=0)
    assert ceilings_cache.read_entry(tmp_path / "none.json", "cpu", "2.13", dt.datetime.now()) == (None, "")


def test_without_the_variable_each_process_measures_its_own(counted, monkeypatch):
    calls, path = counted
    monkeypatch.delenv(ceilings_cache.CACHE_ENV)
    measure_ceilings("cpu")
    _new_process(monkeypatch)
    measure_ceilings("cpu")
    assert len(calls) == 2 and not path.exists()


def test_the_lessons_point_the_cache_at_the_local_traces_folder():
    import os

    import helpers.lessons  # noqa: F401  (sets the variable when unset)
    from helpers.paths import local_traces_dir

    assert os.environ[ceilings_cache.CACHE_ENV] == str(local_traces_dir() / ceilings_cache.CACHE_FILE_NAME)


def test_a_recorded_time_with_a_zone_is_read_not_a_crash(tmp_path):
    path = tmp_path / ceilings_cache.CACHE_FILE_NAME
    stored = _fake(5e11, recorded="2026-12-07T10:00:00+00:00").as_dict()
    path.write_text(json.dumps({stored["device"]: {"ceilings": stored}}))
    fresh, note = ceilings_cache.read_entry(path, stored["device"], torch.__version__, dt.datetime(2026, 12, 7, 11))
    assert fresh is not None and note == ""
    stale, _ = ceilings_cache.read_entry(path, stored["device"], torch.__version__, dt.datetime(2026, 12, 7, 20))
    assert stale is None
