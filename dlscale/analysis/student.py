"""Student's t distribution from the special functions scipy.stats.t itself computes with (scipy's
stdtrit and stdtr): the same numbers, bit for bit, without importing scipy.stats, which took 0.7 s
of every analysis step's process (each step is a process of its own) whether it tested anything or
not. The statistical tests that need more of scipy.stats (Shapiro-Wilk, Levene, the studentized
range) import it in the functions that run them."""

from scipy import special


def quantile(p, df):
    """The quantile at probability 0 < `p` < 1 with `df` degrees of freedom (scipy.stats.t.ppf;
    at p = 0 stdtrit says +inf where the support's end is -inf: no caller asks for an end)."""
    return special.stdtrit(df, p)


def sf(x, df):
    """P(T > x) with `df` degrees of freedom (scipy.stats.t.sf)."""
    return special.stdtr(df, -x)
