from tags import add_tag


def test_add_to_existing():
    assert add_tag("Beach", ["sea"]) == ["sea", "beach"]


def test_no_duplicates():
    assert add_tag(" sea ", ["sea"]) == ["sea"]
