//! Settlement as a checked model.
