"""`create webhook`: the roles, configuration and Molecule scenario of a kind's webhooks."""
