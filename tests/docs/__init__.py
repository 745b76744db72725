"""The documentation: every python block of README and docs/ runs; the examples run."""
