"""Command-line tools around oTree for running the lab: ``python -m labserver --help``."""
