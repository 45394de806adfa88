"""User-facing errors: the CLI prints these as one line and exits with code 2 (no traceback)."""


class UserError(Exception):
    """Bad input (unknown study/method, malformed config, missing or corrupt data, ...).

    The message names the problem and how to fix it.
    """
