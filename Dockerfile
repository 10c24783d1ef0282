# The course in JupyterLab on a GPU, as a Hugging Face Docker Space (README.md: "Run it on a
# Hugging Face Space"). Spaces conventions followed here: the app listens on port 7860 (README
# front matter `app_port`), runs as a non-root user with uid 1000, the code lives in /app (where
# Dev Mode looks for it) and the JupyterLab token comes from the Space secret JUPYTER_TOKEN.
# The course is installed by the README's own command (`make`, from pyproject.toml and Makefile).
FROM python:3.11-slim-bookworm

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
#    Makefile: TORCH_VERSION; PyPI's Linux wheel of torch is a CUDA build).
COPY --chown=user pyproject.toml Makefile README.md requirements.lock ./
COPY --chown=user helpers/ helpers/
COPY --chown=user scripts/prefetch_kernels.py scripts/
RUN make install

# 2. The pinned hand-tuned kernel (kernels-community/liger-kernels, version 1) into the Hugging
#    Face cache while the build has network. It downloads by branch name, so the cache holds
#    refs/v1 and later loads with HF_HUB_OFFLINE=1 resolve version=1; it then checks such a load.
RUN .venv/bin/python scripts/prefetch_kernels.py prefetch

# 3. The rest of the course (notebooks, reference traces, local kernels, tests). `make install`
#    again: nothing to do when pyproject.toml and the Makefile are unchanged, and it leaves the
#    install stamp newer than the files just copied, so `make lab` never reinstalls at start-up.
COPY --chown=user . .
RUN make install

EXPOSE 7860
CMD ["bash", "space/start.sh"]
