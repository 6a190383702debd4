"""Edge: the BP benchmark of Dou & Coulondre (section 4) and timed runs."""
