//! (issue 12: being written)
