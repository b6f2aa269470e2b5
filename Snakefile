# The checkout is a study folder too (its config/, hostfiles/ and profiles/ are the package's own):
# `snakemake --cores all` here runs the workflow that ships inside the package.


include: "dlscale/workflow/Snakefile"


# Snakemake takes its default target from this file's own rules, not an included file's.
rule study:
    input:
        rules.all.input,
