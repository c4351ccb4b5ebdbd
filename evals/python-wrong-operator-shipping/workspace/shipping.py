"""Shipping costs of an order."""

FREE_SHIPPING_THRESHOLD = 50.00
FLAT_RATE = 4.95


def qualifies_for_free_shipping(subtotal):
    """Orders of 50.00 or more ship free."""
    return subtotal > FREE_SHIPPING_THRESHOLD


def shipping_cost(subtotal):
    if qualifies_for_free_shipping(subtotal):
        return 0.0
    return FLAT_RATE
