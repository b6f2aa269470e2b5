"""MkDocs hook: fills each page's placeholders with what docs/generate.py makes from the sources."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from docs import generate  # noqa: E402


def on_page_markdown(markdown, page, config, files):
    return generate.render(markdown)
