"""The hand-tuned-kernel loader (helpers/mlp/hub.py) on every path, with the real ``kernels`` code.

Only the network boundary is replaced: the Hub endpoint points at a closed local port or at a
small local HTTP server, the Hugging Face cache at a temporary folder holding a kernel in the
exact layout ``kernels`` downloads (``refs/v<N>``, ``snapshots/<sha>/build/<variant>/``), and
``LOCAL_KERNELS`` stands in for a download. ``kernels.get_kernel`` and ``get_local_kernel``
themselves always run.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import importlib.metadata
import json
import os
import re
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import torch

# The loader drives Hugging Face's `kernels` package (the course extra): without it there is nothing to test.
pytest.importorskip(
    "kernels", reason="the `kernels` package (a course extra: pip install -e .[course]) is not installed"
)
from huggingface_hub import constants  # noqa: E402  (kernels brings it)

import helpers
import helpers.mlp.model
from helpers.mlp import hub as hk
from helpers.mlp import hub_cache, hub_pin, hub_trust
from helpers.mlp.model import MLPConfig

ON_CUDA = torch.cuda.is_available()
DEVICE_VARIANT = "torch-cuda" if ON_CUDA else "torch-cpu"

# A stand-in for Liger's v1 layer (plain torch), as a kernel package would ship it.
LAYER_V1 = """
import torch.nn as nn
import torch.nn.functional as F

class LigerGEGLUMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))
"""
# Versions 2 and 3 of liger-kernels: the layer has no constructor argument any more.
LAYER_V3 = """
import torch.nn as nn

class LigerGEGLUMLP(nn.Module):
    def forward(self, x):
        return x
