"""Amounts of money as integer cents, so sums are exact."""


def to_cents(amount: float) -> int:
    """12.34 -> 1234."""
    return int(amount * 100)


def format_cents(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"
