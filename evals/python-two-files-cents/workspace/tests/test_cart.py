from cart import cart_total


def test_total():
    assert cart_total([1.00, 2.50]) == "$3.50"


def test_total_of_cents():
    assert cart_total([0.29]) == "$0.29"
