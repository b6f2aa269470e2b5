"""The bottom layer (vocabulary, results tree, records, samples, timelines, hardware): imports nothing above it."""
