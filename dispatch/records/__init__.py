"""Where job records live: the Records contract and its stores."""
