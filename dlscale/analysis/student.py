"""Student's t from the special functions scipy.stats.t computes with, bit for bit, without importing
scipy.stats (0.7 s of every analysis step's process); tests needing more of it import it where they run."""

from scipy import special


def quantile(p, df):
    """scipy.stats.t.ppf for 0 < `p` < 1 (at p = 0 stdtrit says +inf, not -inf: no caller asks)."""
    return special.stdtrit(df, p)


def sf(x, df):
    """P(T > x) with `df` degrees of freedom (scipy.stats.t.sf)."""
    return special.stdtr(df, -x)
