"""An app with management commands that use single_instance_command."""