"""


def write_variant(variant_dir: Path, layer_source: str, kernel_id: str | None = None) -> None:
    """One build variant: metadata.json and a package ``liger_kernels`` with ``layers``."""
    pkg = variant_dir / "liger_kernels"
    pkg.mkdir(parents=True)
    backend = variant_dir.name.removeprefix("torch-")
    (variant_dir / "metadata.json").write_text(
        json.dumps(
            {
                "name": "liger-kernels",
                "id": kernel_id or f"_liger_test_{uuid.uuid4().hex[:10]}",
                "version": 1,
                "license": "BSD-2-Clause",
                "python-depends": [],
                "backend": {"type": backend},
            }
        )
    )
    (pkg / "__init__.py").write_text("from . import layers\n")
    (pkg / "layers.py").write_text(layer_source)


def fill_cache(
    cache: Path, versions: dict[int, str], repo_id: str = hub_cache.LIGER_REPO, commits: dict[int, str] | None = None
) -> dict[int, str]:
    """The cache layout a branch download writes: refs/v<N> -> sha, snapshots/<sha>/build/<variant>/...

    As huggingface_hub writes it: each snapshot file is a symbolic link to blobs/<content hash>
    (the git blob sha-1 of a small file). Returns {version: commit}.
    """
    from huggingface_hub.file_download import repo_folder_name

    root = cache / repo_folder_name(repo_id=repo_id, repo_type="kernel")
    shas = {}
    for version, source in versions.items():
        sha = (commits or {}).get(version) or uuid.uuid4().hex + uuid.uuid4().hex[:8]
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs" / f"v{version}").write_text(sha)
        add_snapshot(root, sha, source)
        shas[version] = sha
    return shas


def add_snapshot(root: Path, sha: str, source: str, record: bool = True) -> Path:
    """snapshots/<sha>/build/<variant>/ with every file a link to its content-addressed blob.

    With `record`, its files are recorded as :func:`helpers.mlp.hub_pin.prefetch` records a download.
    """
    variant = root / "snapshots" / sha / "build" / DEVICE_VARIANT
    write_variant(variant, source)
    (root / "blobs").mkdir(exist_ok=True)
    for file in [p for p in variant.rglob("*") if p.is_file()]:
        data = file.read_bytes()
        blob = root / "blobs" / hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        blob.write_bytes(data)
        file.unlink()
        file.symlink_to(os.path.relpath(blob, file.parent))
    if record:
        hub_trust.record_snapshot(root.name.replace("kernels--", "", 1).replace("--", "/", 1), sha)
    return variant


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_hub(monkeypatch, tmp_path):
    """The Hub endpoint is a closed local port (connection refused at once); an empty cache."""
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("KERNELS_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_trust, "CACHE_RECORD", tmp_path / "kernel-cache-record.json")
    return cache


@pytest.fixture
def liger_absent(monkeypatch):
    """liger-kernel cannot be imported (as in CI), whether or not this machine has it."""
    monkeypatch.setitem(sys.modules, "liger_kernel", None)


class Answering(http.server.BaseHTTPRequestHandler):
    """A Hub that answers every request with 404 (reachable, but nothing there)."""

    def _answer(self):
        self.send_response(404)
        self.send_header("Content-Length", "2")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(b"{}")

    do_GET = do_HEAD = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def answering_hub(monkeypatch, no_hub):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answering)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    yield server
    server.shutdown()


# ------------------------------------------------------------------------------------ the probe


def test_probe_of_unreachable_hub_is_fast_and_says_why(no_hub):
    status = hk.hub_status(timeout=3.0)
    assert not status.online and not status
    assert "no connection to http://127.0.0.1" in status.reason
    assert status.seconds < 3.0


def test_probe_never_hangs_on_a_silent_server():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()  # accepts connections, never answers
        start = time.perf_counter()
        status = hk.hub_status(timeout=0.5, endpoint=f"http://127.0.0.1:{server.getsockname()[1]}")
        elapsed = time.perf_counter() - start
    assert not status.online
    assert elapsed < 2.5, elapsed
    assert "0.5 s" in status.reason or "Timeout" in status.reason


def test_probe_with_hf_hub_offline_sends_nothing(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    status = hk.hub_status()
    assert not status.online and status.seconds == 0.0 and "HF_HUB_OFFLINE=1" in status.reason


def test_probe_of_answering_hub_is_online(answering_hub):
    status = hk.hub_status(timeout=3.0)
    assert status.online and "HTTP 404" in status.reason


@pytest.mark.parametrize("bad", [0, -1, 61, True, "3"])
def test_probe_timeout_is_checked(bad):
    with pytest.raises(ValueError, match="timeout"):
        hk.hub_status(timeout=bad)


# ------------------------------------------------------------------------------------ the loader


def test_offline_machine_skips_hub_misses_cache_and_uses_the_course_repository(no_hub, liger_absent):
    loaded = hk.load_geglu_mlp(device="cpu" if not ON_CUDA else "cuda")
    table = loaded.attempts_frame().set_index("source")
    assert list(table.index) == ["hub", "cache", "package", "local"]
    assert table.loc["hub", "status"] == "skipped" and "no connection" in table.loc["hub", "reason"]
    assert table.loc["cache", "status"] == "failed"
    assert "is not in the local cache" in table.loc["cache", "reason"] and str(no_hub) in table.loc["cache", "reason"]
    assert table.loc["package", "status"] == "skipped" and "not installed" in table.loc["package", "reason"]
    assert table.loc["local", "status"] == "used"
    assert loaded.source == "local" and loaded.variant == DEVICE_VARIANT
    assert loaded.layer_class.__name__ == "CourseGeGLUMLP"
    assert loaded.max_abs_error is not None and loaded.max_abs_error < 1e-4
    # the library's offline warning is kept, not printed
    assert any("offline mode" in note for note in table.loc["cache", "library notes"].split(" | "))
    assert "using local" in loaded.explain() and "hub skipped" in loaded.explain()
    assert "local" in repr(loaded) and "<table" in loaded._repr_html_()
    # offline mode was only switched on for the cache attempt
    assert constants.HF_HUB_OFFLINE is False


def test_cache_hit_loads_offline_with_the_version_pin(no_hub):
    fill_cache(no_hub, {1: LAYER_V1})
    assert list(hub_cache.cached_versions()) == [1]
    loaded = hk.load_geglu_mlp(sources=("hub", "cache", "local"))
    assert [a.status for a in loaded.attempts] == ["skipped", "used", "not tried"]
    assert loaded.source == "cache" and loaded.variant == DEVICE_VARIANT
    assert "HF_HUB_OFFLINE=1" in loaded.origin and loaded.layer_class.__name__ == "LigerGEGLUMLP"
    assert constants.HF_HUB_OFFLINE is False


def test_version_pin_matters(no_hub):
    """v3's layer takes no config: the loader says so and falls through; v1 works."""
    fill_cache(no_hub, {1: LAYER_V1, 3: LAYER_V3})
    assert list(hub_cache.cached_versions()) == [1, 3]
    with pytest.raises(hk.KernelLoadError) as info:
        hk.load_geglu_mlp(sources=("cache",), version=3)
    (attempt,) = info.value.attempts
    assert attempt.status == "failed" and "pin version=1" in attempt.reason
    assert hk.load_geglu_mlp(sources=("cache",), version=1).source == "cache"


def test_online_hub_path_calls_get_kernel_with_the_pin(monkeypatch, no_hub, tmp_path):
    """The Hub answers (the probe is the network boundary); LOCAL_KERNELS stands in for the download."""
    repo = tmp_path / "liger-download"
    write_variant(repo / "build" / DEVICE_VARIANT, LAYER_V1)
    monkeypatch.setenv("LOCAL_KERNELS", f"{hub_cache.LIGER_REPO}={repo}")
    monkeypatch.setattr(hk, "hub_status", lambda timeout: hub_cache.HubStatus(True, "answered (test)", "test", 0.0))
    loaded = hk.load_geglu_mlp(sources=("hub", "local"))
    assert loaded.source == "hub" and loaded.variant == DEVICE_VARIANT
    assert "kernels.get_kernel('kernels-community/liger-kernels', version=1)" in loaded.origin
    assert loaded.attempts[1].status == "not tried"


