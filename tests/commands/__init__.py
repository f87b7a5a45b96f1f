"""Tests of the command-line commands."""
