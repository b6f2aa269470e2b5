"""The bottom layer: the study's vocabulary, the results tree, records, samples, timelines and a
host's hardware. It imports nothing of the project, so every other layer can import it."""