def test_misleading_trust_error_is_explained(answering_hub):
    """A reachable but failing Hub: kernels reports a trust problem, the loader says what it is."""
    loaded = hk.load_geglu_mlp(sources=("hub", "local"))
    hub = loaded.attempts[0]
    assert hub.status == "failed"
    assert "could not be reached" in hub.reason and "is not untrusted" in hub.reason
    assert "could not verify publisher trust status" in hub.reason  # the library's words are kept
    assert loaded.source == "local"


def test_raw_get_kernel_offline_shows_the_library_error_and_its_meaning(no_hub):
    raw = hub_cache.raw_get_kernel(timeout=60)
    assert not raw.ok
    assert "could not verify publisher trust status" in raw.error
    assert raw.explanation.startswith("the Hugging Face Hub could not be reached")
    assert "what it means" in repr(raw)


def test_no_working_source_raises_with_every_attempt(no_hub):
    with pytest.raises(hk.KernelLoadError, match="no source gave a working GeGLU MLP layer") as info:
        hk.load_geglu_mlp(sources=("hub", "cache"))
    assert [a.source for a in info.value.attempts] == ["hub", "cache"]
    assert isinstance(info.value, ImportError)  # the recording script skips recipes on ImportError


def test_missing_local_repository_is_skipped(no_hub, tmp_path):
    with pytest.raises(hk.KernelLoadError) as info:
        hk.load_geglu_mlp(sources=("local",), local_repo=tmp_path / "nowhere")
    assert info.value.attempts[0].status == "skipped" and "no kernel repository" in info.value.attempts[0].reason


def test_wrong_layer_name_lists_what_is_there(no_hub):
    with pytest.raises(hk.KernelLoadError) as info:
        hk.load_geglu_mlp(sources=("local",), local_layer="Nope")
    assert "has no layers.Nope; it has: CourseGeGLUMLP" in info.value.attempts[0].reason


# ------------------------------------------------------------------------------------ liger-kernel package


def fake_liger_distribution(root: Path, layer_source: str) -> None:
    """An installed 'liger-kernel' distribution (dist-info + package) on a path we control."""
    (root / "liger_kernel" / "transformers").mkdir(parents=True)
    (root / "liger_kernel" / "__init__.py").write_text("")
    (root / "liger_kernel" / "transformers" / "__init__.py").write_text("")
    (root / "liger_kernel" / "transformers" / "geglu.py").write_text(layer_source)
    info = root / "liger_kernel-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: liger-kernel\nVersion: 9.9.9\n")
    # pip's RECORD: every installed file with its sha256 (base64url, unpadded) and size
    lines = []
    for file in sorted((root / "liger_kernel").rglob("*.py")):
        data = file.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{file.relative_to(root)},sha256={digest},{len(data)}")
    (info / "RECORD").write_text("\n".join([*lines, "liger_kernel-9.9.9.dist-info/RECORD,,"]) + "\n")


def _liger_modules() -> list[str]:
    return [n for n in sys.modules if n == "liger_kernel" or n.startswith("liger_kernel.")]


@pytest.fixture
def fake_liger(monkeypatch, tmp_path):
    for name in _liger_modules():
        monkeypatch.delitem(sys.modules, name)
    fake_liger_distribution(tmp_path / "site", LAYER_V1)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    real_version = importlib.metadata.version
    # the fake must win over a real installation in the venv
    monkeypatch.setattr(
        hk.importlib.metadata, "version", lambda name: "9.9.9" if name == "liger-kernel" else real_version(name)
    )
    yield
    # the fake imported during the test must not stay importable for the worker's later tests
    for name in _liger_modules():
        del sys.modules[name]


def test_package_absent_is_skipped_with_the_install_command(no_hub, liger_absent):
    with pytest.raises(hk.KernelLoadError) as info:
        hk.load_geglu_mlp(sources=("package",))
    reason = info.value.attempts[0].reason
    assert info.value.attempts[0].status == "skipped" and "pip install liger-kernel" in reason


@pytest.mark.skipif(ON_CUDA, reason="on a GPU the installed package is used, see the next test")
def test_package_installed_on_cpu_is_skipped_as_gpu_only(no_hub, fake_liger):
    loaded = hk.load_geglu_mlp(sources=("package", "local"), device="cpu")
    package = loaded.attempts[0]
    assert package.status == "skipped" and "liger-kernel 9.9.9 is installed" in package.reason
    assert "need a CUDA GPU" in package.reason and loaded.source == "local"


