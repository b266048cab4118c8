"""The differential suite's building blocks (tests/differential): fixture operators and
their scenarios (`fixtures`), the operators under comparison (`operators`), what a role
could observe or do, recorded per operator (`recorder`), the scenario driver
(`scenario`) and the comparison with its allow-list (`compare`)."""
