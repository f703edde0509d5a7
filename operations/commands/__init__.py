"""radctl command groups, one module each."""
