"""The Hugging Face Space files, tested without a Docker engine (there is none on these machines).

- the Dockerfile parses, uses only real instructions, starts from a base image pinned by digest,
  follows the Spaces conventions (uid 1000, /app, port 7860, a CMD) and installs the course with
  the README's own command (`make`), from files that exist, dropping the test tools in the same
  layer, before pre-fetching the Hub kernel with the course's lock folder;
- the README's front matter is what the Hub reads (sdk docker, app_port, a valid GPU flavour);
- space/start.sh refuses to start without a JUPYTER_TOKEN of 16 characters or more (spaces do not
  count), keeps learner work on persistent storage when there is some, can turn terminals off, and
  with a token it really starts JupyterLab through `make lab` (here on a loopback port, from a copy
  of the repository), which answers only with the token, serves the lessons and their learner
  copies, and stops on SIGTERM.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
START = REPO / "space" / "start.sh"
SETTINGS = REPO / "space" / "settings.py"
README = REPO / "README.md"
VENV = Path(sys.prefix)
SPACE_PORT = 7860
# Every instruction a Dockerfile may hold (https://docs.docker.com/reference/dockerfile/).
INSTRUCTIONS = {
    "ADD",
    "ARG",
    "CMD",
    "COPY",
    "ENTRYPOINT",
    "ENV",
    "EXPOSE",
    "FROM",
    "HEALTHCHECK",
    "LABEL",
    "MAINTAINER",
    "ONBUILD",
    "RUN",
    "SHELL",
    "STOPSIGNAL",
    "USER",
    "VOLUME",
    "WORKDIR",
}
# What Spaces Dev Mode needs in the image (its documentation: SSH, the VS Code server, git pushes).
DEV_MODE_PACKAGES = {"bash", "curl", "wget", "procps", "git", "git-lfs"}


@pytest.fixture(scope="module")
def dockerfile() -> list[dict]:
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(str(DOCKERFILE))
    return [i for i in parser.structure if i["instruction"] != "COMMENT"]


def _values(instructions: list[dict], name: str) -> list[str]:
    return [i["value"] for i in instructions if i["instruction"] == name]


def front_matter() -> dict:
    text = README.read_text(encoding="utf-8")
    match = re.match(r"\A---\n(.*?)\n---\n", text, re.S)
    assert match, "README.md must start with a YAML front matter block (---) for the Hub to read"
    return yaml.safe_load(match.group(1))


# ------------------------------------------------------------------------------------ Dockerfile
def test_dockerfile_uses_only_real_instructions(dockerfile):
    names = [i["instruction"] for i in dockerfile]
    assert names and names[0] == "FROM", f"a Dockerfile starts with FROM, this one with {names[:1]}"
    assert set(names) <= INSTRUCTIONS, f"unknown instructions: {set(names) - INSTRUCTIONS}"
    assert _values(dockerfile, "FROM")[0].startswith("python:3.1"), "the image needs a Python 3.11+ base"


def test_dockerfile_base_image_is_pinned_by_digest(dockerfile):
    (base,) = _values(dockerfile, "FROM")
    assert re.fullmatch(r"python:3\.1\d[\w.-]*@sha256:[0-9a-f]{64}", base), f"pin the base image by digest: {base}"


def _installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _installs(runs: list[str]) -> list[int]:
    """Indices of the RUN lines that run `make install` (followed, in the same RUN, by dropping the test tools)."""
    return [k for k, r in enumerate(runs) if r.strip().startswith("make install")]


def test_dockerfile_follows_the_spaces_conventions(dockerfile):
    runs = " ".join(_values(dockerfile, "RUN"))
    # A non-root user with uid 1000, which owns /app, runs everything after its creation.
    user = re.search(r"useradd\b[^&;]*?(?:-u|--uid)[ =]?1000\s+(\w+)", runs)
    assert user, "no `useradd --uid 1000 <name>` in the Dockerfile"
    name = user.group(1)
    assert _values(dockerfile, "USER") == [name], f"USER must be the uid-1000 user {name!r}"
    assert re.search(rf"chown {name}(:{name})? /app", runs), "/app must belong to the uid-1000 user (Dev Mode)"
    user_at = next(i for i, ins in enumerate(dockerfile) if ins["instruction"] == "USER")
    assert all(i > user_at for i, ins in enumerate(dockerfile) if ins["instruction"] in {"COPY", "WORKDIR"}), (
        "code must be copied as the uid-1000 user, after USER"
    )
    assert all("--chown" in v for v in _values(dockerfile, "COPY")), "every COPY must --chown to the user"
    assert _values(dockerfile, "WORKDIR") == ["/app"], "the code lives in /app (where Dev Mode looks)"
    assert _values(dockerfile, "EXPOSE") == [str(SPACE_PORT)]
    assert front_matter()["app_port"] == SPACE_PORT
    installed = set(re.findall(r"[\w.+-]+", runs))
    assert DEV_MODE_PACKAGES <= installed, f"Dev Mode needs {sorted(DEV_MODE_PACKAGES - installed)} in the image"
    # The container's command: the start script, in exec form (so it receives SIGTERM itself).
    (cmd,) = _values(dockerfile, "CMD")
    argv = json.loads(cmd)
    assert argv[-1] == "space/start.sh" and START.is_file()


def test_dockerfile_installs_with_the_readme_commands(dockerfile):
    readme = README.read_text(encoding="utf-8")
    assert "make lab" in readme and "make test" in readme, "the README's two commands moved: update this test"
    runs = _values(dockerfile, "RUN")
    # Python packages come only from `make install` (the prerequisite of `make lab` and `make test`),
    # never from a pip line of the Dockerfile's own.
    assert not [r for r in runs if re.search(r"\bpip\b|\buv\b|conda", r)], "install through make, not pip directly"
    assert _installs(runs), f"no `RUN make install` in {runs}"
    makefile = (REPO / "Makefile").read_text()
    assert (
        re.search(r"^install:", makefile, re.M)
        and re.search(r"^lab: install", makefile, re.M)
        and re.search(r"^test: install", makefile, re.M)
    ), "make install must be what `make lab`/`make test` install with"
    # What is copied before `make install` is what the Makefile installs from, and it all exists.
    index_of_install = next(i for i, ins in enumerate(dockerfile) if ins["value"].strip().startswith("make install"))
    copied_before = []
    for ins in dockerfile[:index_of_install]:
        if ins["instruction"] == "COPY":
            parts = [p for p in ins["value"].split() if not p.startswith("--")]
            copied_before += parts[:-1]
    for needed in ("pyproject.toml", "Makefile", "README.md", "helpers/"):
        assert needed in copied_before, f"{needed} must be copied before `make install`"
    for source in copied_before:
        assert (REPO / source).exists(), f"COPY source {source} does not exist"
    # The last COPY is followed by `make install`, so the install stamp is newer than every copied
    # file and `make lab` in the container does not reinstall when it starts.
    last_copy = max(i for i, ins in enumerate(dockerfile) if ins["instruction"] == "COPY")
    assert any(
        ins["instruction"] == "RUN" and ins["value"].strip().startswith("make install")
        for ins in dockerfile[last_copy:]
    ), "run `make install` again after the last COPY"
    assert "start.sh" in START.name and "make lab" in START.read_text(), "the start script must run `make lab`"


def test_dockerfile_installs_with_hash_checks(dockerfile):
    """Every `make install` of the image checks the lock's wheels against their hashes (HASHES=1)."""
    runs = _values(dockerfile, "RUN")
    assert all("make install HASHES=1" in runs[k] for k in _installs(runs))
    first = next(i for i, ins in enumerate(dockerfile) if ins["value"].strip().startswith("make install"))
    copied = " ".join(ins["value"] for ins in dockerfile[:first] if ins["instruction"] == "COPY")
    assert "requirements-space.lock" in copied


