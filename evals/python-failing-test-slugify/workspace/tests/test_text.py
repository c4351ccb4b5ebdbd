from text import slugify


def test_slugify_joins_lowercase_words():
    assert slugify("Hello, World!") == "hello-world"
