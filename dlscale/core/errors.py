class ConfigError(ValueError):
    """A study's bad input (a config key, a hostfile line, an overlay); its message starts with what and where."""
