"""Evaluation and reporting on top of the crew: run timelines, run reports."""
