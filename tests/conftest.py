"""Shared by every test folder: this folder is on sys.path, so ``live_cluster`` imports."""
