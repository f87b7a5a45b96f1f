"""Tests for nicguard."""
