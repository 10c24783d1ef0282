"""Layer 5: what a notebook shows and checks: display helpers, storage pictures, exercises, open exercises."""

import os as _os

from ..measure.ceilings_cache import CACHE_ENV as _CACHE_ENV
from ..measure.ceilings_cache import CACHE_FILE_NAME as _CACHE_FILE_NAME
from ..paths import local_traces_dir as _local_traces_dir

# One ceiling set per machine for a session's lessons (and the benchmarks they start, which inherit the variable).
_os.environ.setdefault(_CACHE_ENV, str(_local_traces_dir() / _CACHE_FILE_NAME))
