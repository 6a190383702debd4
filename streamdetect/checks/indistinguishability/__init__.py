"""The publisher-side checks (Huang et al.): symmetric indistinguishability, SIND (sind.py) and its
restricted form, RSIND (rsind.py), the private values a class can take, by SAT (private_values.py), and
both behind the check protocol (adapter.py)."""
