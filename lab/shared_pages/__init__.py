"""The pages every app shares and the game's rules as the pages play them: the round's pages and
wait pages, the payoffs and rows of a decision, the pages' texts and timers, the
everyone-waits.

Floors: docs/ARCHITECTURE.md."""
