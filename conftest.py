"""Every pytest run here (unit tests, and notebooks under nbmake, whose kernels inherit this environment)
saves traces into build/test-traces/, never into traces/local/, where a learner's own traces live."""

import os
from pathlib import Path

os.environ.setdefault("COURSE_LOCAL_TRACES", str(Path(__file__).resolve().parent / "build" / "test-traces"))
