"""The Space's settings, checked before JupyterLab starts, and learner work moved to persistent storage.

space/start.sh runs it with the system's Python (standard library only, nothing installed yet):

    python3 space/settings.py check                 # exit 64 with the reasons when a setting is wrong
    python3 space/settings.py persist HERE THERE    # move HERE's files into THERE, losing none

``check`` reads the environment (the token is never put on a command line):

- ``JUPYTER_TOKEN``: at least 16 visible characters. Characters, not bytes (an emoji is one);
  spaces, control and format characters (zero-width spaces, joiners, byte-order marks), combining
  marks and blank fillers (Hangul fillers, the braille blank) do not count.
- ``LAB_TERMINALS``: 1/0, true/false, yes/no, on/off in any case; unset or empty means on.
  Anything else is refused: a value the script does not understand must not leave terminals on.
- ``LAB_HOST``: an IP address or a host name (letters, digits, dots, hyphens); ``LAB_PORT``: a
  port number from 1 to 65535. Both reach a shell command line (`make lab`), so nothing else passes.

On success it prints the checked values as ``NAME=value`` lines, which start.sh reads.

``persist`` moves what the image holds in HERE (e.g. notebooks/learner) into THERE (on /data) file
by file: a file THERE lacks is copied; one THERE holds with the same bytes is left; one THERE
holds with other bytes stays as it is (it is the learner's earlier work) and HERE's version is
kept beside it as ``<name>.from-image-<time><suffix>``. HERE is removed only after every one of its
files was found, byte for byte, in THERE; on any error nothing is removed.
"""

from __future__ import annotations

import datetime as _dt
import filecmp
import ipaddress
import os
import re
import shutil
import sys
import unicodedata
from pathlib import Path

MIN_TOKEN_CHARS = 16
DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORT = 7860
TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off"}
# Letters that draw nothing: they would let a short token look long enough.
_BLANK_LETTERS = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800"}
_HOST_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


class SettingError(ValueError):
    """A Space setting that is missing or not understood."""


def visible_characters(text: str) -> int:
    """How many characters of `text` draw something: separators, controls, format characters, marks and fillers do not."""
    return sum(1 for ch in text if unicodedata.category(ch)[0] not in {"Z", "C", "M"} and ch not in _BLANK_LETTERS)


_TOKEN_ADVICE = (
    "Add a secret named JUPYTER_TOKEN in the Space's settings (Settings > Variables and secrets): it is the "
    "password of this JupyterLab, and whoever has it can run code in the Space. Use a long random one, e.g. "
    "the output of: python -c 'import secrets; print(secrets.token_urlsafe(24))'"
)


def check_token(token: str | None) -> None:
    """At least MIN_TOKEN_CHARS visible characters, else SettingError with what to do."""
    if not token:
        raise SettingError(f"JUPYTER_TOKEN is not set. {_TOKEN_ADVICE}")
    seen = visible_characters(token)
    if seen < MIN_TOKEN_CHARS:
        raise SettingError(
            f"JUPYTER_TOKEN has {seen} visible characters (spaces and invisible characters do not count); "
            f"it needs at least {MIN_TOKEN_CHARS}. {_TOKEN_ADVICE}"
        )


def parse_bool(name: str, value: str | None, default: bool) -> bool:
    """A yes/no setting: 1/0, true/false, yes/no, on/off (any case); unset or empty gives `default`."""
    if value is None or value.strip() == "":
        return default
    word = value.strip().lower()
    if word in TRUE:
        return True
    if word in FALSE:
        return False
    raise SettingError(f"{name}={value!r} is not understood: use one of 1/0, true/false, yes/no, on/off.")


def check_host(value: str | None) -> str:
    """An IP address or a host name, returned as given; anything else (spaces, options, shell syntax) refused."""
    if value is None or value == "":
        return DEFAULT_HOST
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    labels = value[:-1].split(".") if value.endswith(".") else value.split(".")
    if len(value) <= 253 and labels and all(_HOST_LABEL.match(label) for label in labels):
        return value
    raise SettingError(
        f"LAB_HOST={value!r} is not an IP address or a host name (letters, digits, dots and hyphens only), "
        "e.g. 0.0.0.0 (every interface, the default) or 127.0.0.1 (this machine only)."
    )


