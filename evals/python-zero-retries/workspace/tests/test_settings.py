from settings import retries, timeout


def test_default_retries():
    assert retries({}) == 3


def test_configured_retries():
    assert retries({"retries": 5}) == 5


def test_timeout():
    assert timeout({"timeout": "2.5"}) == 2.5