@pytest.mark.skipif(not ON_CUDA, reason="needs a CUDA GPU: the package path only runs Liger's kernels there")
def test_package_installed_on_gpu_is_used(no_hub, fake_liger):
    loaded = hk.load_geglu_mlp(sources=("package", "local"), device="cuda")
    assert loaded.source == "package" and "liger-kernel 9.9.9" in loaded.origin


def _real_liger_installed() -> bool:
    try:
        return importlib.metadata.version("liger-kernel") is not None
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(
    ON_CUDA or not _real_liger_installed(),
    reason="checks the real liger-kernel package on a CPU-only machine (not installed here, or a GPU is present)",
)
def test_real_liger_kernel_does_not_run_on_cpu():
    """The reason the loader gives for skipping the package on CPU is true."""
    from liger_kernel.transformers.geglu import LigerGEGLUMLP

    layer = LigerGEGLUMLP(MLPConfig(16, 32))
    with pytest.raises(Exception):  # noqa: B017 - any error: the layer must not run on a CPU
        layer(torch.randn(3, 16))


@pytest.mark.skipif(not (ON_CUDA and _real_liger_installed()), reason="needs a CUDA GPU and the liger-kernel package")
def test_real_liger_kernel_is_found_on_gpu(no_hub):
    loaded = hk.load_geglu_mlp(sources=("hub", "cache", "package"))
    assert loaded.source == "package" and loaded.max_abs_error < 1e-4


# ------------------------------------------------------------------------------------ the course repository


def test_course_repository_is_a_kernels_build_layout():
    from kernels import Metadata

    build = hub_cache.COURSE_KERNEL_REPO / "build"
    variants = sorted(p.name for p in build.iterdir() if p.is_dir())
    assert variants == ["torch-cpu", "torch-cuda"]
    for v in variants:
        meta = Metadata.read_from_file(build / v / "metadata.json")
        assert str(meta.name) == "course-geglu" and meta.version == 1 and meta.license == "Apache-2.0"
        assert str(meta.backend.backend_type).lower().endswith(v.removeprefix("torch-"))
        # the kernel itself is not copied into the repository: each variant imports helpers.kernels
        code = "".join(p.read_text() for p in (build / v).rglob("*.py"))
        assert "helpers" in code and "@triton.jit" not in code


@pytest.mark.parametrize("shape", [(1, 1, 8, 24), (2, 9, 40, 72), (3, 37, 48, 80)])
def test_course_layer_from_mlp_matches_simple_mlp(no_hub, shape):
    """Awkward sizes (rows not a multiple of a tile, widths not powers of two)."""
    batch, seq, dim, hidden = shape
    loaded = hk.load_geglu_mlp(sources=("local",))
    torch.manual_seed(1)
    device = "cuda" if ON_CUDA else "cpu"
    mlp = helpers.mlp.model.SimpleGeGLUMLP(dim, hidden).to(device).eval()
    fast = loaded.from_mlp(mlp)
    assert type(fast).__name__ == "CourseGeGLUMLP" and not fast.training
    x = torch.randn(batch, seq, dim, device=device)
    with torch.no_grad():
        torch.testing.assert_close(fast(x), mlp(x), rtol=1e-4, atol=1e-5)


def test_from_mlp_rejects_biases_and_other_modules(no_hub):
    loaded = hk.load_geglu_mlp(sources=("local",), verify=False)
    with pytest.raises(ValueError, match="bias-free"):
        loaded.from_mlp(helpers.mlp.model.SimpleGeGLUMLP(8, 16, bias=True))
    with pytest.raises(TypeError, match="gate_proj"):
        loaded.from_mlp(torch.nn.Linear(4, 4))


def test_check_layer_catches_a_wrong_layer():
    class Wrong(helpers.mlp.model.SimpleGeGLUMLP):
        def __init__(self, config):
            super().__init__(config.hidden_size, config.intermediate_size)

        def forward(self, x):
            return super().forward(x) * 1.01

    with pytest.raises(ValueError, match="differs from SimpleGeGLUMLP"):
        hk.check_layer(Wrong)


# ------------------------------------------------------------------------------------ prefetch, errors, arguments


def test_prefetch_downloads_by_branch_so_offline_loads_work(monkeypatch, no_hub, tmp_path):
    """The Hub calls are replaced by a fake that writes what a real branch download writes."""
    import huggingface_hub
    import kernels
    from huggingface_hub.file_download import repo_folder_name

    source = tmp_path / "hub-repo"
    write_variant(source / "build" / DEVICE_VARIANT, LAYER_V1)
    calls = {}

    def fake_variants(repo_id, *, version=None, revision=None, backend=None):
        from kernels.variants import get_variants_local, resolve_variants

        return resolve_variants(get_variants_local(source / "build"), backend)[1]

    def fake_snapshot_download(repo_id, *, repo_type, revision, cache_dir, allow_patterns, ignore_patterns):
        import shutil

        calls.update(repo_type=repo_type, revision=revision, allow_patterns=allow_patterns)
        root = Path(cache_dir or constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type=repo_type)
        sha = "c0ffee" * 6 + "abcd"
        (root / "refs").mkdir(parents=True)
        (root / "refs" / revision).write_text(sha)  # a branch download records the branch
        shutil.copytree(source, root / "snapshots" / sha)
        return str(root / "snapshots" / sha)

    monkeypatch.setattr(kernels, "get_kernel_variants", fake_variants)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    path = hub_pin.prefetch()
    assert calls == {"repo_type": "kernel", "revision": "v1", "allow_patterns": [f"build/{DEVICE_VARIANT}/*"]}
    assert path.is_dir() and list(hub_cache.cached_versions()) == [1]
    assert hk.load_geglu_mlp(sources=("cache",)).source == "cache"


