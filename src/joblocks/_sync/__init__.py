"""The sync face: JobLockModel, Lease, keep-alive thread, run_with_lock, configure."""
