"""Removing a sandbox run's work directory, whatever the program did to its files' rights,
without ever following a link out of it.

Standard library only (the sandbox worker imports it as a sibling script).
"""


from __future__ import annotations

import os
import shutil
import stat


def remove_tree(path: str) -> None:
    """Remove a run's work directory. A program may chmod its own files away, so a failed
    removal restores the owner's rights and tries again, on real directories and files inside
    the work directory only: a link is removed, never followed (it may point anywhere)."""
    root = os.path.realpath(path)

    def make_removable(func, target, _exc):
        try:
            parent = os.path.dirname(target)
            if not is_inside(root, parent) or stat.S_ISLNK(os.lstat(parent).st_mode):
                return
            os.chmod(parent, stat.S_IRWXU)
            if not stat.S_ISLNK(os.lstat(target).st_mode) and is_inside(root, target):
                os.chmod(target, stat.S_IRWXU)
            func(target)
        except OSError:
            pass
    shutil.rmtree(path, onerror=make_removable)


def is_inside(root: str, path: str) -> bool:
    """Whether `path`, its links resolved, is `root` or below it."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip("/") + "/")
