from shipping import FLAT_RATE, shipping_cost


def test_small_orders_pay_the_flat_rate():
    assert shipping_cost(49.99) == FLAT_RATE


def test_orders_at_the_threshold_ship_free():
    assert shipping_cost(50.00) == 0.0


def test_large_orders_ship_free():
    assert shipping_cost(120.00) == 0.0
