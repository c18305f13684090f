"""kernelfarer: a source-to-source GEMM loop-nest optimizer for C."""

import os as _os

__version__ = "0.1.0"

# Installed, kernelfarer.transforms and kernelfarer.templates are directories of the package
# (setup.cfg's package_dir).  In a source checkout they are the checkout's top-level transforms/
# and templates/: found here when the checkout itself is on sys.path (the Makefile's editable
# install, "compat" mode), which spares every start of kernelfarer-cc the 12 ms that setuptools'
# import hook for the mapping costs.  Under that hook this changes nothing.
_root = _os.path.dirname(__path__[0])
if not _os.path.isdir(_os.path.join(__path__[0], "transforms")) \
        and _os.path.isfile(_os.path.join(_root, "transforms", "__init__.py")):
    __path__.append(_root)
