"""Text helpers for URLs."""

import re


def slugify(title: str) -> str:
    """`Hello, World!` -> `hello-world`: lowercase words joined by single hyphens."""
    words = re.split(r"[^A-Za-z0-9]", title)
    return "-".join(words)
