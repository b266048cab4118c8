"""Horizontal sharding: CRs spread over operator replicas with Leases and labels."""
