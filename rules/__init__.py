"""The shipped rule files, installed as the package `kernlint.builtin_rules`.

A regular package (not a namespace one) so that importlib.resources reads the rule files from wheels,
sdist builds and zip imports alike; kernlint.rules.loader never turns a resource into a path.
"""