def test_prefetch_refuses_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match="unset HF_HUB_OFFLINE"):
        hub_pin.prefetch()


def test_offline_mode_restores_both_settings(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with hub_cache.offline_mode():
        assert constants.HF_HUB_OFFLINE is True and hub_cache.offline_requested()
    assert constants.HF_HUB_OFFLINE is False and "HF_HUB_OFFLINE" not in __import__("os").environ


@pytest.mark.parametrize(
    "message, expected",
    [
        (
            "Kernel repository 'a/b' could not verify publisher trust status. Set trust_remote_code=True",
            "could not be reached",
        ),
        (
            "Version 1 of 'a/b' is not available in the local cache and Hugging Face Hub is in offline mode.",
            "not in the local cache",
        ),
        ("Cannot find a local snapshot for a/b (revision: abc).", "not in the local cache"),
        (
            "Cannot find a build variant for this system in a/b (revision: x):\n\ntorch-cuda: backend (cuda) does not match",
            "has no build for this machine",
        ),
        ("something else entirely", None),
    ],
)
def test_explain_kernels_error(message, expected):
    explained = hub_cache.explain_kernels_error(ValueError(message), "a/b", 1)
    if expected is None:
        assert explained is None
    else:
        assert expected in explained


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"sources": "local"}, TypeError, "sequence of names"),
        ({"sources": ("local", "web")}, ValueError, "subset of"),
        ({"sources": ()}, ValueError, "subset of"),
        ({"sources": ("local", "local")}, ValueError, "twice"),
        ({"version": 0}, ValueError, "positive int"),
        ({"repo_id": "liger"}, ValueError, "owner/name"),
        ({"device": "tpu"}, ValueError, "cpu.*cuda"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        hk.load_geglu_mlp(**kwargs)


def test_mlp_config():
    with pytest.raises(ValueError, match="hidden_size"):
        MLPConfig(0, 3)


def test_command_line_status_says_which_path(no_hub, liger_absent, capsys):
    import prefetch_kernels

    assert prefetch_kernels.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "from local" in out and "hub      skipped" in out and "cache    failed" in out


def test_checking_a_layer_leaves_the_random_state_alone(no_hub):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    hk.load_geglu_mlp(sources=("local",))
    assert torch.equal(torch.rand(3), expected)


def test_new_layer_from_a_config(no_hub):
    loaded = hk.load_geglu_mlp(sources=("local",), verify=False)
    layer = loaded.layer(MLPConfig(16, 24), dtype=torch.float64)
    assert layer.gate_proj.weight.shape == (24, 16) and layer.gate_proj.weight.dtype == torch.float64
    with pytest.raises(TypeError, match="hidden_size and intermediate_size"):
        loaded.layer(object())


# ------------------------------------------------------------------------------------ pins and trust (issue 13)
SHA_A = "a" * 40
SHA_B = "b" * 40


@pytest.fixture
def no_course_lock(monkeypatch, tmp_path):
    """The course's lock file as absent, whether or not one was committed."""
    monkeypatch.setattr(hub_pin, "KERNEL_LOCK_FILE", tmp_path / "no" / "kernels.lock")


def write_lock(path: Path, sha: str, version: int = 1, repo_id: str = hub_cache.LIGER_REPO) -> Path:
    """A lock file as `kernels lock` writes it (kernels 0.17)."""
    from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

    locks = KernelLocks({KernelDependency(repo_id, KernelVersion.Version(version)): KernelLock(sha)})
    path.write_text(locks.to_json())
    return path


def test_without_a_lock_file_the_pin_is_the_movable_branch(no_course_lock):
    pin = hub_pin.kernel_pin(hub_cache.LIGER_REPO, 1)
    assert not pin.exact and pin.revision is None
    assert "the branch v1, which its publisher can move" in pin.describe() and "no lock file" in pin.describe()
    assert pin.call() == "kernels.get_kernel('kernels-community/liger-kernels', version=1)"


def test_a_lock_file_pins_the_commit_on_every_route(no_hub, no_course_lock, tmp_path):
    """The cache holds v1 -> A and another commit B; the lock file says B: B is loaded, A never."""
    shas = fill_cache(no_hub, {1: LAYER_V1}, commits={1: SHA_A})
    from huggingface_hub.file_download import repo_folder_name

    add_snapshot(no_hub / repo_folder_name(repo_id=hub_cache.LIGER_REPO, repo_type="kernel"), SHA_B, LAYER_V1)
    lock = write_lock(tmp_path / "kernels.lock", SHA_B)
    pin = hub_pin.kernel_pin(hub_cache.LIGER_REPO, 1, lockfile=lock)
    assert pin.exact and pin.revision == SHA_B and "lock file" in pin.pinned_by and shas[1] == SHA_A
    loaded = hk.load_geglu_mlp(sources=("cache",), lockfile=lock)
    assert "kernels.load_kernel('kernels-community/liger-kernels', lockfile=" in loaded.origin
    assert f"commit {SHA_B[:12]}" in loaded.origin and SHA_A[:12] not in loaded.origin
    assert hub_pin.snapshot_commit(loaded.module)[0] == SHA_B


def test_a_revision_argument_pins_the_commit_offline(no_hub, no_course_lock):
    fill_cache(no_hub, {1: LAYER_V1}, commits={1: SHA_A})
    from huggingface_hub.file_download import repo_folder_name

    add_snapshot(no_hub / repo_folder_name(repo_id=hub_cache.LIGER_REPO, repo_type="kernel"), SHA_B, LAYER_V1)
    loaded = hk.load_geglu_mlp(sources=("cache",), revision=SHA_B)
    assert f'revision="{SHA_B}"' in loaded.origin and hub_pin.snapshot_commit(loaded.module)[0] == SHA_B
    with pytest.raises(hk.KernelLoadError) as info:
        hk.load_geglu_mlp(sources=("cache",), revision="c" * 40)  # pinned, not in the cache: no fallback to v1
    assert "not in the local cache" in info.value.attempts[0].reason or "Cannot find" in info.value.attempts[0].reason


@pytest.mark.parametrize("revision", ["v1", "main", "abc123", "A" * 40])
def test_a_revision_must_be_a_full_commit(revision):
    with pytest.raises(ValueError, match="full commit sha"):
        hk.load_geglu_mlp(sources=("cache",), revision=revision)


def test_a_lock_file_for_another_version_or_kernel_is_an_error(tmp_path):
    with pytest.raises(ValueError, match=r"locks kernels-community/liger-kernels .*not version 1"):
        hub_pin.kernel_pin(hub_cache.LIGER_REPO, 1, lockfile=write_lock(tmp_path / "a.lock", SHA_A, version=3))
    with pytest.raises(ValueError, match="cannot pin kernels-community/liger-kernels"):
        hub_pin.kernel_pin(hub_cache.LIGER_REPO, 1, lockfile=write_lock(tmp_path / "b.lock", SHA_A, repo_id="x/y"))


def test_the_cache_route_checks_trust_that_kernels_skips_offline(no_hub, no_course_lock):
    fill_cache(no_hub, {1: LAYER_V1})
    loaded = hk.load_geglu_mlp(sources=("cache",))
    (attempt,) = loaded.attempts
    assert "Skipping publisher trust check" in " ".join(attempt.notes)  # what kernels says offline ...
    assert "publisher kernels-community trusted by the course" in loaded.origin  # ... and what the loader checks
    assert re.search(r"\d+ files match the content hashes recorded when they were downloaded", loaded.origin)
    assert "checked before the import" in loaded.origin


def test_a_modified_cached_file_is_refused(no_hub, no_course_lock):
    shas = fill_cache(no_hub, {1: LAYER_V1})
    from huggingface_hub.file_download import repo_folder_name

    root = no_hub / repo_folder_name(repo_id=hub_cache.LIGER_REPO, repo_type="kernel")
    layers = root / "snapshots" / shas[1] / "build" / DEVICE_VARIANT / "liger_kernels" / "layers.py"
    Path(os.path.realpath(layers)).write_text(LAYER_V1 + "\nimport os  # something added later\n")
    with pytest.raises(hk.KernelLoadError) as info:
        hk.load_geglu_mlp(sources=("cache",))
    assert "no longer matches its content hash" in info.value.attempts[0].reason


def test_an_untrusted_publisher_is_refused_from_the_cache(no_hub, no_course_lock):
    fill_cache(no_hub, {1: LAYER_V1}, repo_id="someone/liger-kernels")
    with pytest.raises(hk.KernelLoadError) as info:
        hk.load_geglu_mlp(sources=("cache",), repo_id="someone/liger-kernels")
    assert "'someone' is not one the course trusts" in info.value.attempts[0].reason


def test_the_online_route_says_when_it_follows_a_branch(monkeypatch, no_hub, no_course_lock, tmp_path):
    repo = tmp_path / "liger-download"
    write_variant(repo / "build" / DEVICE_VARIANT, LAYER_V1)
    monkeypatch.setenv("LOCAL_KERNELS", f"{hub_cache.LIGER_REPO}={repo}")
    monkeypatch.setattr(hk, "hub_status", lambda timeout: hub_cache.HubStatus(True, "answered (test)", "test", 0.0))
    branch = hk.load_geglu_mlp(sources=("hub",))
    assert "follows the branch v1: not an exact pin" in branch.origin
    assert "publisher trust checked on the Hub by kernels" in branch.origin
    exact = hk.load_geglu_mlp(sources=("hub",), revision=SHA_A)
    assert f'revision="{SHA_A}"' in exact.origin and "not an exact pin" not in exact.origin


def test_prefetch_with_an_exact_pin_lets_kernels_download_the_commit(monkeypatch, no_hub, no_course_lock, tmp_path):
    import kernels

    calls = {}

    from huggingface_hub.file_download import repo_folder_name

    root = no_hub / repo_folder_name(repo_id=hub_cache.LIGER_REPO, repo_type="kernel")

    def fake_install(repo_id, *, revision=None, backend=None, **kwargs):
        calls.update(repo_id=repo_id, revision=revision)
        return add_snapshot(root, revision, LAYER_V1, record=False)  # what the library's download writes

    monkeypatch.setattr(kernels, "install_kernel", fake_install)
    path = hub_pin.prefetch(revision=SHA_A)
    assert calls == {"repo_id": hub_cache.LIGER_REPO, "revision": SHA_A}
    assert path == root / "snapshots" / SHA_A
    recorded = json.loads(hub_trust.CACHE_RECORD.read_text())[hub_cache.LIGER_REPO][SHA_A]
    assert f"build/{DEVICE_VARIANT}/liger_kernels/layers.py" in recorded  # what offline loads check first
    with pytest.raises(hub_pin.UntrustedKernelError, match="not one the course trusts"):
        hub_pin.prefetch(repo_id="someone/kernels", revision=SHA_A)


def test_cached_branch_without_its_files_is_not_called_missing_and_cached(no_hub, no_course_lock):
    """The cache records v1 but its snapshot is gone: say so, not 'not in the cache (cached versions: v1)'."""
    shas = fill_cache(no_hub, {1: LAYER_V1})
    import shutil

    from huggingface_hub.file_download import repo_folder_name

    shutil.rmtree(no_hub / repo_folder_name(repo_id=hub_cache.LIGER_REPO, repo_type="kernel") / "snapshots")
    with pytest.raises(hk.KernelLoadError) as info:
        hk.load_geglu_mlp(sources=("cache",))
    reason = info.value.attempts[0].reason
    assert f"records kernels-community/liger-kernels version 1 as commit {shas[1][:12]}" in reason
    assert "missing or incomplete" in reason and "is not in the local cache" not in reason


def test_an_empty_local_build_is_blamed_on_the_local_folder(no_hub, tmp_path):
    repo = tmp_path / "my-kernel"
    (repo / "build").mkdir(parents=True)
    with pytest.raises(hk.KernelLoadError) as info:
        hk.load_geglu_mlp(sources=("local",), local_repo=repo)
    reason = info.value.attempts[0].reason
    assert str(repo) in reason and "liger" not in reason.lower()


def test_installed_package_files_are_checked_against_pips_record(fake_liger, tmp_path):
    assert re.fullmatch(r"\d+ Python files match the hashes pip recorded", hub_pin.check_installed("liger-kernel"))
    geglu = tmp_path / "site" / "liger_kernel" / "transformers" / "geglu.py"
    geglu.write_text(geglu.read_text() + "\n# changed after install\n")
    with pytest.raises(hub_pin.UntrustedKernelError, match="differs from what pip installed"):
        hub_pin.check_installed("liger-kernel")


def test_command_line_pin(no_course_lock, capsys):
    import prefetch_kernels

    assert prefetch_kernels.main(["pin"]) == 0
    assert "the branch v1, which its publisher can move" in capsys.readouterr().out


# ------------------------------------------------------------------ the cache checked before the import (issue 23)


def _layers_file(cache: Path, sha: str) -> Path:
    from huggingface_hub.file_download import repo_folder_name

    root = cache / repo_folder_name(repo_id=hub_cache.LIGER_REPO, repo_type="kernel")
    return root / "snapshots" / sha / "build" / DEVICE_VARIANT / "liger_kernels" / "layers.py"


def _tampered(marker: Path) -> str:
    """Layer code that leaves a mark when it runs, and tries to switch the loader's checks off."""
    return (
        f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from helpers.mlp import hub_pin, hub_trust\n"
        "hub_trust.verify_snapshot = hub_pin.verify_snapshot = lambda *a, **k: 'all fine'\n" + LAYER_V1
    )


def _refused(marker: Path, **kwargs) -> str:
    with pytest.raises(hk.KernelLoadError) as info:
        hk.load_geglu_mlp(sources=("cache",), **kwargs)
    assert not marker.exists(), "the tampered code ran before the check"
    return info.value.attempts[0].reason


@pytest.mark.parametrize("pinned", [False, True])
def test_tampered_code_never_runs(no_hub, no_course_lock, tmp_path, pinned):
    shas = fill_cache(no_hub, {1: LAYER_V1}, commits={1: SHA_A})
    marker = tmp_path / "ran"
    Path(os.path.realpath(_layers_file(no_hub, shas[1]))).write_text(_tampered(marker))
    reason = _refused(marker, **({"revision": SHA_A} if pinned else {}))
    assert "no longer matches its content hash" in reason and "layers.py" in reason


def test_a_plain_file_in_place_of_a_link_is_checked_too(no_hub, no_course_lock, tmp_path):
    shas = fill_cache(no_hub, {1: LAYER_V1})
    marker = tmp_path / "ran"
    layers = _layers_file(no_hub, shas[1])
    layers.unlink()
    layers.write_text(_tampered(marker))
    assert "layers.py" in _refused(marker)
    layers.unlink()
    layers.write_text(LAYER_V1)  # a plain copy with the recorded content is the same code
    assert hk.load_geglu_mlp(sources=("cache",)).source == "cache"


def test_a_repointed_self_consistent_blob_fails_with_an_exact_pin(no_hub, no_course_lock, tmp_path):
    shas = fill_cache(no_hub, {1: LAYER_V1}, commits={1: SHA_A})
    marker = tmp_path / "ran"
    layers = _layers_file(no_hub, shas[1])
    data = _tampered(marker).encode()
    blobs = Path(os.path.realpath(layers)).parent
    blob = blobs / hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # named by its own content
    blob.write_bytes(data)
    layers.unlink()
    layers.symlink_to(os.path.relpath(blob, layers.parent))
    assert "no longer matches its content hash" in _refused(marker, revision=SHA_A)


def test_a_forged_pyc_is_refused(no_hub, no_course_lock, tmp_path):
    import py_compile

    shas = fill_cache(no_hub, {1: LAYER_V1})
    marker = tmp_path / "ran"
    layers = _layers_file(no_hub, shas[1])
    evil = tmp_path / "layers.py"
    evil.write_text(_tampered(marker))
    cache = layers.parent / "__pycache__"
    cache.mkdir()
    py_compile.compile(str(evil), cfile=str(cache / f"layers.{sys.implementation.cache_tag}.pyc"))
    reason = _refused(marker)
    assert "compiled Python code" in reason and "__pycache__" in reason


def test_a_link_leading_out_of_the_cache_is_refused(no_hub, no_course_lock, tmp_path):
    shas = fill_cache(no_hub, {1: LAYER_V1})
    layers = _layers_file(no_hub, shas[1])
    outside = tmp_path / "elsewhere.py"
    outside.write_text(LAYER_V1)  # even with the right content: it can change after the check
    layers.unlink()
    layers.symlink_to(outside)
    assert "outside the cache's blobs" in _refused(tmp_path / "ran")


def test_an_unrecorded_cache_or_file_is_refused(no_hub, no_course_lock, tmp_path):
    from huggingface_hub.file_download import repo_folder_name

    root = no_hub / repo_folder_name(repo_id=hub_cache.LIGER_REPO, repo_type="kernel")
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "v1").write_text(SHA_B)
    add_snapshot(root, SHA_B, LAYER_V1, record=False)  # filled by something else than prefetch
    assert "holds no record of its files" in _refused(tmp_path / "ran")
    hub_trust.record_snapshot(hub_cache.LIGER_REPO, SHA_B)
    extra = _layers_file(no_hub, SHA_B).parent / "extra.py"
    extra.write_text("print('added later')")
    assert "extra.py" in _refused(tmp_path / "ran") and "not there when the kernel was downloaded" in _refused(
        tmp_path / "ran"
    )


def test_a_checked_load_writes_no_bytecode_into_the_cache(no_hub, no_course_lock):
    shas = fill_cache(no_hub, {1: LAYER_V1})
    for _ in range(2):  # the second load finds the cache as the record says
        assert hk.load_geglu_mlp(sources=("cache",)).source == "cache"
    assert not list(_layers_file(no_hub, shas[1]).parent.parent.rglob("__pycache__"))


def test_a_ref_that_is_not_a_commit_is_refused(no_hub, no_course_lock, tmp_path):
    from huggingface_hub.file_download import repo_folder_name

    refs = no_hub / repo_folder_name(repo_id=hub_cache.LIGER_REPO, repo_type="kernel") / "refs"
    refs.mkdir(parents=True)
    (refs / "v1").write_text("../../../elsewhere")
    assert "not a commit" in _refused(tmp_path / "ran")
