"""What many test modules share: the fake API server, the repository's paths, the Hypothesis
profiles."""
