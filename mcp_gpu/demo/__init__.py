"""Bundled demo material: `train.py`, a tiny trainer that checkpoints atomically and resumes."""
