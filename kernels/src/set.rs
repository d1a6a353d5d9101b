//! (in progress) the kernel set, one declaration per kernel.
