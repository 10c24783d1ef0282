#!/usr/bin/env bash
# Start the course's JupyterLab in a Hugging Face Space: the README's `make lab`, listening on
# 0.0.0.0:7860 (the README front matter's app_port) and protected by the token in $JUPYTER_TOKEN.
# The Dockerfile runs it as the container's command; it also runs directly on any machine where
# `make install` works, e.g. on loopback only:
#   JUPYTER_TOKEN=some-secret LAB_HOST=127.0.0.1 LAB_PORT=8899 space/start.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${JUPYTER_TOKEN:-}" ]; then
    echo "space/start.sh: JUPYTER_TOKEN is not set. Add a secret named JUPYTER_TOKEN in the Space's" >&2
    echo "settings (Settings > Variables and secrets): it is the password of this JupyterLab." >&2
    echo "Refusing to start a notebook server that anyone could use." >&2
    exit 64
fi
export JUPYTER_TOKEN  # read by jupyter_server itself: never put on a command line (ps would show it)

# JupyterLab refuses to run as root unless told; the Space runs as uid 1000, CI machines as root.
ROOT_ARG=""
if [ "$(id -u)" = "0" ]; then ROOT_ARG="--allow-root"; fi

# `exec`: make becomes the container's main process and passes SIGTERM on to JupyterLab.
exec make lab PORT="${LAB_PORT:-7860}" \
    LAB_ARGS="--config=space/jupyter_server_config.py --ip=${LAB_HOST:-0.0.0.0} --no-browser ${ROOT_ARG}"
