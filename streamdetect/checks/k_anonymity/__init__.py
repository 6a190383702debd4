"""k-anonymity by views (Yao, Wang & Jajodia 2005): the check (adapter.py) picks the method the
topology's subcase calls for: association covers, incremental (association_covers.py); the cell
procedure for selections (selection_covers.py); a key's one join path (key_covers.py); matchings of a
key over two views with one selection (key_matching.py); the conservative covers under effective
functional dependencies (conservative_covers.py, functional_dependencies.py); the recomputed methods
behind one interface (recomputed.py); and for every cover a minimal set of views that forces it
(forcing_views.py)."""
