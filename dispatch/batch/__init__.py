"""A user's own batch script as a dispatch job: its #DISPATCH lines and the request it makes."""
