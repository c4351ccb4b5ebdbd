import datetime

from workdays import next_workday


def test_friday_is_followed_by_monday():
    assert next_workday(datetime.date(2024, 3, 1)) == datetime.date(2024, 3, 4)
