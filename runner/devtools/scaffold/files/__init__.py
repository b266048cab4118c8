"""The files `init` and `create api` write, one module per part of a project."""
