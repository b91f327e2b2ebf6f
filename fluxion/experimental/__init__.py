"""Experimental APIs."""
