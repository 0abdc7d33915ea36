"""What every floor of lab/ reads: a session's settings (its config, treatment, online keys) and
its frozen game and experiment, the matching and grouping, languages, the apps' registry, the
participant's text rules, and the small helpers they share. Imports nothing else of lab/.

Floors: docs/ARCHITECTURE.md."""
