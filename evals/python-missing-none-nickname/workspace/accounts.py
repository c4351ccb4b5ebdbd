"""User accounts as the rest of the app shows them."""

from dataclasses import dataclass
from typing import Optional


@dataclass
class User:
    name: str
    nickname: Optional[str] = None


def display_name(user: User) -> str:
    """The nickname when the user set one, else the name."""
    nickname = user.nickname.strip()
    return nickname or user.name
