"""The line a nightly job prints about what it processed."""


def summary(processed: int, failed: int) -> str:
    line = "processed " + processed + " records"
    if failed:
        line += f", {failed} failed"
    return line
