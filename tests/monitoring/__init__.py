"""Tests of the alert rules, the Grafana dashboard and the monitoring overlay."""
