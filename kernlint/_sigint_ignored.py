"""Imported first by the fork server of the processes backend (kernlint.parallel.processes), before kernlint.

A terminal's Ctrl-C reaches the whole process group, the fork server too: while it was still importing kernlint
it died with a KeyboardInterrupt traceback of its own after kernlint's one line. From here on it ignores the
signal, as the workers it forks do (the parent stops them)."""
import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
