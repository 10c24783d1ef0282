#!/usr/bin/env bash
# Start the course's JupyterLab in a Hugging Face Space: the README's `make lab`, listening on
# 0.0.0.0:7860 (the README front matter's app_port) and protected by the token in $JUPYTER_TOKEN.
# The Dockerfile runs it as the container's command; it also runs directly on any machine where
# `make install` works, e.g. on loopback only:
#   JUPYTER_TOKEN=some-long-secret-token LAB_HOST=127.0.0.1 LAB_PORT=8899 space/start.sh
#
# Settings (Space variables or secrets):
#   JUPYTER_TOKEN    required: the password of this JupyterLab, at least 16 characters that are
#                    not spaces. Whoever has it runs code on the machine (notebooks, terminals).
#   LAB_TERMINALS=0  turns JupyterLab's terminals off (notebook cells still run code).
#   COURSE_DATA_DIR  persistent storage (default /data, where a Space mounts it): when it exists,
#                    the learner copies and saved traces live there and survive restarts.
set -euo pipefail
cd "$(dirname "$0")/.."

MIN_TOKEN_CHARS=16
token_chars=$(printf '%s' "${JUPYTER_TOKEN:-}" | tr -d '[:space:]' | wc -c)
if [ "$token_chars" -lt "$MIN_TOKEN_CHARS" ]; then
    if [ -z "${JUPYTER_TOKEN:-}" ]; then
        echo "space/start.sh: JUPYTER_TOKEN is not set." >&2
    else
        echo "space/start.sh: JUPYTER_TOKEN has $token_chars characters besides spaces; it needs at least $MIN_TOKEN_CHARS." >&2
    fi
    echo "Add a secret named JUPYTER_TOKEN in the Space's settings (Settings > Variables and secrets): it is" >&2
    echo "the password of this JupyterLab, and whoever has it can run code in the Space. Use a long random" >&2
    echo "one, e.g. the output of: python -c 'import secrets; print(secrets.token_urlsafe(24))'" >&2
    echo "Refusing to start a notebook server that anyone could guess their way into." >&2
    exit 64
fi
export JUPYTER_TOKEN  # read by jupyter_server itself: never put on a command line (ps would show it)

# Learner work survives a restart only on persistent storage. When it is mounted, the learner copies
# and the traces a learner saves live there, and the repository points at them with symbolic links
# (anything already in those folders is moved over first, never overwriting what is there).
DATA_DIR="${COURSE_DATA_DIR:-/data}"
if [ -d "$DATA_DIR" ] && [ -w "$DATA_DIR" ]; then
    for pair in "notebooks/learner:learner" "traces/local:traces-local"; do
        here="${pair%%:*}"
        there="$DATA_DIR/course/${pair##*:}"
        mkdir -p "$there"
        if [ -d "$here" ] && [ ! -L "$here" ]; then
            cp -an "$here/." "$there/"  # -n: what persistent storage already holds wins
            rm -rf "$here"
        fi
        ln -sfn "$there" "$here"
        echo "space/start.sh: $here is kept in $there (persistent storage)"
    done
else
    echo "space/start.sh: no persistent storage at $DATA_DIR: learner work is lost when the Space restarts"
fi

TERMINALS_ARG=""
if [ "${LAB_TERMINALS:-1}" = "0" ]; then TERMINALS_ARG="--ServerApp.terminals_enabled=False"; fi

# JupyterLab refuses to run as root unless told; the Space runs as uid 1000, CI machines as root.
ROOT_ARG=""
if [ "$(id -u)" = "0" ]; then ROOT_ARG="--allow-root"; fi

# `exec`: make becomes the container's main process and passes SIGTERM on to JupyterLab.
exec make lab PORT="${LAB_PORT:-7860}" \
    LAB_ARGS="--config=space/jupyter_server_config.py --ip=${LAB_HOST:-0.0.0.0} --no-browser ${ROOT_ARG} ${TERMINALS_ARG}"