def check_port(value: str | None) -> int:
    if value is None or value == "":
        return DEFAULT_PORT
    if not re.fullmatch(r"[0-9]{1,5}", value) or not 1 <= int(value) <= 65535:
        raise SettingError(f"LAB_PORT={value!r} is not a port number from 1 to 65535 (a Space listens on 7860).")
    return int(value)


def check(env: dict[str, str]) -> dict[str, str]:
    """Every setting checked; returns the values start.sh uses. Raises SettingError listing every problem."""
    problems, values = [], {}
    for name, step in (
        ("token", lambda: check_token(env.get("JUPYTER_TOKEN"))),
        ("LAB_TERMINALS", lambda: parse_bool("LAB_TERMINALS", env.get("LAB_TERMINALS"), True)),
        ("LAB_HOST", lambda: check_host(env.get("LAB_HOST"))),
        ("LAB_PORT", lambda: check_port(env.get("LAB_PORT"))),
    ):
        try:
            values[name] = step()
        except SettingError as err:
            problems.append(str(err))
    if problems:
        raise SettingError("\n".join(problems))
    return {
        "LAB_TERMINALS": "1" if values["LAB_TERMINALS"] else "0",
        "LAB_HOST": values["LAB_HOST"],
        "LAB_PORT": str(values["LAB_PORT"]),
    }


# ---------------------------------------------------------------------------------------------
# persistent storage
# ---------------------------------------------------------------------------------------------


def _same(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    return b.is_file() and filecmp.cmp(a, b, shallow=False)


def _copy_new(src: Path, dst: Path) -> None:
    """`src` to `dst`, which must not exist: a temporary name, then a hard link that fails if `dst` appeared."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
        return
    tmp = dst.with_name(f".{dst.name}.incomplete-{os.getpid()}.tmp")
    try:
        shutil.copy2(src, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.link(tmp, dst)  # FileExistsError rather than overwriting
    finally:
        tmp.unlink(missing_ok=True)


def persist(here: Path, there: Path, now: _dt.datetime | None = None) -> list[str]:
    """Move the files of `here` into `there` without losing any (see the module docstring); returns what happened."""
    if here.is_symlink() or not here.exists():
        return []
    if not here.is_dir():
        raise SettingError(f"{here} is not a folder: move it away, then start again")
    there.mkdir(parents=True, exist_ok=True)
    stamp = (now or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S-%f")
    report, placed = [], {}
    for src in sorted(p for p in here.rglob("*") if p.is_symlink() or p.is_file()):
        rel = src.relative_to(here)
        dst = there / rel
        if not (dst.exists() or dst.is_symlink()):
            _copy_new(src, dst)
            report.append(f"moved {rel}")
        elif _same(src, dst):
            report.append(f"already there: {rel}")
        else:
            kept = dst.with_name(f"{dst.stem}.from-image-{stamp}{dst.suffix}")
            _copy_new(src, kept)
            report.append(f"{rel} differs from the copy on persistent storage (kept); the image's is {kept.name}")
            dst = kept
        placed[src] = dst
    # remove only what is now found, byte for byte, on persistent storage
    for src, dst in placed.items():
        if not _same(src, dst):
            raise SettingError(f"{src} was not found on {there} after copying it: nothing was removed from {here}")
    shutil.rmtree(here)
    return report


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["check"] and len(argv) == 1:
            for name, value in check(dict(os.environ)).items():
                print(f"{name}={value}")
            return 0
        if argv[:1] == ["persist"] and len(argv) == 3:
            for line in persist(Path(argv[1]), Path(argv[2])):
                print(f"space/settings.py: {line}")
            return 0
    except SettingError as err:
        print(f"space/start.sh: {err}", file=sys.stderr)
        return 64
    except OSError as err:
        print(
            f"space/start.sh: could not move learner work to persistent storage ({err}); nothing was removed",
            file=sys.stderr,
        )
        return 65
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
