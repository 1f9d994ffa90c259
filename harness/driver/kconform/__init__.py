"""kconform: differential conformance and fuzz testing of hypervisor memory ABIs.

The Python driver: builds the C++ engine, runs scenarios on targets, applies
the reviewed baseline of known findings and writes reports. See the README
of the repository for the two commands most users need.
"""

__version__ = "0.1.0"
