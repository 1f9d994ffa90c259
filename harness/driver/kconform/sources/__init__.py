"""Where kernels and trees come from: Debian packages fetched through a private
apt state, local trees, patched copies, kernels built from full trees."""
