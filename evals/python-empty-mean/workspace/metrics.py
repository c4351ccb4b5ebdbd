"""Summary figures of response times."""


def mean(values):
    """The arithmetic mean of `values`, or None when there are none."""
    return sum(values) / len(values)


def spread(values):
    """The largest minus the smallest value, or None when there are none."""
    if not values:
        return None
    return max(values) - min(values)
