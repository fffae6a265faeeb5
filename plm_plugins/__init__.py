"""Built-in plm stages, one folder per family, each registered through an entry point."""
