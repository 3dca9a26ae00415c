"""The run directory's files read as untrusted input: a file that cannot be what it should be
(truncated, random bytes, JSON nested past the parser's depth, a link, a FIFO or a directory)
is a one-line `DamagedRunFile` naming it and what to do, and a full or read-only disk is one
line too."""

from __future__ import annotations

import contextlib
import csv
import errno
import hashlib
import io
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from marlang.config import ConfigError

WHAT_TO_DO = {
    "manifest.json": "it records the run's start, command, versions and config hash: restore it, or move it "
                     "aside: the next resume asks you to vouch for config.yaml (it says how) and writes a new "
                     "one (without the run's first start and command)",
    "learner_state.json": "it holds the policies the last update accepted: move it aside and resume (marlang run "
                          "--resume), which writes it again from the run's checkpoint",
    "iterations.csv": "it holds one row per finished update (the learning curve): restore it, or move it aside "
                      "and resume; the episodes are kept, the rows of past updates are not written again",
    "llm_calls.csv": "it counts the run's model calls: move it aside and resume; the episodes keep their own "
                     "counts in metrics.csv, the file starts again from the resume on",
    "summary.json": "it is rebuilt from the run's files: move it aside and run marlang report",
    ".lock": "it only names the process that holds the run: remove it when no marlang process uses the run",
    "checkpoints.sqlite": "it holds where the training loop is: restore it from a backup; without it the run "
                          "cannot continue, but its finished episodes stay readable (marlang report, marlang view)",
}
"""What to do about each damaged file (finished episodes are never dropped by the advice)."""

CONFIG_HASH = "config_sha256"
"""The manifest key of the SHA-256 of the ``config.yaml`` the run wrote."""


MANIFEST_FIELDS: dict[str, tuple[type, ...]] = {
    "started": (str,), "command": (list, str), "resumes": (list,), CONFIG_HASH: (str,), "setting": (str,),
    "env_id": (str,), "model_id": (str,), "learner": (str,), "agents": (str,), "device": (str,), "frames": (int,),
    "team": (dict,), "adapters": (dict,), "critic": (dict,), "reward_hook": (str,), "versions": (dict,),
}
"""The kinds of the manifest fields marlang reads back (null stands for an absent field)."""


class DamagedRunFile(ConfigError):
    """A file of a run directory that cannot be read as what it should hold."""


def damaged(path: Path, reason: str) -> DamagedRunFile:
    advice = WHAT_TO_DO.get(path.name, "restore it from a backup, or move it aside")
    return DamagedRunFile(f"{path} is damaged ({reason}); {advice}")


