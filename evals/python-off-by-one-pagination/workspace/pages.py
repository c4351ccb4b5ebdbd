"""Pages of search results."""


def page(items, number, per_page=10):
    """Page `number` of `items` (the first page is 1)."""
    if number < 1:
        raise ValueError("pages are numbered from 1")
    start = number * per_page
    return items[start:start + per_page]


def page_count(items, per_page=10):
    return -(-len(items) // per_page)
