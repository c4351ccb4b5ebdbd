from report import summary


def test_summary():
    assert summary(3, 0) == "processed 3 records"
