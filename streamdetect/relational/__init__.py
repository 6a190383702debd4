"""Relational algorithms of the pure core: the view-join closure and joins that never blow up."""
