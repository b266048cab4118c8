"""What operators of the operator see: logs (and, later, metrics, health, Events)."""
