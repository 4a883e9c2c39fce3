//! Demo forum (being written).
