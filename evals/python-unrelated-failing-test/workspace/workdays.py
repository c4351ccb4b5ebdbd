"""Working days for delivery estimates."""

import datetime


def is_weekend(day: datetime.date) -> bool:
    """Saturday and Sunday."""
    return day.weekday() > 5


def next_workday(day: datetime.date) -> datetime.date:
    """The first working day after `day`."""
    day += datetime.timedelta(days=1)
    while is_weekend(day):
        day += datetime.timedelta(days=1)
    return day