def test_dockerfile_prefetches_the_pinned_kernel(dockerfile):
    runs = _values(dockerfile, "RUN")
    prefetch = [k for k, r in enumerate(runs) if "scripts/prefetch_kernels.py prefetch" in r]
    install = _installs(runs)
    assert prefetch and install and prefetch[0] > install[0], "pre-fetch the Hub kernel after `make install`"
    # the kernels lock folder is in the image before the pre-fetch, so a committed lock pins what is fetched
    at = next(i for i, ins in enumerate(dockerfile) if "prefetch_kernels.py prefetch" in ins["value"])
    copied = " ".join(ins["value"] for ins in dockerfile[:at] if ins["instruction"] == "COPY")
    assert "local_kernels/hub-lock/" in copied
    import prefetch_kernels

    from helpers.mlp import hub_cache

    assert (hub_cache.LIGER_REPO, hub_cache.LIGER_VERSION) == ("kernels-community/liger-kernels", 1)
    # The command exists as written (argparse exits 0 on --help, 2 on an unknown command).
    with pytest.raises(SystemExit) as exit_info:
        prefetch_kernels.main(["prefetch", "--help"])
    assert exit_info.value.code == 0


def test_dockerignore_keeps_local_builds_out():
    ignored = (REPO / ".dockerignore").read_text().split()
    # A local .venv copied over the image's would replace the environment `make install` built.
    for entry in (".git", ".venv", "site", "test-output", "traces/local", "notebooks/learner"):
        assert entry in ignored, f".dockerignore must exclude {entry}"


