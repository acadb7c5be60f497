"""Simulated detectors: recorded scans served on 127.0.0.1 as a detector would stream them."""
