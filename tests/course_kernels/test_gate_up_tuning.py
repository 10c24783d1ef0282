"""Tile choices of the gate+up kernels (helpers/kernels/gate_up_tuning.py) and the tuning script.

The table lookup and the defaults are plain Python: tested here on made-up sweeps. The tuning
script's CPU smoke run (Triton interpreter, one tiny problem) writes a table the lookup reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from support import load_benchmark

from helpers.kernels import gate_up_tuning as T

G = load_benchmark("geglu_kernels")  # the sweep's candidates and table writer

SMS = 132  # an H200


def _blocks(cfg) -> tuple[int, int]:
    return cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]


def test_default_tiles_follow_the_waves() -> None:
    # Blog shape, forward (N = 2 * 3072 packed columns): at M = 8192 the big tile fills 11.6
    # waves of 132 SMs; at M = 128 it would make 24 tiles for 132 SMs, so smaller tiles win.
    assert _blocks(T.default_config("forward", "tma", 8192, 6144, SMS)) == (128, 256)
    small = T.default_config("forward", "tma", 128, 6144, SMS)
    assert small.kwargs["BLOCK_M"] == 64 and -(-128 // 64) * -(-6144 // small.kwargs["BLOCK_N"]) >= SMS / 2
    for kind in T.KINDS:
        for path in ("tma", "pointer"):
            chain = T.fallback_chain(kind, path, 4096, 8192, SMS, T.default_config(kind, path, 4096, 8192, SMS))
            labels = [json.dumps(T.config_to_dict(c), sort_keys=True) for c in chain]
            assert len(labels) == len(set(labels)) >= 2
    with pytest.raises(ValueError, match="kind must be one of"):
        T.default_config("sideways", "tma", 1, 1, SMS)
    with pytest.raises(ValueError, match="path must be"):
        T.default_config("forward", "wgmma", 1, 1, SMS)


def test_config_dict_round_trip() -> None:
    for cands in G.CANDIDATES.values():
        for cfg in cands:
            back = T.config_from_dict(T.config_to_dict(cfg))
            assert back.kwargs == cfg.kwargs and (back.num_warps, back.num_stages) == (cfg.num_warps, cfg.num_stages)
    with pytest.raises(ValueError, match="BLOCK_K"):
        T.config_from_dict({"BLOCK_M": 64, "BLOCK_N": 64})


def _row(kind: str, m: int, us: float | None, bm: int, dim: int = 768, hidden: int = 3072, dtype: str = "bfloat16"):
    cfg = T.config_to_dict(T.gate_up_config(bm, 128, 64, 3, 8))
    n = hidden if kind == "backward" else 2 * hidden
    return {"kind": kind, "dtype": dtype, "dim": dim, "hidden": hidden, "m": m, "n": n, "k": dim, "config": cfg, "us": us,
            "reference_us": 2.0 * (us or 1.0)}  # fmt: skip


PROV = {"device": "NVIDIA H200", "capability": "9.0", "sms": 132, "date": "2026-12-01"}


def test_make_table_keeps_the_fastest_and_lookup_finds_the_nearest() -> None:
    rows = [_row("forward", 8192, 120.0, 128), _row("forward", 8192, 110.0, 256), _row("forward", 8192, None, 64)]
    rows += [_row("forward", 128, 9.0, 64), _row("backward", 8192, 70.0, 128)]
    table = G.make_table(rows, PROV)
    assert len(table["entries"]) == 3 and table["capability"] == "9.0"
    big = next(e for e in table["entries"] if e["kind"] == "forward" and e["m"] == 8192)
    assert big["us"] == 110.0 and big["config"]["BLOCK_M"] == 256
    # same kind, nearest M bucket (6000 -> 8192), a nearby shape (dim 1024, hidden 4096)
    cfg, entry = T.table_config("forward", 6000, 8192, 1024, torch.bfloat16, "9.0", table)
    assert cfg.kwargs["BLOCK_M"] == 256 and entry["m"] == 8192 and entry["distance"] > 0
    assert T.table_config("forward", 100, 6144, 768, torch.float16, "9.0", table)[1]["m"] == 128  # fp16 = bf16 size
    assert T.table_config("forward", 8192, 6144, 768, torch.float32, "9.0", table) is None  # another element size
    assert T.table_config("forward", 8192, 6144, 768, torch.bfloat16, "8.0", table) is None  # tuned on another GPU
    assert T.table_config("forward", 8192, 2**20, 2**15, torch.bfloat16, "9.0", table) is None  # nothing near
    assert T.table_config("backward", 8192, 3072, 768, torch.bfloat16, "9.0", table)[0].kwargs["BLOCK_M"] == 128
    with pytest.raises(ValueError, match="capability"):
        G.make_table(rows, {"device": "x"})
    frame = T.config_table(table)
    assert list(frame["kind"]).count("forward") == 2 and frame["source"].str.contains("H200").all()


def test_table_file_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert T.load_table(tmp_path / "absent.json") is None
    path = tmp_path / "t.json"
    path.write_text(json.dumps(G.make_table([_row("forward", 512, 10.0, 64)], PROV)))
    monkeypatch.setenv(T.TABLE_ENV, str(path))
    assert T.load_table()["entries"][0]["m"] == 512
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "other", "entries": []}))
    with pytest.raises(ValueError, match="not a course-gate-up-table"):
        T.load_table(bad)
    monkeypatch.setenv(T.TABLE_ENV, str(tmp_path / "absent.json"))
    defaults = T.config_table()
    assert set(defaults["source"]) == {"default (no tuned table)"} and set(defaults["kind"]) == set(T.KINDS)


def test_tuning_script_quick_run_writes_a_table(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("the --quick smoke run is the CPU path; on a GPU run the full script")
    cli = G
    out, table_out, rebuilt = tmp_path / "r.json", tmp_path / "table.json", tmp_path / "again.json"
    assert cli.main(["--device", "cpu", "--quick", "--out", str(out), "--table-out", str(table_out)]) == 0
    results = json.loads(out.read_text())
    assert results["complete"] and {r["kind"] for r in results["rows"]} == set(T.KINDS)
    assert all(r["us"] is not None and r["rel_err"] < 1e-4 for r in results["rows"])
    table = T.load_table(table_out)
    assert {e["kind"] for e in table["entries"]} == set(T.KINDS) and table["capability"] == "cpu"
    assert cli.main(["--table-from", str(out), "--table-out", str(rebuilt)]) == 0
    assert json.loads(rebuilt.read_text())["entries"] == table["entries"]
    assert cli.main(["--device", "cpu", "--out", str(out)]) == 2  # the interpreter: --quick only
