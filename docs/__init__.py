"""kernlint's documentation, installed as the package `kernlint.docs` (package data only: `kernlint explain
--schema` prints rule-language.md from it). A regular package so importlib.resources finds it in a wheel or zip.
"""
