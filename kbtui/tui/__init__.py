"""Everything Textual: the app, its screens, widgets, commands, messages and themes.

Nothing outside this package imports ``textual``; the UI works through the
use cases of :class:`kbtui.node.Node` and the read models of :mod:`kbtui.reads`.
"""
