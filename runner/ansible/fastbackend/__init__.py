"""The fast backend (`--ansible-backend fast`): runs forked from a warm zygote.

`fast.py` (`FastBackend`: the zygotes of an operator, the fallback to ansible-runner),
`zygotes.py` (one zygote process and one run through it, seen from the operator),
`zygoteprocess.py` (the zygote process itself), `wire.py` (what the two agree on, pure). What
it changes inside ansible-core is in `runner.ansible.hooks`.
"""

from runner.ansible.fastbackend.fast import FastBackend

__all__ = ["FastBackend"]
