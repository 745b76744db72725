"""The library's own behaviour on every database × face: the contract, leases, races, failures."""
