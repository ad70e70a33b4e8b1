"""Errors raised while loading configuration."""


class ConfigError(Exception):
    """A config file is missing, unreadable or invalid; the message names the key."""
