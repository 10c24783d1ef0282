#!/usr/bin/env bash
# Start the course's JupyterLab in a Hugging Face Space: the README's `make lab`, listening on
# 0.0.0.0:7860 (the README front matter's app_port) and protected by the token in $JUPYTER_TOKEN.
# The Dockerfile runs it as the container's command; it also runs directly on any machine where
# `make install` works, e.g. on loopback only:
#   JUPYTER_TOKEN=some-long-secret-token LAB_HOST=127.0.0.1 LAB_PORT=8899 space/start.sh
#
# Settings (Space variables or secrets):
#   JUPYTER_TOKEN    required: the password of this JupyterLab, at least 16 visible characters
#                    (characters, not bytes; spaces and invisible characters do not count). Whoever
#                    has it runs code on the machine (notebooks, terminals).
#   LAB_TERMINALS    0/false/no/off turns JupyterLab's terminals off (notebook cells still run code);
#                    1/true/yes/on or unset keeps them; any other value is refused.
#   LAB_HOST, LAB_PORT  where to listen (default 0.0.0.0:7860): an IP address or host name, a port.
#   COURSE_DATA_DIR  persistent storage (default /data, where a Space mounts it): when it exists,
#                    the learner copies and saved traces live there and survive restarts.
# space/settings.py checks every setting (standard library only) and moves learner work to /data.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

# Every setting checked before anything happens; the checked values come back as NAME=value lines.
if ! checked=$("$PY" space/settings.py check); then
    echo "Refusing to start a notebook server with settings it does not understand (see above)." >&2
    exit 64
fi
lab_setting() { printf '%s\n' "$checked" | sed -n "s/^$1=//p"; }
LAB_TERMINALS_ON=$(lab_setting LAB_TERMINALS)
LAB_HOST_OK=$(lab_setting LAB_HOST)
LAB_PORT_OK=$(lab_setting LAB_PORT)
export JUPYTER_TOKEN  # read by jupyter_server itself: never put on a command line (ps would show it)

# Learner work survives a restart only on persistent storage. When it is mounted, the learner copies
# and the traces a learner saves live there, and the repository points at them with symbolic links.
# Anything already in those folders is moved over file by file (space/settings.py persist): what
# persistent storage holds is never overwritten, a different version from the image is kept beside
# it, and the folder is removed only once every file of it is on persistent storage.
DATA_DIR="${COURSE_DATA_DIR:-/data}"
if [ -d "$DATA_DIR" ] && [ -w "$DATA_DIR" ]; then
    for pair in "notebooks/learner:learner" "traces/local:traces-local"; do
        here="${pair%%:*}"
        there="$DATA_DIR/course/${pair##*:}"
        mkdir -p "$there"
        "$PY" space/settings.py persist "$here" "$there"
        ln -sfn "$there" "$here"
        echo "space/start.sh: $here is kept in $there (persistent storage)"
    done
else
    echo "space/start.sh: no persistent storage at $DATA_DIR: learner work is lost when the Space restarts"
fi

TERMINALS_ARG=""
if [ "$LAB_TERMINALS_ON" = "0" ]; then TERMINALS_ARG="--ServerApp.terminals_enabled=False"; fi

# JupyterLab refuses to run as root unless told; the Space runs as uid 1000, CI machines as root.
ROOT_ARG=""
if [ "$(id -u)" = "0" ]; then ROOT_ARG="--allow-root"; fi

# `exec`: make becomes the container's main process and passes SIGTERM on to JupyterLab. The host and
# port were checked above (an address or host name, a number): nothing in them a shell would read.
exec make lab PORT="$LAB_PORT_OK" \
    LAB_ARGS="--config=space/jupyter_server_config.py --ip=$LAB_HOST_OK --no-browser ${ROOT_ARG} ${TERMINALS_ARG}"
