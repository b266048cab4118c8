"""watches.yaml, the contract of an operator project.

`model.py` the `Watch` and the file's loading and checks, `watchfields.py` a parser per
field, `envexpand.py` the `${VAR}` expansion, `extravars.py` the extra-vars a run gets.
"""
