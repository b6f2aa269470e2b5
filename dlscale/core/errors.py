class ConfigError(ValueError):
    """A study's bad input (a config key, a hostfile line, an overlay); its message starts with what is
    wrong and where (the key, or the file and line)."""
