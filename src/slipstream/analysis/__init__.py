"""What the analyzed plan of a built query says (stateful operators, watermarks, joins, state
bounds) and the rules checked against it before a query starts."""