# ------------------------------------------------------------------------------------ README
def test_readme_front_matter_is_a_docker_space_on_a_gpu():
    from huggingface_hub import SpaceHardware

    meta = front_matter()
    assert meta["sdk"] == "docker"
    assert meta["app_port"] == SPACE_PORT
    assert meta["title"] and len(meta.get("short_description", "")) <= 60
    hardware = meta["suggested_hardware"]
    assert hardware in {h.value for h in SpaceHardware}, f"{hardware!r} is not a Space hardware flavour"
    assert not hardware.startswith(("cpu", "zero")), "suggest a GPU: the lessons profile CUDA kernels live"
    section = README.read_text(encoding="utf-8").split("## Run it on a Hugging Face Space", 1)
    assert len(section) == 2, "README needs its 'Run it on a Hugging Face Space' section"
    for needed in ("JUPYTER_TOKEN", "Dev Mode", "/app", "LAB_TERMINALS=0", "/data", "shell"):
        assert needed in section[1], f"the Space section must mention {needed}"


# ------------------------------------------------------------------------------------ start.sh
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status(url: str, token: str | None) -> int:
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0


def _space_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"JUPYTER_TOKEN", "PORT", "MAKEFLAGS", "MFLAGS"}}
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        env[var] = str(tmp_path / "jupyter" / var.lower())
    env["VENV"] = str(VENV)  # the Makefile's VENV: this environment, already installed
    env["COURSE_DATA_DIR"] = str(tmp_path / "no-persistent-storage")  # never the machine's own /data
    env.update(extra)
    return env


def test_start_script_refuses_to_run_without_a_token(tmp_path):
    result = subprocess.run(["bash", str(START)], env=_space_env(tmp_path), capture_output=True, text=True, timeout=30)
    assert result.returncode == 64
    assert "JUPYTER_TOKEN" in result.stderr


