"""The wheels the GPU check needs beyond what a GPU machine has, for Python 3.12, and their size
against the 64 MiB a GPU window lets one bring (docs/howto/gpus.md).

The list is what the check really imports and marlang requires: the dry run of
benchmarks/gpu.py runs in a child process that reports the distributions of every module it
loaded, and those that marlang's requirements do not reach (optional imports a library tries
when they are installed, as accelerate tries boto3) are dropped; the machine's own packages
(torch, transformers, peft, accelerate and everything they require, or with ``--have FILE`` the
package list of a machine's image, e.g. benchmarks/gpu_image_packages.txt) and marlang itself
are left out. Each is downloaded at the version installed here (the versions the check was tested with),
``--no-deps``, as a manylinux/any wheel for CPython 3.12.
Run: ``python benchmarks/gpu_wheels.py DIR [--have FILE] [--limit-mib 64]``; exits 1 when the wheels and the
repository's tracked files together pass the limit.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ON_THE_GPU_MACHINE = ("torch", "transformers", "peft", "accelerate")

_REPORT = """
import contextlib, importlib.metadata as md, io, json, runpy, sys
sys.argv = ["gpu.py", "--dry-run"]
with contextlib.redirect_stdout(io.StringIO()):
    runpy.run_path(sys.argv_path, run_name="__main__")
by_module = md.packages_distributions()
print(json.dumps(sorted({d for m in list(sys.modules) for d in by_module.get(m.split(".")[0], [])})))
"""


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_distributions() -> set[str]:
    """The distributions whose modules the dry run of the GPU check loads."""
    code = _REPORT.replace("sys.argv_path", repr(str(ROOT / "benchmarks" / "gpu.py")))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return {_key(d) for d in json.loads(out.stdout.strip().splitlines()[-1])}


def closure(roots: tuple[str, ...]) -> set[str]:
    """``roots`` and everything they require (unconditional requirements, as installed here)."""
    seen: set[str] = set()
    todo = [_key(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for req in requires:
            if ";" in req and "extra ==" in req.split(";", 1)[1]:
                continue
            todo.append(_key(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0]))
    return seen


def image_packages(path: Path) -> set[str]:
    """The distribution names a machine's image holds: one file, names split by commas or lines,
    ``#`` starting a comment."""
    text = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
    return {_key(name) for name in re.split(r"[,\s]+", text) if name}


def needed(have: set[str] | None = None) -> dict[str, str]:
    """name -> installed version of each wheel to bring to a machine that holds ``have`` (by
    default the four packages the check assumes and what they require, as installed here)."""
    have = (closure(ON_THE_GPU_MACHINE) if have is None else have) | {"marlang"}
    wanted = imported_distributions() & closure(("marlang",))
    return {name: md.version(name) for name in sorted(wanted - have)}


def repo_bytes() -> int:
    """The size of the repository's tracked files (what `git archive` brings)."""
    archive = subprocess.run(["git", "archive", "--format=tar.gz", "HEAD"], capture_output=True, check=True, cwd=ROOT)
    return len(archive.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="where the wheels go")
    parser.add_argument("--have", type=Path, help="the package list of the GPU machine's image (names)")
    parser.add_argument("--limit-mib", type=float, default=64.0)
    args = parser.parse_args(argv)
    wheels = needed(image_packages(args.have) if args.have else None)
    args.dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3",
                    "--abi", "none", "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
                    "--platform", "manylinux_2_28_x86_64", "--platform", "any", "-d", str(args.dir),
                    *(f"{n}=={v}" for n, v in wheels.items())], check=True)
    files = sorted(args.dir.glob("*.whl"))
    total = sum(f.stat().st_size for f in files)
    for f in files:
        print(f"{f.stat().st_size / 2**20:8.2f} MiB  {f.name}")
    repo = repo_bytes()
    print(f"{len(files)} wheels ({len(wheels)} distributions): {total / 2**20:.1f} MiB; repository "
          f"(git archive): {repo / 2**20:.1f} MiB; together {(total + repo) / 2**20:.1f} of {args.limit_mib:g} MiB")
    return 0 if total + repo <= args.limit_mib * 2**20 else 1


if __name__ == "__main__":
    sys.exit(main())
