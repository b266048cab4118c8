"""OLM packaging: ClusterServiceVersion bundles, validation, file-based catalogs."""