@pytest.mark.parametrize("token", [" ", " \t \n ", "short-token", "a b c d e f g h i j k l m n o"])
def test_start_script_refuses_a_blank_or_short_token(tmp_path, token):
    env = _space_env(tmp_path, JUPYTER_TOKEN=token)
    result = subprocess.run(["bash", str(START)], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 64, result.stdout
    assert "needs at least 16" in result.stderr and "secrets.token_urlsafe" in result.stderr


def test_test_tools_stay_out_of_the_image(dockerfile):
    """Every `make install` of the image drops, in the same layer, what only the tests use."""
    spec = importlib.util.spec_from_file_location("drop_test_tools", REPO / "space" / "drop_test_tools.py")
    drop_test_tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(drop_test_tools)
    runs = _values(dockerfile, "RUN")
    for k in _installs(runs):
        assert "space/drop_test_tools.py" in runs[k], f"RUN {runs[k]!r} keeps the test tools in its layer"
    tools = {"playwright", "pytest", "pytest-xdist", "nbmake", "ruff", "pre-commit", "dockerfile-parse"}
    missing = sorted(t for t in tools if not _installed(t))
    if missing:  # what is dropped is computed from what is installed: a partial install cannot show it
        pytest.skip(
            f"the test extra is not fully installed in this Python ({', '.join(missing)} missing): `make install`"
        )
    dropped = set(drop_test_tools.test_only_packages())
    assert {"playwright", "pytest", "pytest-xdist", "nbmake", "ruff", "pre-commit", "dockerfile-parse"} <= dropped
    # nothing the lessons need: the course's own requirements and what drop_test_tools itself imports
    for kept in ("torch", "jupyterlab", "ipykernel", "nbformat", "kernels", "pandas", "packaging", "pyyaml"):
        assert kept not in dropped, f"{kept} is needed by the course, not only by the tests"


@pytest.fixture
def fake_app(tmp_path) -> tuple[Path, dict[str, str]]:
    """start.sh in a bare copy of /app, with a `make` that records its arguments instead of starting JupyterLab."""
    app = tmp_path / "app"
    (app / "space").mkdir(parents=True)
    shutil.copy2(START, app / "space" / "start.sh")
    shutil.copy2(SETTINGS, app / "space" / "settings.py")
    (app / "notebooks").mkdir()
    (app / "traces").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$FAKE_MAKE_LOG"\n')
    (bin_dir / "make").chmod(0o755)
    env = _space_env(tmp_path, JUPYTER_TOKEN=secrets.token_urlsafe(24), FAKE_MAKE_LOG=str(tmp_path / "make.log"))
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return app, env


def test_start_script_keeps_learner_work_on_persistent_storage(fake_app, tmp_path):
    app, env = fake_app
    data = tmp_path / "data"
    (data / "course" / "learner").mkdir(parents=True)
    (data / "course" / "learner" / "03_geglu_mlp_eager.ipynb").write_text("edited last week")
    (app / "notebooks" / "learner").mkdir()
    (app / "notebooks" / "learner" / "03_geglu_mlp_eager.ipynb").write_text("fresh copy")
    (app / "notebooks" / "learner" / "05_hand_tuned_kernels.ipynb").write_text("fresh copy")
    env["COURSE_DATA_DIR"] = str(data)
    for _ in range(2):  # a restart finds the links in place
        result = subprocess.run(
            ["bash", "space/start.sh"], cwd=app, env=env, capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 0, result.stderr
    for here, there in (("notebooks/learner", "learner"), ("traces/local", "traces-local")):
        assert (app / here).is_symlink() and (app / here).resolve() == (data / "course" / there).resolve()
    learner = data / "course" / "learner"
    assert (learner / "03_geglu_mlp_eager.ipynb").read_text() == "edited last week"  # never overwritten
    assert (learner / "05_hand_tuned_kernels.ipynb").read_text() == "fresh copy"  # moved over
    assert "kept in" in result.stdout and (tmp_path / "make.log").read_text().split("\n")[0] == "lab"


def test_start_script_without_persistent_storage_says_so(fake_app, tmp_path):
    app, env = fake_app
    result = subprocess.run(["bash", "space/start.sh"], cwd=app, env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "learner work is lost when the Space restarts" in result.stdout
    assert not (app / "notebooks" / "learner").exists() and not (app / "traces" / "local").exists()


@pytest.mark.parametrize("setting, expected", [("0", True), ("1", False), (None, False)])
def test_start_script_can_turn_terminals_off(fake_app, tmp_path, setting, expected):
    app, env = fake_app
    if setting is not None:
        env["LAB_TERMINALS"] = setting
    subprocess.run(["bash", "space/start.sh"], cwd=app, env=env, check=True, capture_output=True, timeout=30)
    args = (tmp_path / "make.log").read_text()
    assert ("--ServerApp.terminals_enabled=False" in args) == expected
    assert env["JUPYTER_TOKEN"] not in args  # the token never goes on a command line


@pytest.fixture
def app_copy(tmp_path) -> Path:
    """The files the image's /app holds, copied with their times (so `make` sees the install as current)."""
    app = tmp_path / "app"
    app.mkdir()
    for name in ("pyproject.toml", "Makefile", "README.md", "requirements.lock", "requirements-space.lock"):
        shutil.copy2(REPO / name, app / name)
    ignore = shutil.ignore_patterns("__pycache__", "learner", ".ipynb_checkpoints", "local")
    for name in ("helpers", "scripts", "space", "notebooks", "traces", "local_kernels"):
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, app / name, ignore=ignore, copy_function=shutil.copy2)
    return app


@pytest.mark.slow
def test_start_script_starts_jupyterlab(app_copy, tmp_path):
    # `make lab` reinstalls when pyproject.toml or the Makefile changed since `make install`; that must
    # not happen here (it would point the editable install at this temporary copy).
    if VENV.resolve() != (REPO / ".venv").resolve():
        pytest.skip(f"starts the Space from the course's own .venv (`make install`); this run uses {sys.executable}")
    uptodate = subprocess.run(["make", "-q", "install", f"VENV={VENV}"], cwd=app_copy, timeout=30)
    if uptodate.returncode != 0:
        pytest.fail(f"{VENV} was not installed from the current pyproject.toml and Makefile: run `make install`")
    token, port = secrets.token_hex(16), _free_port()
    env = _space_env(tmp_path, JUPYTER_TOKEN=token, LAB_HOST="127.0.0.1", LAB_PORT=str(port))
    log = (tmp_path / "start.log").open("wb")
    proc = subprocess.Popen(
        ["bash", "space/start.sh"], cwd=app_copy, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while _status(f"{base}/api/status", token) != 200:
            assert proc.poll() is None, (
                f"start.sh exited with {proc.returncode}:\n{(tmp_path / 'start.log').read_text()[-3000:]}"
            )
            assert time.monotonic() < deadline, "JupyterLab did not answer within 180 s"
            time.sleep(1)
        assert _status(f"{base}/api/status", None) == 403, "the server must refuse requests without the token"
        assert _status(f"{base}/api/status", "wrong-token") == 403
        # `make lab` serves notebooks/ and made the learner copies first.
        request = urllib.request.Request(f"{base}/api/contents", headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            names = {item["name"] for item in json.load(response)["content"]}
        lessons = {p.name for p in (app_copy / "notebooks").glob("[0-9][0-9]_*.ipynb")}
        assert lessons and lessons <= names and "learner" in names, f"served: {sorted(names)}"
        # The Space settings were loaded: the page may only be framed by huggingface.co.
        request = urllib.request.Request(f"{base}/lab", headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert "frame-ancestors 'self' https://huggingface.co" in response.headers.get(
                "Content-Security-Policy", ""
            )
        # SIGTERM to the script's process alone (make, after exec), as `docker stop` does to PID 1:
        # JupyterLab must stop with it, leaving nothing behind in the group.
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.5)
        else:
            pytest.fail("JupyterLab kept running after SIGTERM to start.sh")
        assert _status(f"{base}/api/status", token) == 0
    finally:
        if _group_alive(proc.pid):  # only on failure: end what this test started, and only that
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


# ------------------------------------------------------------------ hostile settings (issue 23)
def _settings():
    spec = importlib.util.spec_from_file_location("space_settings", SETTINGS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _start(app: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "space/start.sh"], cwd=app, env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    "token",
    [
        "\U0001f600" * 4,  # 16 bytes, 4 characters
        "abcdefgh" + "\u200b" * 8,  # zero-width spaces
        "abcdefgh" + "\ufeff\u2060\u200d\u00ad" * 3,  # BOM, word joiner, zero-width joiner, soft hyphen
        "abcdefgh" + "\u3164" * 10,  # Hangul filler: a letter that draws nothing
        "abcdefgh" + "\u2800" * 10,  # braille blank
        "abcdefgh" + "\u0301" * 10,  # combining accents
        "abcdefg\u00a0\u2003\u3000" * 2,  # no-break, em and ideographic spaces
    ],
)
def test_token_counts_visible_characters_not_bytes(fake_app, tmp_path, token):
    app, env = fake_app
    env["JUPYTER_TOKEN"] = token
    result = _start(app, env)
    assert result.returncode == 64 and "visible characters" in result.stderr, result.stderr
    assert not (tmp_path / "make.log").exists()


@pytest.mark.parametrize("token", ["\U0001f600" * 16, "\u00e9" * 16, "Schl\u00fcssel-" * 2])
def test_a_long_token_of_any_letters_is_accepted(fake_app, tmp_path, token):
    app, env = fake_app
    env["JUPYTER_TOKEN"] = token
    assert _start(app, env).returncode == 0 and (tmp_path / "make.log").exists()


@pytest.mark.parametrize(
    "setting, off",
    [("0", True), ("false", True), ("No", True), ("OFF", True), (" off ", True)]
    + [("1", False), ("TRUE", False), ("yes", False), ("On", False), ("", False)],
)
def test_terminal_setting_is_parsed_strictly(fake_app, tmp_path, setting, off):
    app, env = fake_app
    env["LAB_TERMINALS"] = setting
    result = _start(app, env)
    assert result.returncode == 0, result.stderr
    assert ("--ServerApp.terminals_enabled=False" in (tmp_path / "make.log").read_text()) == off


@pytest.mark.parametrize("setting", ["2", "disable", "nope", "f", "0 1", "offf"])
def test_an_unknown_terminal_setting_is_refused(fake_app, tmp_path, setting):
    app, env = fake_app
    env["LAB_TERMINALS"] = setting
    result = _start(app, env)
    assert result.returncode == 64 and f"LAB_TERMINALS={setting!r} is not understood" in result.stderr
    assert not (tmp_path / "make.log").exists()


@pytest.mark.parametrize(
    "name, value",
    [
        ("LAB_HOST", "0.0.0.0; touch {marker}"),
        ("LAB_HOST", "127.0.0.1 --ServerApp.token="),
        ("LAB_HOST", "--ServerApp.token="),
        ("LAB_HOST", "$(touch {marker})"),
        ("LAB_HOST", "`touch {marker}`"),
        ("LAB_HOST", "host\n--ServerApp.token="),
        ("LAB_HOST", "-bad.example"),
        ("LAB_PORT", "7860; touch {marker}"),
        ("LAB_PORT", "0"),
        ("LAB_PORT", "65536"),
        ("LAB_PORT", "-1"),
        ("LAB_PORT", "80 --ServerApp.token="),
        ("LAB_PORT", "\u0668\u0668"),  # Arabic-Indic digits: not a port here
    ],
)
def test_host_and_port_are_validated(fake_app, tmp_path, name, value):
    app, env = fake_app
    marker = tmp_path / "injected"
    env[name] = value.format(marker=marker)
    result = _start(app, env)
    assert result.returncode == 64 and f"{name}=" in result.stderr, result.stderr
    assert not marker.exists() and not (tmp_path / "make.log").exists()


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "0.0.0.0", "localhost", "my-host.example.org"])
def test_good_hosts_and_ports_reach_make(fake_app, tmp_path, host):
    app, env = fake_app
    env.update(LAB_HOST=host, LAB_PORT="8899")
    assert _start(app, env).returncode == 0
    args = (tmp_path / "make.log").read_text().splitlines()
    assert "PORT=8899" in args and any(f"--ip={host} " in a for a in args)


def test_persist_never_deletes_what_it_did_not_copy(fake_app, tmp_path):
    """/data holds newer work; the image holds other versions: every version survives, nothing is overwritten."""
    app, env = fake_app
    data = tmp_path / "data"
    learner = data / "course" / "learner"
    learner.mkdir(parents=True)
    (learner / "03.ipynb").write_text("on /data")
    (learner / "04.ipynb").write_text("same")
    here = app / "notebooks" / "learner"
    (here / "sub").mkdir(parents=True)
    (here / "03.ipynb").write_text("newer, in the image")
    (here / "04.ipynb").write_text("same")
    (here / "sub" / "notes.txt").write_text("mine")
    env["COURSE_DATA_DIR"] = str(data)
    result = _start(app, env)
    assert result.returncode == 0, result.stderr
    assert (learner / "03.ipynb").read_text() == "on /data"
    (kept,) = learner.glob("03.from-image-*.ipynb")
    assert kept.read_text() == "newer, in the image"
    assert not list(learner.glob("04.from-image-*")) and (learner / "sub" / "notes.txt").read_text() == "mine"
    assert here.is_symlink()


def test_persist_removes_nothing_when_a_copy_fails(tmp_path, monkeypatch):
    settings = _settings()
    here, there = tmp_path / "here", tmp_path / "data" / "learner"
    here.mkdir()
    (here / "a.ipynb").write_text("a")
    (here / "b.ipynb").write_text("b")

    calls, real_link = [], os.link

    def failing_link(src, dst):  # the second file meets a full disk
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_link(src, dst)

    monkeypatch.setattr(settings.os, "link", failing_link)
    assert settings.main(["persist", str(here), str(there)]) == 65
    monkeypatch.undo()
    assert sorted(p.name for p in here.iterdir()) == ["a.ipynb", "b.ipynb"]  # nothing removed
    assert not list(there.glob(".*.tmp"))


def test_settings_check_lists_every_problem():
    settings = _settings()
    with pytest.raises(settings.SettingError) as info:
        settings.check({"JUPYTER_TOKEN": "x", "LAB_TERMINALS": "maybe", "LAB_HOST": "a b", "LAB_PORT": "x"})
    text = str(info.value)
    assert all(name in text for name in ("JUPYTER_TOKEN", "LAB_TERMINALS", "LAB_HOST", "LAB_PORT"))
    good = settings.check({"JUPYTER_TOKEN": secrets.token_urlsafe(24)})
    assert good == {"LAB_TERMINALS": "1", "LAB_HOST": "0.0.0.0", "LAB_PORT": "7860"}
