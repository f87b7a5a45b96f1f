"""File-mode adapter: the cluster view and checked objects read from YAML/JSON files."""
