from stats import rolling_mean, window_sums


def test_window_sums():
    assert window_sums([1, 2, 3, 4], 2) == [3, 5, 7]


def test_rolling_mean():
    assert rolling_mean([2, 4, 6], 2) == [3.0, 5.0]
