"""A transformer language model from scratch, organised our own way (an independent solution
of the basics assignment; see course/handout/check_solutions.py)."""
