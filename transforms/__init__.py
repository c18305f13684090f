"""Polyhedral schedule transforms on isl objects (installed as ``kernelfarer.transforms``).

Each transform is a pure, keyword-only function from isl objects to new isl objects.
"""
