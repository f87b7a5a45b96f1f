"""Tests of the file-mode adapter."""
