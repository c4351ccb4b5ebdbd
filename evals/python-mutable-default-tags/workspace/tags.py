"""Tags attached to uploaded photos."""


def add_tag(tag, tags=[]):
    """`tags` with `tag` added once, normalised to lowercase."""
    tag = tag.strip().lower()
    if tag not in tags:
        tags.append(tag)
    return tags
