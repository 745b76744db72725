"""Commands: slowjob (holds its lock until told to finish), namedjob (explicit key)."""
