"""File mode: the cluster view and the objects to judge, read from YAML/JSON files."""
