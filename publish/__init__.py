"""publish: fenced checkpoint publication for training jobs on compute nodes."""
