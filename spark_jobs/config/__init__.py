"""The settings language (a leaf: it imports no system).

`fields` declares a setting in one line (default, kind, meaning, unit) and builds a section,
`kinds` says how each kind is written and checked, `layers` reads defaults < file < environment
< overrides with where each key came from, `show` and `commands` are `tideline config show`;
`durations` and `cli_args` parse what commands and settings share.
"""
