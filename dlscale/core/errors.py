"""The error a study's bad input raises: a config key, a hostfile line or an overlay that cannot be
used. Its message starts with what is wrong and where (the key, or the file and line)."""


class ConfigError(ValueError):
    pass
