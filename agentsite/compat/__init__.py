"""Every use of a library's private internals, one module per library.

Each module names the upstream versions it was verified against, and
``tests/compat/test_<module>.py`` checks that the names and signatures it
relies on are still there, so that an upgrade that moves them fails by name.
The rest of the code imports these functions, never the internals. These
modules import no app of agentsite.
"""
