"""A shopping cart's total."""

from money import format_cents, to_cents


def cart_total(prices):
    """The total of `prices` (floats, in dollars) as `$12.34`."""
    total = sum(prices)
    return format_cents(to_cents(total))
