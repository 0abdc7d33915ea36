"""What a session leaves behind: the exports and their data dictionary, the manifest frozen at
creation, the data package, the replay's reading of the pages, and DATA.md generated from the
dictionary.

Floors: docs/ARCHITECTURE.md."""