def irregular(mode: int) -> str | None:
    """What a file of ``mode`` is when it is no regular file ("a FIFO", "a directory", ...),
    else None."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a link"))
    return next((kind for test, kind in kinds if test(mode)), "no regular file")


def open_regular(path: Path) -> BinaryIO | None:
    """``path`` opened for reading (None if there is no such file). Anything but a regular
    file is a `DamagedRunFile`: it is opened without blocking, so a FIFO planted in a run
    directory cannot hang its reader (a read of one waits for a writer that never comes)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        kind = irregular(os.fstat(fd).st_mode)
        if kind is not None:
            raise damaged(path, f"{kind}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_regular(path: Path) -> bytes | None:
    """The bytes of the regular file ``path`` (None if there is none; see `open_regular`)."""
    fh = open_regular(path)
    if fh is None:
        return None
    with fh:
        return fh.read()


def json_value(data: bytes | str) -> tuple[Any, str | None]:
    """``data`` parsed as JSON, and None; or None and why it is no JSON (nesting too deep for
    the parser is a damaged value, not a RecursionError)."""
    try:
        return json.loads(data), None
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except json.JSONDecodeError as err:
        return None, f"not JSON: {err.msg} at line {err.lineno} column {err.colno}"
    except RecursionError:
        return None, "JSON nested too deeply to read"


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path`` (None if there is no such file); anything else there is a
    `DamagedRunFile`."""
    data = read_regular(path)
    if data is None:
        return None
    value, problem = json_value(data)
    if problem is None and not isinstance(value, dict):
        problem = f"a JSON {type(value).__name__}, not an object"
    if problem is not None:
        raise damaged(path, problem)
    return value


def read_yaml_mapping(path: Path) -> dict[str, Any] | None:
    """The YAML mapping in ``path`` (None if there is no such file), read with its aliases
    bounded (`marlang.config.loading.load_yaml`); anything else there is a `DamagedRunFile`."""
    import yaml

    from marlang.config.loading import load_yaml

    data = read_regular(path)
    if data is None:
        return None
    try:
        value = load_yaml(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise damaged(path, "not UTF-8 text") from None
    except yaml.YAMLError as err:
        raise damaged(path, f"not YAML ({str(err).splitlines()[0][:200]})") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise damaged(path, f"a YAML {type(value).__name__}, not a mapping")
    return value


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The run's ``manifest.json`` (None if absent), each field marlang reads checked for its
    kind (`MANIFEST_FIELDS`): one of another kind is a `DamagedRunFile` naming it."""
    manifest = read_json_object(path)
    for key, kinds in MANIFEST_FIELDS.items():
        value = (manifest or {}).get(key)
        if value is None:
            continue
        want = " or ".join(_KINDS[kind] for kind in kinds)
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise damaged(path, f"its {key!r} is {_KINDS.get(type(value), type(value).__name__)}, not {want}")
        if key == "resumes" and not (isinstance(value, list) and all(isinstance(entry, dict) for entry in value)):
            raise damaged(path, f"its {key!r} is not a list of objects")
        if key == "adapters" and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
            raise damaged(path, f"its {key!r} maps an agent to something other than text")
    return manifest


_KINDS = {bool: "a boolean", int: "a whole number", float: "a number", str: "text", list: "a list",
          dict: "an object"}
"""JSON kinds in words."""


def read_csv_rows(path: Path, key: str | None = None) -> list[dict[str, str]]:
    """The rows of a CSV file the run appends to; a torn last row (a writer killed mid-line)
    is left out. Bytes that are no text, a row with more cells than the header, or a ``key``
    cell that is no whole number are a `DamagedRunFile`."""
    raw = read_regular(path)
    if raw is None:
        return []
    whole = raw[: raw.rfind(b"\n") + 1]
    try:
        text = whole.decode("utf-8")
    except UnicodeDecodeError as err:
        raise damaged(path, f"byte {err.start} is not UTF-8 text") from None
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = list(reader)
    except csv.Error as err:
        raise damaged(path, f"not CSV: {err}") from None
    for number, row in enumerate(rows, start=2):
        if None in row:
            raise damaged(path, f"line {number} has more cells than the header")
        cell = (row.get(key) or "").strip() if key else "0"
        if not cell.lstrip("-").isdigit():
            raise damaged(path, f"line {number}: {key} {cell!r} is no whole number")
    return rows


def config_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def check_config_unedited(run_path: Path, manifest: dict[str, Any] | None) -> None:
    """Refuse to resume a run whose ``config.yaml`` differs from the one the run wrote (as its
    manifest's `CONFIG_HASH` records): a resume would mix two configs in one run. A manifest
    without the hash (deleted, or the manifest moved aside) cannot tell an edited config from
    the run's own, so it is refused too, saying how to vouch for the config: record its hash."""
    config = run_path / "config.yaml"
    text = (read_regular(config) or b"").decode("utf-8", errors="replace")
    recorded = (manifest or {}).get(CONFIG_HASH)
    if not recorded:
        where = "records no" if manifest is not None else "is missing, so nothing records the"
        raise ConfigError(
            f"{run_path / 'manifest.json'} {where} {CONFIG_HASH}: whether {config} was edited since the run "
            "wrote it cannot be checked, and a resume could mix two configs in one run; if it is the run's own "
            f"config, record its hash (add \"{CONFIG_HASH}\": \"{config_sha256(text)}\" to manifest.json, "
            "creating it as a JSON object if it is missing) and resume again; otherwise start a new run "
            "(marlang run CONFIG --out NEW_DIR)")
    if config_sha256(text) != recorded:
        raise ConfigError(f"{config} was edited after the run wrote it (manifest.json records another "
                          f"{CONFIG_HASH}); a resume would mix two configs in one run: restore the file, or start "
                          "a new run with the edited config (marlang run CONFIG --out NEW_DIR)")


def check_output_folder(path: Path) -> None:
    """Refuse a folder to write into (``--out``) that cannot be one: a file, or a symbolic link
    to nothing (a write would create what it points at, wherever that is)."""
    if path.is_symlink() and not path.exists():
        raise ConfigError(f"--out {path} is a symbolic link to {os.readlink(path)}, which does not exist; give a "
                          "directory (or remove the link)")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {path} is a file, not a directory; give a directory to write into")


def refuse_links(run_path: Path, names: tuple[str, ...]) -> None:
    """A run directory's files are never symbolic links: a write through one would change the
    file it points at."""
    for name in names:
        if (run_path / name).is_symlink():
            raise ConfigError(f"{run_path / name} is a symbolic link; a run directory's files are never links "
                              "(a write would change the file it points at): replace it with the file itself")


STORAGE_ERRORS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
                  errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
                  errno.EPERM: "not permitted", errno.EIO: "an input/output error",
                  errno.ELOOP: "it is a symbolic link, which a run directory never follows"}


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """An OSError of the block names ``path`` (a write through a file descriptor or into a
    temporary names no file, or the wrong one); a directory at ``path`` is a `DamagedRunFile`."""
    try:
        yield
    except IsADirectoryError:  # a directory where the file goes: replacing it would lose what it holds
        raise damaged(path, "a directory, not a regular file") from None
    except OSError as err:
        if err.filename == str(path) or err.errno is None:
            raise
        raise OSError(err.errno, err.strerror or str(err), str(path)) from None


def storage_failure(exc: BaseException) -> str | None:
    """One line for a file that could not be written or read for a reason of the storage (a
    full or read-only disk, no permission, a link); None for any other error."""
    if not isinstance(exc, OSError) or exc.errno not in STORAGE_ERRORS:
        return None
    where = exc.filename or "a file of the run"
    return f"cannot write {where}: {STORAGE_ERRORS[exc.errno]} ({exc.strerror or exc})"


def checkpoint_error(path: Path, err: sqlite3.DatabaseError) -> Exception:
    """What a failure of the checkpoint database at ``path`` is: a `DamagedRunFile` for a file
    that is no database (or a malformed one), else a storage error (full, read-only)."""
    text = str(err)
    if not isinstance(err, sqlite3.OperationalError) or "not a database" in text or "malformed" in text:
        return damaged(path, f"SQLite: {text}")
    code = errno.ENOSPC if "full" in text else errno.EROFS if "readonly" in text else errno.EIO
    return OSError(code, f"SQLite: {text}", str(path))
