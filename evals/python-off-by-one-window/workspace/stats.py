"""Rolling statistics over a series of sensor readings."""


def window_sums(values, size):
    """Sums of every window of `size` consecutive values, in order.

    window_sums([1, 2, 3, 4], 2) == [3, 5, 7]
    """
    if size <= 0:
        raise ValueError("size must be positive")
    sums = []
    for start in range(len(values) - size):
        sums.append(sum(values[start:start + size]))
    return sums


def rolling_mean(values, size):
    """Means of every window of `size` consecutive values."""
    return [s / size for s in window_sums(values, size)]
