from pages import page, page_count


def test_first_page():
    assert page(list(range(25)), 1) == list(range(10))


def test_last_page():
    assert page(list(range(25)), 3) == [20, 21, 22, 23, 24]


def test_page_count():
    assert page_count(list(range(25))) == 3
