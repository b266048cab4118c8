"""The command line: `ansible-operator` and its sub-commands (thin: parse, call, print).

`main.py` the parser and dispatch; `runflags.py` and `runsettings.py` the flags of `run`
and the settings built from them; one `<name>cmd.py` per family of sub-commands.
"""
