# The course in JupyterLab on a GPU, as a Hugging Face Docker Space (README.md: "Run it on a
# Hugging Face Space"). Spaces conventions followed here: the app listens on port 7860 (README
# front matter `app_port`), runs as a non-root user with uid 1000, the code lives in /app (where
# Dev Mode looks for it) and the JupyterLab token comes from the Space secret JUPYTER_TOKEN.
# The course is installed by the README's own command (`make`, from pyproject.toml and Makefile).
#
# The base image is pinned by digest: a tag such as 3.11-slim-bookworm is moved to every rebuild of
# Python and Debian, the digest names one image. (This digest is the one many public Dockerfiles pin
# for that tag; it was not fetched from Docker Hub here, which these machines cannot reach.) To move
# to a newer build on purpose: `docker buildx imagetools inspect python:3.11-slim-bookworm`, then
# replace the digest below with the one it prints first (the multi-platform index).
FROM python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

# make: the README's commands. gcc, g++: Triton and torch.compile build small C/C++ helpers at run
# time. bash, curl, wget, procps, git, git-lfs: what Spaces Dev Mode needs inside the image.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        make gcc g++ libc6-dev bash curl wget procps git git-lfs ca-certificates \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 user \
    && mkdir /app && chown user:user /app
USER user
ENV HOME=/home/user \
    HF_HOME=/home/user/.cache/huggingface \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

# 1. The environment: the files `make lab` and `make test` install from, and nothing else, so this
#    layer is rebuilt only when they change. `make install` creates /app/.venv (torch pinned in the
#    Makefile: TORCH_VERSION; PyPI's Linux wheel of torch is a CUDA build). In the same layer, the
#    packages only the tests use (Playwright, pytest, linters) are uninstalled again: a Space
#    serves lessons, and what is removed within one RUN never reaches the image. HASHES=1: every
#    package of the lock is checked against its SHA-256 (requirements-space.lock, pip --require-hashes);
#    torch (and the CUDA libraries it brings) and the course's own package are not hash-checked.
COPY --chown=user pyproject.toml Makefile README.md requirements.lock requirements-space.lock ./
COPY --chown=user helpers/ helpers/
COPY --chown=user scripts/prefetch_kernels.py scripts/
COPY --chown=user space/drop_test_tools.py space/
RUN make install HASHES=1 && .venv/bin/python space/drop_test_tools.py

# 2. The hand-tuned kernel (kernels-community/liger-kernels, version 1) into the Hugging Face cache
#    while the build has network. With local_kernels/hub-lock/kernels.lock (`kernels lock`), the
#    commit it names is downloaded by the kernels library after its publisher check on the Hub;
#    without it, the branch v1 (which its publisher can move) by name, so that offline loads by
#    version find it. Then an offline load is checked (publisher, commit, files' content hashes).
COPY --chown=user local_kernels/hub-lock/ local_kernels/hub-lock/
RUN .venv/bin/python scripts/prefetch_kernels.py prefetch

# 3. The rest of the course (notebooks, reference traces, local kernels, tests). `make install`
#    again: nothing to do when pyproject.toml and the Makefile are unchanged, and it leaves the
#    install stamp newer than the files just copied, so `make lab` never reinstalls at start-up.
COPY --chown=user . .
RUN make install HASHES=1 && .venv/bin/python space/drop_test_tools.py

EXPOSE 7860
CMD ["bash", "space/start.sh"]
