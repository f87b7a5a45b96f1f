"""The command-line commands beside `nicguard serve`: `check` (offline) and `audit` (on demand)."""
