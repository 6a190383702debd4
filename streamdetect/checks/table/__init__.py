"""The one-table criteria over the private table and each view: table k-anonymity and distinct
l-diversity (anonymity.py)."""
