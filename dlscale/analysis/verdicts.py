"""What every comparison shares (comparisons.py's per-pair analyses, blocks.py's block model)."""

ALPHA = 0.05
CONFIDENCE = 0.95
EQUAL = (0.95, 1.05)  # a ratio inside this band is "equal within the precision target"
MOST_BLOCKS = 200  # beyond this a comparison is called out of reach
RESOLVED = ("a faster", "b faster", "equal")
RATE = "throughput_img_per_s"


def verdict(ratio, p_diff, p_equal, alpha=ALPHA):
    """What the (adjusted) tests resolve: `a faster`, `b faster`, `equal` or `unresolved`."""
    if p_diff < alpha:
        return "a faster" if ratio > 1 else "b faster"
    return "equal" if p_equal < alpha else "unresolved"
