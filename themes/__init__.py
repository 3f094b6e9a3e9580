"""Textual themes shipped with kbtui: the TOML files beside this module.

A package so that the files travel in the wheel as package data and are read
through ``importlib.resources`` (``kbtui.theming``), installed or not.
"""
