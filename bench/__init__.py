"""Benchmarks of nicguard (``make bench``): throughput and latency beside a bare echo, RSS."""
