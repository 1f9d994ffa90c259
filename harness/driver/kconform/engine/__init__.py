"""The C++ engine seen from Python: building it (the one CMake helper), calling
kconform-runner and kconform-gen, reading verdicts, the baseline, reports."""
