"""Foundation: errors, argument checks, events, secrets, process identity."""
