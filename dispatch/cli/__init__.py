"""The dispatch command line."""
