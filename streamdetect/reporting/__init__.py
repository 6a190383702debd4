"""Edge: render reports for people (rich) and progress bars."""
