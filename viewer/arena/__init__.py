"""The Arena section: two models race on one task side by side, the grader names the winner, a visitor votes
(section.py builds and wires it; match.py starts a match and streams both sides; view.py says what a visitor may
see of a match; api.py is the same for scripts)."""
