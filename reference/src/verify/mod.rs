//! The second oracle: checks that need no full reference.
