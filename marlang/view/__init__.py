"""``marlang view``: a run or comparison as one self-contained HTML page."""

from marlang.view.collect import ViewError, collect
from marlang.view.page import VIEW_FILE, write_view

__all__ = ["VIEW_FILE", "ViewError", "collect", "write_view"]
