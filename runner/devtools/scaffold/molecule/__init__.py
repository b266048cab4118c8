"""The Molecule scenarios of a scaffolded project, run without Docker against a real cluster."""
