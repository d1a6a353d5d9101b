//! (in progress) the HIP sources, embedded.
