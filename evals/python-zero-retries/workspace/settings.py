"""Settings of the upload client, from a parsed config file."""

DEFAULT_RETRIES = 3
DEFAULT_TIMEOUT = 30.0


def retries(config: dict) -> int:
    """How often a failed upload is retried; `retries = 0` turns retries off."""
    return config.get("retries") or DEFAULT_RETRIES


def timeout(config: dict) -> float:
    """Seconds before an upload is abandoned."""
    value = config.get("timeout")
    return DEFAULT_TIMEOUT if value is None else float(value)
