"""The chain tier: the real Trainer, JobSet and Job controllers turning TrainJobs into Pods
through nicguard (tests/harness/chain.py)."""
