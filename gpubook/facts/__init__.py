"""What the book takes as given: the spec sheet of each GPU and the recorded runs. Imports nothing of gpubook."""
