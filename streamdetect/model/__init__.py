"""The pure relational model: schemas, views, selections, functional dependencies."""
