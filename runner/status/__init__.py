"""CR status: the conditions the runtime writes after each run, and writing them."""
